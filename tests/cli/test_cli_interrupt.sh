# Ctrl-C (SIGINT) to a parent running workers: exit 130, every child and grandchild gone, the run
# and its trials recorded as interrupted.
. "$(dirname "$0")/lib.sh"

pids="$SCRATCH/pids"
mkdir -p "$pids"
cat >"$SCRATCH/tasks.json" <<JSON
[{"payload": {"task": "spawn-tree", "children": 2, "pid_dir": "$pids"}, "grace_s": 1},
 {"payload": {"task": "spawn-tree", "children": 2, "pid_dir": "$pids"}, "grace_s": 1},
 {"payload": {"task": "hang"}, "grace_s": 1}]
JSON

# setsid: the parent leads its own process group, as a shell job would.
setsid "$OPTKIT" -q internal-test --tasks "$SCRATCH/tasks.json" --jobs 3 >"$SCRATCH/out" 2>"$SCRATCH/err" &
parent=$!
for _ in $(seq 1 500); do
  [ "$(ls "$pids" | wc -l)" -ge 6 ] && break
  sleep 0.01
done
[ "$(ls "$pids" | wc -l)" -ge 6 ] || fail "the workers did not start: $(cat "$SCRATCH/err")"
children=$(pgrep -P "$parent" | tr '\n' ' ')
[ -n "$children" ] || fail "no worker children found"

start=$(date +%s%N)
kill -INT "$parent"
wait "$parent"
RC=$?
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
OUT=$(cat "$SCRATCH/out") ERR=$(cat "$SCRATCH/err")
expect_rc 130
[ "$elapsed_ms" -lt 3000 ] || fail "stopping took ${elapsed_ms} ms (grace is 1 s)"

gone() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 0
  [ "$state" = "Z" ]
}
sleep 0.2
for pid in $children $(ls "$pids"); do
  gone "$pid" || fail "process $pid outlived the interrupted parent: $(cat /proc/$pid/cmdline | tr '\0' ' ')"
done
pgrep -g "$parent" >/dev/null && fail "processes remain in the parent's group"

expect_eq "$(sql "SELECT status || ' ' || exit_code FROM runs")" "interrupted 130"
expect_eq "$(sql "SELECT group_concat(status) FROM trials")" "interrupted,interrupted,interrupted"

echo "ok"
