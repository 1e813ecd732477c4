# optkit tune --executor slurm against a real Slurm (slurmctld + slurmd + munge on localhost,
# started here as root and stopped at the end): a 4-trial study on the simulator, every trial an
# sbatch job running `optkit tune --worker`, ends like the same study run locally; a trial whose
# job dies without a result is recorded as crashed and the study goes on; nothing is left in the
# queue and no daemon this test started survives it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm_localhost.sh"

# The jobs run this binary from the scratch folder's archive: both must be reachable from the node.
trap 'slurm_stop; rm -rf "$SCRATCH"' EXIT
chmod 755 "$SCRATCH"
slurm_start "$SCRATCH/slurm"

study=(tune --space slo-tuner --optimizer random --trials 4 --seed 2 --top-k 1 --replicates 1 --format json)
run --quiet "${study[@]}" --executor slurm --slots 2
expect_rc 0
slurm_out=$OUT
run --quiet "${study[@]}"
expect_rc 0
python3 - "$slurm_out" "$OUT" <<'PY' || fail "Slurm study differs from the local one: $slurm_out"
import json, sys
s, l = json.loads(sys.argv[1]), json.loads(sys.argv[2])
key = lambda d: [(t["number"], t["phase"], t["config"], t["outcome"]["value"]) for t in d["trials"]]
assert key(s) == key(l), (key(s), key(l))
assert all(t["outcome"]["engine"]["slurm_state"] == "COMPLETED" for t in s["trials"]), s["trials"]
assert s["best"]["config"] == l["best"]["config"]
PY
slurm_run=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["run_id"])' "$slurm_out")
expect_eq "$(sql "SELECT COUNT(*) FROM trials WHERE run_id=$slurm_run")" 5
[ -z "$(squeue -h)" ] || fail "jobs left in the queue: $(squeue)"

# Jobs submitted held (sbatch --hold) stay pending until released, so the test decides when each
# one may run: no race between a trial finishing and the test acting on it.
held=(tune --space slo-tuner --optimizer random --trials 3 --seed 2 --top-k 0 --executor slurm --slots 1
  --format json --sbatch-arg=--hold)

# wait_for_job: the id of the first job in the queue, within 60 s.
wait_for_job() {
  local id=""
  for _ in $(seq 1 600); do
    id=$(squeue -h -o %i | head -1)
    [ -n "$id" ] && break
    sleep 0.1
  done
  echo "$id"
}

# release_held_while PID: releases every held job until process PID ends.
release_held_while() {
  while kill -0 "$1" 2>/dev/null; do
    for id in $(squeue -h -t PENDING -o %i); do
      scontrol release "$id" 2>/dev/null || true
    done
    sleep 0.2
  done
}

# A job cancelled on the cluster (as a preemption or an admin would): its trial is recorded as
# crashed, quoting the job state, and the study goes on to its next trials.
"$OPTKIT" --quiet "${held[@]}" >"$SCRATCH/cancelled.out" 2>"$SCRATCH/cancelled.err" &
study_pid=$!
job=$(wait_for_job)
[ -n "$job" ] || fail "no trial job submitted: $(squeue) $(cat "$SCRATCH/cancelled.err")"
scancel "$job"
release_held_while "$study_pid"
wait "$study_pid"
rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 1 ] || fail "study after a cancelled job: exit $rc: $(cat "$SCRATCH/cancelled.err")"
python3 - "$SCRATCH/cancelled.out" <<'PY' || fail "a cancelled job should be a crashed trial: $(cat "$SCRATCH/cancelled.out")"
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["trials"]) == 3, len(d["trials"])
crashed = [t for t in d["trials"] if t["outcome"]["status"] == "crashed"]
assert len(crashed) == 1, d["trials"]
assert "CANCELLED" in crashed[0]["outcome"]["error"], crashed[0]
assert all(t["outcome"]["status"] == "measured" for t in d["trials"] if t not in crashed)
PY

# Ctrl-C while a job is queued: the study cancels its jobs with scancel and exits 130.
"$OPTKIT" --quiet "${held[@]}" >"$SCRATCH/interrupted.out" 2>"$SCRATCH/interrupted.err" &
study_pid=$!
job=$(wait_for_job)
[ -n "$job" ] || fail "no trial job submitted: $(squeue)"
kill -INT "$study_pid"
wait "$study_pid"
rc=$?
[ "$rc" -eq 130 ] || fail "Ctrl-C: expected exit 130, got $rc: $(cat "$SCRATCH/interrupted.err")"
for _ in $(seq 1 100); do
  [ -z "$(squeue -h)" ] && break
  sleep 0.1
done
[ -z "$(squeue -h)" ] || fail "Ctrl-C left jobs in the queue: $(squeue)"
expect_eq "$(sql "SELECT status FROM runs WHERE id=(SELECT MAX(id) FROM runs)")" interrupted

slurm_stop
for daemon in slurmctld slurmd; do
  pgrep -f "$daemon -f $SCRATCH/slurm" >/dev/null && fail "$daemon still running"
done
pgrep -f "munged --key-file=$SCRATCH/slurm" >/dev/null && fail "munged still running"
echo "test_cli_tune_slurm: ok"
