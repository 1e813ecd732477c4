# optkit flow with executor kind slurm against a real Slurm (slurmctld + slurmd + munge on
# localhost, started here as root and stopped at the end): every task an sbatch job whose wrapper
# records the command's exit code in the task folder; the package's chosen model is byte for byte
# the one a local run of the same job chooses; kill -9 of the flow while a job runs, then resume:
# the orphaned job is cancelled, the work redone, the same model packaged; nothing left queued.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm_localhost.sh"

flow_pid=""
trap '[ -n "$flow_pid" ] && kill -KILL "$flow_pid" 2>/dev/null; slurm_stop; rm -rf "$SCRATCH"' EXIT
chmod 755 "$SCRATCH"
slurm_start "$SCRATCH/slurm"

data="$OPTKIT_SOURCE_DIR/testdata"
cat >"$SCRATCH/gate.yaml" <<'YAML'
rules:
  - {suite: arith, metric: 'exact_match,strict-match', min_recovery: 0.9, alpha: 0.05}
YAML
# Two bench trials: a stall of this shared machine during one can break its steadiness (CI saw beta 2.05).
# max_trial_seconds 8: a p95 SLO sizes a trial at 250 requests, ~20 s at the sanitizer build's
# rate (~12 req/s); the cap leaves Release's trials (~200 req/s, about a second each) as they are.
write_job() { # write_job FILE EXECUTOR_KIND
  cat >"$1" <<YAML
name: slurm-check
model: $data/models/tiny-arith
compress: {recipes: [int_w8a8], trials: 2, calib: $data/corpora/english.calib.txt, samples: 16, seq_len: 64, seed: 3}
gate: {suite: arith, rules: gate.yaml, limit: 20}
bench: {profile: chat-small, slo: ["e2e:p95<=30s"], min_trial_seconds: 0.5, max_trial_seconds: 8, max_trials: 2,
  beta_tolerance: 0.9, max_dispatch_lag_ms: 1000}
executor: {kind: $2, slots: 2, threads: 1}
YAML
}
write_job "$SCRATCH/local.yaml" local
write_job "$SCRATCH/slurm.yaml" slurm
model_digest() { python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["recipe"], m["trial"], m["files"]["model/model.safetensors"])' "$1/package/manifest.json"; }

run --quiet flow run "$SCRATCH/slurm.yaml" -o "$SCRATCH/slurm" --format json
expect_rc 0
reference=$(model_digest "$SCRATCH/slurm")
# The same job run locally chooses the same model (left to Release: the sanitizer build serves ~10x slower).
if ! sanitizer_build; then
  run --quiet flow run "$SCRATCH/local.yaml" -o "$SCRATCH/local"
  expect_rc 0
  expect_eq "$(model_digest "$SCRATCH/local")" "$reference"
fi
for dir in "$SCRATCH"/slurm/work/*/; do
  [ -s "$dir/slurm_job" ] && [ -s "$dir/exit_code" ] || fail "task folder $dir was not run as a Slurm job"
done
[ -z "$(squeue -h)" ] || fail "jobs left in the queue: $(squeue)"

# kill -9 the flow while its bench job runs; the job is orphaned on the cluster until resume cancels it.
"$OPTKIT" --quiet flow run "$SCRATCH/slurm.yaml" -o "$SCRATCH/killed" >/dev/null 2>&1 &
flow_pid=$!
for _ in $(seq 1 1200); do
  compgen -G "$SCRATCH/killed/work/bench-*/slurm_job" >/dev/null && break
  sleep 0.1
done
orphan=$(cat "$SCRATCH"/killed/work/bench-*/slurm_job 2>/dev/null)
[ -n "$orphan" ] || fail "the bench job never started"
kill -KILL "$flow_pid"
wait "$flow_pid" 2>/dev/null
flow_pid=""
run --quiet flow resume "$SCRATCH/killed"
expect_rc 0
expect_eq "$(model_digest "$SCRATCH/killed")" "$reference"
squeue -h -j "$orphan" 2>/dev/null | grep -q . && fail "the orphaned job $orphan still runs"
[ -z "$(squeue -h)" ] || fail "jobs left in the queue: $(squeue)"
