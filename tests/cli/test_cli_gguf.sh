# optkit compress to GGUF and the GGUF back through optkit: a Q4_K_M file from an importance
# matrix is written atomically, archived and reported; eval perplexity runs on it and lands near
# the BF16 model's; doctor reads its file type; an importance matrix from a llama-imatrix file
# works too; the bad inputs are one line and exit 2 with nothing written (a name without .gguf, an
# existing output, a GGUF as compress input, a recipe mixing gguf with a scheme, an architecture
# GGUF export does not write, --imatrix with --calib or a non-GGUF recipe or a file of another kind);
# a legacy imatrix.dat with the same means quantizes the same, one of another model's shapes is
# refused; --imatrix-out writes llama-imatrix's format, which reads back to the same model, and is
# refused without --calib, over an existing file or onto -o.
. "$(dirname "$0")/lib.sh"
MODEL="$OPTKIT_SOURCE_DIR/testdata/models/tiny-base"
CORPORA="$OPTKIT_SOURCE_DIR/testdata/corpora"

run --quiet compress --model "$MODEL" --recipe q4_k_m --calib "$CORPORA/english.calib.txt" --samples 16 \
  -o "$SCRATCH/base.gguf" --imatrix-out "$SCRATCH/own.imatrix.gguf" --format json
expect_rc 0
base_report=$OUT
[ -f "$SCRATCH/base.gguf" ] || fail "no GGUF written"
[ -z "$(find "$SCRATCH" -maxdepth 1 -name '.*base.gguf*')" ] || fail "a staging folder was left: $(ls -a "$SCRATCH")"
python3 - "$OUT" <<'PY' || fail "compress report: $OUT"
import json, sys
r = json.loads(sys.argv[1])
t = r["trials"][0]
assert t["succeeded"], t
m = t["metrics"]
assert m["calibration_tokens"] > 0, m
assert 0 < m["calibration_loss"] < 0.05, m
assert m["compression_ratio"] > 2, m
PY
expect_eq "$(head -c 4 "$SCRATCH/base.gguf")" "GGUF"
expect_eq "$(sql "SELECT COUNT(*) FROM artifacts WHERE path LIKE '%base.gguf'")" 1

# The file as a model: perplexity within 5 % of the BF16 folder's on held-out text.
run --quiet eval perplexity --model "$MODEL" --data "$CORPORA/english.heldout.txt" --ctx 128 --format json
expect_rc 0
bf16=$OUT
run --quiet eval perplexity --model "$SCRATCH/base.gguf" --data "$CORPORA/english.heldout.txt" --ctx 128 --format json
expect_rc 0
python3 - "$bf16" "$OUT" <<'PY' || fail "GGUF perplexity vs BF16: $OUT"
import json, sys
b, g = json.loads(sys.argv[1])["perplexity"], json.loads(sys.argv[2])["perplexity"]
assert b < g < 1.05 * b, (b, g)
PY

run doctor --model "$SCRATCH/base.gguf" --format json
python3 - "$OUT" <<'PY' || fail "doctor on a GGUF: $OUT"
import json, sys
checks = {c["check"]: c for c in json.loads(sys.argv[1])["checks"]}
q = checks["quantization"]
assert q["status"] == "ok" and "GGUF Q4_K_M (general.file_type 15)" in q["detail"], q
assert "importance matrix from" in q["detail"], q
assert checks["tokenizer sample"]["status"] == "ok", checks["tokenizer sample"]
assert checks["chat template"]["status"] == "ok", checks["chat template"]
PY

# Bad inputs: one line, exit 2, nothing written.
run compress --model "$MODEL" --recipe q8_0 -o "$SCRATCH/base-q8"
expect_rc 2
expect_err_has "writes one GGUF file: name it <something>.gguf"
[ ! -e "$SCRATCH/base-q8" ] || fail "wrote $SCRATCH/base-q8"
run compress --model "$MODEL" --recipe q8_0 -o "$SCRATCH/base.gguf"
expect_rc 2
expect_err_has "already exists"
run compress --model "$SCRATCH/base.gguf" --recipe q8_0 -o "$SCRATCH/again.gguf"
expect_rc 2
expect_err_has "reads Hugging Face safetensors folders, not GGUF files"
[ ! -e "$SCRATCH/again.gguf" ] || fail "wrote again.gguf"
cat >"$SCRATCH/mixed.yaml" <<'YAML'
name: mixed
description: both kinds
gguf: {file_type: Q6_K}
scheme: {weights: {num_bits: 4}}
YAML
run compress --model "$MODEL" --recipe "$SCRATCH/mixed.yaml" -o "$SCRATCH/mixed.gguf"
expect_rc 2
expect_err_has "either scheme (compressed-tensors) or gguf"
mkdir "$SCRATCH/window"
cp "$MODEL"/* "$SCRATCH/window/"
python3 - "$SCRATCH/window/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["architectures"], c["model_type"], c["sliding_window"] = ["MistralForCausalLM"], "mistral", 64
json.dump(c, open(sys.argv[1], "w"))
PY
run compress --model "$SCRATCH/window" --recipe q4_k_m -o "$SCRATCH/window.gguf"
expect_rc 2
expect_err_has "GGUF export writes llama.cpp's llama, qwen2, qwen3 and qwen3moe architectures"
[ ! -e "$SCRATCH/window.gguf" ] || fail "wrote window.gguf"
# A split regex llama.cpp has no name for: refused, as llama.cpp would read other tokens.
mkdir "$SCRATCH/split"
cp "$MODEL"/* "$SCRATCH/split/"
python3 - "$SCRATCH/split/tokenizer.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
split = [p for p in t["pre_tokenizer"]["pretokenizers"] if p["type"] == "Split"][0]
split["pattern"]["Regex"] = split["pattern"]["Regex"].replace("\\p{N}{1,3}", "\\p{N}{1,4}")
json.dump(t, open(sys.argv[1], "w"))
PY
run compress --model "$SCRATCH/split" --recipe q8_0 -o "$SCRATCH/split.gguf"
expect_rc 2
expect_err_has "the pre-tokenizer's split is none llama.cpp names"
[ ! -e "$SCRATCH/split.gguf" ] || fail "wrote split.gguf"
# written_back_as_q8_0 MODEL_DIR MAX_KL MIN_TOP1: MODEL_DIR as a Q8_0 GGUF, run back against the
# folder on held-out text: mean KL below MAX_KL, top-1 agreement above MIN_TOP1.
written_back_as_q8_0() {
  local dir=$1 name
  name=$(basename "$dir")
  run --quiet compress --model "$dir" --recipe q8_0 -o "$SCRATCH/$name.gguf"
  expect_rc 0
  run --quiet eval perplexity --model "$SCRATCH/$name.gguf" --kl-base "$dir" \
    --data "$CORPORA/english.heldout.txt" --ctx 64 --max-windows 4 --format json
  expect_rc 0
  python3 - "$OUT" "$2" "$3" <<'PY' || fail "$name as GGUF against its folder: $OUT"
import json, sys
k = json.loads(sys.argv[1])["kl"]
assert k["kl_mean"] < float(sys.argv[2]) and k["top1_agreement"] > float(sys.argv[3]), k
PY
}
# Qwen2 (q/k/v biases) and Qwen3 (per-head q/k norms): the oracle models with the oracle
# tokenizer, written as llama.cpp's qwen2 / qwen3 files, run back within Q8_0's rounding of the
# folders (conformance.gguf_llama_cpp checks them against llama.cpp).
for oracle in qwen2-bias qwen3-qknorm; do
  mkdir "$SCRATCH/$oracle"
  cp "$OPTKIT_SOURCE_DIR/testdata/models/oracle/$oracle/"{config.json,model.safetensors} "$SCRATCH/$oracle/"
  cp "$OPTKIT_SOURCE_DIR/testdata/models/oracle/gemma2-softcap/"{tokenizer.json,tokenizer_config.json} "$SCRATCH/$oracle/"
  written_back_as_q8_0 "$SCRATCH/$oracle" 1e-3 0.9
done
# Mixtral (llama with stacked experts): the oracle's random router is nearly flat, so rounding
# flips a few tokens' experts and the bound is looser than a dense model's
# (test_compress_gguf_experts checks every expert's weights). Its importance matrix, per expert,
# goes out with --imatrix-out and back in with --imatrix to the same tensors.
MIXTRAL="$OPTKIT_SOURCE_DIR/testdata/models/oracle/mixtral-moe"
written_back_as_q8_0 "$MIXTRAL" 0.02 0.85
run --quiet compress --model "$MIXTRAL" --recipe q4_k_m --calib "$CORPORA/english.calib.txt" --seq-len 64 \
  --samples 8 --imatrix-out "$SCRATCH/mixtral.imatrix.gguf" -o "$SCRATCH/mixtral-im.gguf"
expect_rc 0
[ -s "$SCRATCH/mixtral.imatrix.gguf" ] || fail "no mixtral.imatrix.gguf"
run --quiet compress --model "$MIXTRAL" --recipe q4_k_m --imatrix "$SCRATCH/mixtral.imatrix.gguf" \
  -o "$SCRATCH/mixtral-file.gguf"
expect_rc 0
cmp -s <(tail -c 100000 "$SCRATCH/mixtral-im.gguf") <(tail -c 100000 "$SCRATCH/mixtral-file.gguf") ||
  fail "Mixtral quantized with its --imatrix-out file differs from the --calib file it came from"
# A legacy imatrix.dat (one attention entry, written from the format's definition) holds no
# per-expert entries optkit reads: refused rather than leaving the experts unweighted.
python3 - "$SCRATCH/mixtral.imatrix.dat" <<'PY'
import struct, sys
name = b"blk.0.attn_q.weight"
entry = struct.pack("<i", len(name)) + name + struct.pack("<ii", 1, 64) + struct.pack("<64f", *([1.0] * 64))
open(sys.argv[1], "wb").write(struct.pack("<i", 1) + entry)
PY
run compress --model "$MIXTRAL" --recipe q4_k_m --imatrix "$SCRATCH/mixtral.imatrix.dat" -o "$SCRATCH/mixtral-dat.gguf"
expect_rc 2
expect_err_has "no per-expert entries for this mixture of experts"
[ ! -e "$SCRATCH/mixtral-dat.gguf" ] || fail "wrote mixtral-dat.gguf"
# An importance matrix from a llama-imatrix file (written here from the format's definition:
# general.type imatrix, <weight>.in_sum2 F32 [columns] and <weight>.counts F32 [1]), its dataset
# recorded; the wrong pairings of flags refused.
python3 - "$SCRATCH/tiny.imatrix.gguf" <<'PY'
import struct, sys
def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b
kv = [("general.type", 8, string("imatrix")),
      ("imatrix.datasets", 9, struct.pack("<IQ", 8, 1) + string("unit-test text")),
      ("imatrix.chunk_count", 4, struct.pack("<I", 3)),
      ("imatrix.chunk_size", 4, struct.pack("<I", 128))]
tensors = []
for layer in range(4):
    for name, cols in (("attn_q", 192), ("attn_k", 192), ("attn_v", 192), ("attn_output", 192), ("ffn_gate", 192),
                       ("ffn_up", 192), ("ffn_down", 512)):
        w = f"blk.{layer}.{name}.weight"
        tensors.append((w + ".in_sum2", [cols], struct.pack(f"<{cols}f", *[(1 + (c % 7)) * 384.0 for c in range(cols)])))
        tensors.append((w + ".counts", [1, 1], struct.pack("<f", 384.0)))
head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
for key, kind, value in kv:
    head += string(key) + struct.pack("<I", kind) + value
offset, infos, data = 0, b"", b""
for name, dims, raw in tensors:
    infos += string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
    infos += struct.pack("<IQ", 0, offset)
    pad = (-len(raw)) % 32
    data += raw + b"\0" * pad
    offset += len(raw) + pad
header = head + infos
header += b"\0" * ((-len(header)) % 32)
open(sys.argv[1], "wb").write(header + data)
PY
run --quiet compress --model "$MODEL" --recipe q4_k_m --imatrix "$SCRATCH/tiny.imatrix.gguf" -o "$SCRATCH/imatrix.gguf" \
  --format json
expect_rc 0
run doctor --model "$SCRATCH/imatrix.gguf" --format json
python3 - "$OUT" <<'PY' || fail "doctor on the --imatrix GGUF: $OUT"
import json, sys
q = {c["check"]: c for c in json.loads(sys.argv[1])["checks"]}["quantization"]
assert "importance matrix from unit-test text" in q["detail"], q
PY
cmp -s "$SCRATCH/imatrix.gguf" "$SCRATCH/base.gguf" && fail "the importance matrix changed nothing"
# quantize.imatrix.file is the path as given, as llama-quantize records it.
cd "$SCRATCH"
run --quiet compress --model "$MODEL" --recipe q4_k_m --imatrix tiny.imatrix.gguf -o relative.gguf
expect_rc 0
cd - >/dev/null
python3 - "$SCRATCH/relative.gguf" <<'PY' || fail "quantize.imatrix.file is not the path as given"
import struct, sys
name = b"tiny.imatrix.gguf"
entry = b"quantize.imatrix.file" + struct.pack("<IQ", 8, len(name)) + name
assert entry in open(sys.argv[1], "rb").read(4 << 20)
PY
# The same means in llama-imatrix's legacy imatrix.dat (values Σx²/count · ncall, written here from
# its definition) quantize to the same tensors; an importance matrix of another shape is refused.
python3 - "$SCRATCH/tiny.imatrix.dat" "$SCRATCH/other.imatrix.dat" <<'PY'
import struct, sys
def legacy(path, cols_of):
    entries = [(f"blk.{layer}.{name}.weight", cols_of(cols)) for layer in range(4)
               for name, cols in (("attn_q", 192), ("attn_k", 192), ("attn_v", 192), ("attn_output", 192),
                                  ("ffn_gate", 192), ("ffn_up", 192), ("ffn_down", 512))]
    out = struct.pack("<i", len(entries))
    for name, cols in entries:
        out += struct.pack("<i", len(name)) + name.encode() + struct.pack("<ii", 3, cols)
        out += struct.pack(f"<{cols}f", *[(1 + (c % 7)) * 3.0 for c in range(cols)])
    open(path, "wb").write(out + struct.pack("<ii", 3, 9) + b"dat corpus")
legacy(sys.argv[1], lambda cols: cols)
legacy(sys.argv[2], lambda cols: cols * 2)
PY
run --quiet compress --model "$MODEL" --recipe q4_k_m --imatrix "$SCRATCH/tiny.imatrix.dat" -o "$SCRATCH/dat.gguf"
expect_rc 0
cmp -s <(tail -c 1500000 "$SCRATCH/dat.gguf") <(tail -c 1500000 "$SCRATCH/imatrix.gguf") ||
  fail "the legacy imatrix.dat quantized differently from the GGUF matrix with the same means"
run compress --model "$MODEL" --recipe q4_k_m --imatrix "$SCRATCH/other.imatrix.dat" -o "$SCRATCH/other.gguf"
expect_rc 2
expect_err_has "down_proj has 1024 columns in it, 512 in the model (an importance matrix of another model?)"
[ ! -e "$SCRATCH/other.gguf" ] || fail "a refused compress wrote other.gguf"
run compress --model "$MODEL" --recipe q4_k_m --imatrix "$SCRATCH/tiny.imatrix.gguf" \
  --calib "$CORPORA/english.calib.txt" -o "$SCRATCH/both.gguf"
expect_rc 2
expect_err_has "--imatrix and --calib both give the importance matrix"
run compress --model "$MODEL" --recipe w4a16_rtn --imatrix "$SCRATCH/tiny.imatrix.gguf" -o "$SCRATCH/ct"
expect_rc 2
expect_err_has "--imatrix applies to GGUF recipes"
run compress --model "$MODEL" --recipe q4_k_m --imatrix "$SCRATCH/base.gguf" -o "$SCRATCH/notimatrix.gguf"
expect_rc 2
expect_err_has "not an importance matrix"
[ ! -e "$SCRATCH/both.gguf" ] && [ ! -e "$SCRATCH/ct" ] && [ ! -e "$SCRATCH/notimatrix.gguf" ] ||
  fail "a refused compress wrote its output"

# --imatrix-out: the matrix --calib collected, in llama-imatrix's format (general.type imatrix,
# <weight>.in_sum2 F32 [columns, 1] and <weight>.counts F32 [1, 1] per decoder weight, counts the
# calibration tokens), and read back through --imatrix it gives the same tensors as --calib did.
run --quiet compress --model "$MODEL" --recipe q4_k_m --imatrix "$SCRATCH/own.imatrix.gguf" -o "$SCRATCH/own.gguf"
expect_rc 0
python3 - "$SCRATCH/own.imatrix.gguf" "$base_report" "$SCRATCH/own.gguf" "$SCRATCH/base.gguf" <<'PY' ||
import json, math, struct, sys

def gguf(path):  # (metadata, {tensor: (dims, type, bytes)}) of a GGUF file
    b = open(path, "rb").read()
    at = 0
    def take(fmt):
        nonlocal at
        v = struct.unpack_from("<" + fmt, b, at)
        at += struct.calcsize("<" + fmt)
        return v[0]
    def string():
        nonlocal at
        n = take("Q")
        at += n
        return b[at - n:at].decode()
    sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    def value(t):
        if t == 8:
            return string()
        if t == 9:
            item, n = take("I"), take("Q")
            return [value(item) for _ in range(n)]
        return take(sizes[t])
    assert b[:4] == b"GGUF"
    at = 8
    n_tensors, n_kv = take("Q"), take("Q")
    meta = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("I"))
    infos = []
    for _ in range(n_tensors):
        name = string()
        dims = [take("Q") for _ in range(take("I"))]
        infos.append((name, dims, take("I"), take("Q")))
    align = meta.get("general.alignment", 32)
    data = at + (-at) % align
    ends = [o for *_, o in infos[1:]] + [len(b) - data]
    def size(dims, kind, start, end):  # an F32 tensor's own bytes; others up to the next tensor
        return 4 * math.prod(dims) if kind == 0 else end - start
    return meta, {n: (d, t, b[data + o:data + o + size(d, t, o, e)]) for (n, d, t, o), e in zip(infos, ends)}

meta, tensors = gguf(sys.argv[1])
tokens = json.loads(sys.argv[2])["trials"][0]["metrics"]["calibration_tokens"]
assert meta["general.type"] == "imatrix" and meta["imatrix.chunk_count"] == 16, meta
assert meta["imatrix.datasets"][0].endswith("english.calib.txt"), meta
weights = {n[: -len(".in_sum2")] for n in tensors if n.endswith(".in_sum2")}
assert len(weights) == 4 * 7 and "blk.0.attn_q.weight" in weights and "blk.3.ffn_down.weight" in weights, weights
for w in weights:
    dims, kind, raw = tensors[w + ".in_sum2"]
    assert kind == 0 and dims[1] == 1 and len(raw) == 4 * dims[0], (w, dims, kind)
    assert min(struct.unpack(f"<{dims[0]}f", raw)) >= 0, w
    dims, kind, raw = tensors[w + ".counts"]
    assert kind == 0 and dims == [1, 1] and struct.unpack("<f", raw)[0] == tokens, (w, dims, raw)
ours, theirs = gguf(sys.argv[3])[1], gguf(sys.argv[4])[1]
assert ours.keys() == theirs.keys() and all(ours[n] == theirs[n] for n in ours), "tensors differ"
PY
  fail "--imatrix-out's file, or the model read back from it"
run compress --model "$MODEL" --recipe q4_k_m -o "$SCRATCH/nocalib.gguf" --imatrix-out "$SCRATCH/nocalib.imatrix.gguf"
expect_rc 2
expect_err_has "--imatrix-out $SCRATCH/nocalib.imatrix.gguf: the importance matrix comes from --calib with a GGUF recipe"
run compress --model "$MODEL" --recipe q4_k_m --calib "$CORPORA/english.calib.txt" --samples 4 -o "$SCRATCH/again.gguf" \
  --imatrix-out "$SCRATCH/own.imatrix.gguf"
expect_rc 2
expect_err_has "already exists"
run compress --model "$MODEL" --recipe q4_k_m --calib "$CORPORA/english.calib.txt" --samples 4 -o "$SCRATCH/same.gguf" \
  --imatrix-out "$SCRATCH/same.gguf"
expect_rc 2
expect_err_has "the model goes there"
[ ! -e "$SCRATCH/nocalib.gguf" ] && [ ! -e "$SCRATCH/nocalib.imatrix.gguf" ] && [ ! -e "$SCRATCH/again.gguf" ] &&
  [ ! -e "$SCRATCH/same.gguf" ] || fail "a refused --imatrix-out wrote something"
echo "test_cli_gguf: ok"
