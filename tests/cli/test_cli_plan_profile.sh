#!/usr/bin/env bash
# optkit plan profile, black-box: the dry run lists the sweep without a GPU; without a usable GPU
# (--gpu 99 names none on any machine) the run exits 3 naming CUDA, leaves no folder behind and
# is archived as failed; an existing database is never overwritten without --replace.
source "$(dirname "$0")/lib.sh"

py() { python3 -c "$1" <<<"$OUT"; }

run plan profile --system h100_sxm --model llama-3.1-8b --dry-run --format json
expect_rc 0
py '
import json, sys
d = json.load(sys.stdin)
assert d["system"] == "h100_sxm" and d["output"] is None and d["measured"] is None, d
assert d["sweep"]["points"] > 1000, d["sweep"]
assert "gemm " in d["sweep"]["summary"] and "attention_decode " in d["sweep"]["summary"], d
assert any("w4a16" in s and "roofline" in s for s in d["skipped_sites"]), d["skipped_sites"]
assert any(s.startswith("collective") for s in d["skipped_sites"]), d["skipped_sites"]
' || fail "dry run JSON: $OUT"
run plan profile --system h100_sxm --model llama-3.1-8b --quick --dry-run
expect_rc 0
expect_out_has "not measured"
expect_out_has "weight-only products"

run plan profile --system h100_sxm --model llama-3.1-8b --quick --gpu 99 --out "$SCRATCH/db"
expect_rc 3
expect_err_has "plan profile needs a CUDA GPU"
[ ! -e "$SCRATCH/db" ] || fail "a failed profile left $SCRATCH/db behind"
[ -z "$(find "$SCRATCH" -maxdepth 1 -name '.db*')" ] || fail "a failed profile left its staging folder"
expect_eq "$(sql "SELECT status FROM runs WHERE command = 'plan profile' ORDER BY id DESC LIMIT 1")" "failed"
run plan profile --system h100_sxm --model llama-3.1-8b --quick --gpu 99 --out "$SCRATCH/db2/"
expect_rc 3
[ -z "$(find "$SCRATCH" -maxdepth 2 -name '.db2*')" ] || fail "--out DIR/ left a staging folder"

mkdir -p "$SCRATCH/existing" && echo "kind,m,n,k,latency_us" >"$SCRATCH/existing/gemm.csv"
run plan profile --system h100_sxm --model llama-3.1-8b --quick --out "$SCRATCH/existing"
expect_rc 2
expect_err_has "already holds a perf database; pass --replace"

run plan profile --system h900_sxm --dry-run
expect_rc 2
expect_err_has "h900_sxm"
run plan profile --system h100_sxm --model llama-9b --dry-run
expect_rc 2
expect_err_has "llama-9b"
run plan profile --model llama-3.1-8b
expect_rc 2
expect_err_has "--system NAME is required"
echo "plan profile CLI tests passed"
