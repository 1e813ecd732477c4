# Ctrl-C (SIGINT) to a parent running workers: exit 130, every child and grandchild gone, the run
# and its trials recorded as interrupted.
. "$(dirname "$0")/lib.sh"

pids="$SCRATCH/pids"
mkdir -p "$pids"
cat >"$SCRATCH/tasks.json" <<JSON
[{"payload": {"task": "spawn-tree", "children": 2, "pid_dir": "$pids", "ready_file": "$SCRATCH/ready-1"}, "grace_s": 1},
 {"payload": {"task": "spawn-tree", "children": 2, "pid_dir": "$pids", "ready_file": "$SCRATCH/ready-2"}, "grace_s": 1},
 {"payload": {"task": "hang", "ready_file": "$SCRATCH/ready-3"}, "grace_s": 1}]
JSON

# setsid: the parent leads its own process group, as a shell job would.
setsid "$OPTKIT" -q internal-test --tasks "$SCRATCH/tasks.json" --jobs 3 >"$SCRATCH/out" 2>"$SCRATCH/err" &
parent=$!
# Each child reports when it is set up (grandchildren started, handlers installed); the bound is
# only there so a broken build cannot hang the suite.
ready() { [ -e "$SCRATCH/ready-1" ] && [ -e "$SCRATCH/ready-2" ] && [ -e "$SCRATCH/ready-3" ]; }
for _ in $(seq 1 6000); do
  ready && break
  sleep 0.01
done
ready || fail "the workers did not start: $(cat "$SCRATCH/err")"
[ "$(ls "$pids" | wc -l)" -eq 6 ] || fail "expected 6 worker processes, found $(ls "$pids" | wc -l)"
children=$(pgrep -P "$parent" | tr '\n' ' ')
[ -n "$children" ] || fail "no worker children found"

kill -INT "$parent"
wait "$parent"
RC=$?
OUT=$(cat "$SCRATCH/out") ERR=$(cat "$SCRATCH/err")
expect_rc 130

gone() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
  [ "$state" = "Z" ]
}
# The parent SIGKILLs every group before it exits; orphaned grandchildren are reaped by init in
# its own time, so wait for that rather than sleeping a guessed amount.
for pid in $children $(ls "$pids"); do
  for _ in $(seq 1 3000); do
    gone "$pid" && break
    sleep 0.01
  done
  gone "$pid" || fail "process $pid outlived the interrupted parent: $(cat /proc/$pid/cmdline | tr '\0' ' ')"
done
pgrep -g "$parent" >/dev/null && fail "processes remain in the parent's group"

expect_eq "$(sql "SELECT status || ' ' || exit_code FROM runs")" "interrupted 130"
expect_eq "$(sql "SELECT group_concat(status) FROM trials")" "interrupted,interrupted,interrupted"

echo "ok"
