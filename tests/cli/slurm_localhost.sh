# A real single-node Slurm cluster on localhost for the tests that need one (Debian's slurm-wlm
# and munge, as root, no systemd): `slurm_start DIR` writes a config under DIR, starts munged,
# slurmctld and slurmd on free ports (new ones, up to three times, when another process took the
# controller's port first) and waits for the node to be idle, exporting SLURM_CONF;
# `slurm_stop` cancels every job, waits for the queue to drain, then stops exactly the daemons
# slurm_start started (by their pid files), SIGKILL after a grace period.
# Recipe: ../shared/reference/slurm-localhost.md.

slurm_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

slurm_start() {
  SLURM_DIR=$1
  [ "$(id -u)" -eq 0 ] || fail "the Slurm test starts slurmctld and slurmd, which need root"
  for tool in munged mungekey slurmctld slurmd sbatch scontrol scancel squeue sinfo; do
    command -v "$tool" >/dev/null || PATH="$PATH:/usr/sbin" command -v "$tool" >/dev/null ||
      fail "$tool is missing: scripts/install-deps.sh installs slurm-wlm and munge"
  done
  export PATH="$PATH:/usr/sbin"
  mkdir -p "$SLURM_DIR"/{etc,log,spool/ctld,spool/d,munge/priv}
  chmod 755 "$SLURM_DIR" "$SLURM_DIR/munge"
  chmod 700 "$SLURM_DIR/munge/priv"
  mungekey --create --keyfile="$SLURM_DIR/munge/priv/munge.key" >/dev/null 2>&1 || fail "mungekey failed"
  munged --key-file="$SLURM_DIR/munge/priv/munge.key" --socket="$SLURM_DIR/munge/munge.socket" \
    --pid-file="$SLURM_DIR/munge/munged.pid" --log-file="$SLURM_DIR/log/munged.log" \
    --seed-file="$SLURM_DIR/munge/seed" --origin=127.0.0.1 || fail "munged did not start"
  export SLURM_CONF="$SLURM_DIR/etc/slurm.conf"
  # A free port can be taken by another test between the pick and slurmctld's bind: that attempt
  # is retried on new ports.
  for _ in 1 2 3; do
    slurm_write_config
    : >"$SLURM_DIR/log/slurmctld.log"
    slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start: $(tail -5 "$SLURM_DIR/log/slurmctld.log")"
    slurmd -f "$SLURM_CONF" -N localhost || fail "slurmd did not start: $(tail -5 "$SLURM_DIR/log/slurmd.log")"
    slurm_wait_idle && return 0
    grep -q 'Address already in use' "$SLURM_DIR/log/slurmctld.log" || break
    slurm_kill_pidfiles "$SLURM_DIR/slurmd.pid" "$SLURM_DIR/slurmctld.pid"
  done
  fail "the Slurm node did not become idle: $(timeout 10 sinfo -N 2>&1) $(tail -5 "$SLURM_DIR/log/slurmctld.log")"
}

# slurm.conf under $SLURM_DIR on two distinct free ports.
slurm_write_config() {
  local node ctld_port d_port
  node=$(slurmd -C | head -1 | sed -e 's/NodeName=[^ ]*/NodeName=localhost NodeAddr=127.0.0.1/')
  ctld_port=$(slurm_free_port)
  d_port=$(slurm_free_port)
  while [ "$d_port" = "$ctld_port" ]; do d_port=$(slurm_free_port); done
  cat >"$SLURM_CONF" <<CONF
ClusterName=optkit-test
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SLURM_DIR/munge/munge.socket
StateSaveLocation=$SLURM_DIR/spool/ctld
SlurmdSpoolDir=$SLURM_DIR/spool/d
SlurmctldPidFile=$SLURM_DIR/slurmctld.pid
SlurmdPidFile=$SLURM_DIR/slurmd.pid
SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log
SlurmdLogFile=$SLURM_DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MinJobAge=3600
KillWait=5
$node State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
}

# 0 once the node is idle; 1 when slurmctld gave up (a fatal line in its log) or after 120 s (a
# bound on a wedged start, not a speed expectation: each sinfo is itself cut at 5 s, since one
# against an unreachable controller retries for long).
slurm_wait_idle() {
  local deadline=$((SECONDS + 120))
  while [ "$SECONDS" -lt "$deadline" ]; do
    [ "$(timeout 5 sinfo -h -N -o %T 2>/dev/null | head -1)" = "idle" ] && return 0
    grep -q 'fatal:' "$SLURM_DIR/log/slurmctld.log" 2>/dev/null && return 1
    sleep 0.1
  done
  return 1
}

# TERM the daemons of these pid files, KILL after 5 s.
slurm_kill_pidfiles() {
  local pidfile pid
  for pidfile in "$@"; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null
    rm -f "$pidfile"
  done
}

slurm_stop() {
  [ -n "${SLURM_DIR:-}" ] || return 0
  if [ -f "$SLURM_DIR/slurmctld.pid" ]; then
    scancel --full --quiet $(squeue -h -o %i 2>/dev/null) 2>/dev/null
    for _ in $(seq 1 100); do
      [ -z "$(squeue -h 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  slurm_kill_pidfiles "$SLURM_DIR/slurmd.pid" "$SLURM_DIR/slurmctld.pid" "$SLURM_DIR/munge/munged.pid"
  SLURM_DIR=""
}
