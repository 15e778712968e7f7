# shellcheck shell=bash
# A throw-away one-node Slurm cluster on localhost (munged + slurmctld + slurmd), everything
# under one temporary folder: its own munge key and socket, its own slurm.conf, spool, state,
# logs and ports, so it never touches /etc/slurm, /run/munge or a cluster already running.
# Recipe: ../shared/docs/local-slurm.md. Source this file, then:
#   local_slurm_start DIR   # exports SLURM_CONF; returns 77 if Slurm/munge is absent or won't start
#   local_slurm_stop        # stops the daemons it started (by their PIDs); safe to call twice

LOCAL_SLURM_DIR=""

local_slurm_skip() { echo "SKIP: $*" >&2; return 77; }

# The last lines of those of the given files that exist (for messages).
local_slurm_tail() {
  local f
  for f in "$@"; do [ -s "$f" ] && { echo "[$f]"; tail -n 5 "$f"; }; done
  return 0
}

# A TCP port nobody listens on, from a range unlikely to be used, so two test runs (or a real
# slurmctld on 6817) don't collide. Below Linux's ephemeral range (32768-60999 by default): a
# port there may be the local end of a connection another test holds (an mpirun's TCP links),
# which "nobody listens" does not see and bind() then refuses.
local_slurm_free_port() {
  local port
  for _ in $(seq 50); do
    port=$(( 20000 + RANDOM % 12000 ))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return 0; }
  done
  return 1
}

local_slurm_start() {
  local dir=$1 tool host ctld_port d_port
  for tool in munged munge slurmctld slurmd sbatch squeue scontrol sinfo; do
    command -v "$tool" >/dev/null || { local_slurm_skip "$tool not installed (scripts/install-deps.sh installs slurm-wlm munge)"; return 77; }
  done
  [ "$(id -u)" -eq 0 ] || { local_slurm_skip "a local slurmctld/slurmd needs root (SlurmdUser=root)"; return 77; }
  LOCAL_SLURM_DIR=$dir
  mkdir -p "$dir/state" "$dir/spool"
  chmod 700 "$dir"

  # munge: a fresh key of our own, so /etc/munge's ownership doesn't matter.
  head -c 1024 /dev/urandom > "$dir/munge.key"
  chmod 400 "$dir/munge.key"
  munged --force --key-file="$dir/munge.key" --socket="$dir/munge.sock" \
         --log-file="$dir/munged.log" --pid-file="$dir/munged.pid" \
         --seed-file="$dir/munged.seed" 2>"$dir/munged.err" ||
    { local_slurm_skip "munged would not start: $(local_slurm_tail "$dir/munged.err" "$dir/munged.log")"; return 77; }
  munge -S "$dir/munge.sock" -n | unmunge -S "$dir/munge.sock" | grep -q Success ||
    { local_slurm_skip "munge round trip failed"; return 77; }

  host=$(hostname -s)
  ctld_port=$(local_slurm_free_port) && d_port=$(local_slurm_free_port) ||
    { local_slurm_skip "no free TCP port"; return 77; }
  # NodeAddr/SlurmctldHost(127.0.0.1): no DNS needed for the host name. Jobs may be requeued
  # (JobRequeue=1); RealMemory small enough for any CI runner.
  cat > "$dir/slurm.conf" <<EOF
ClusterName=brtlocal
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$d_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: a requeued job may start again this many seconds after requeue (default 120).
AuthInfo=socket=$dir/munge.sock,cred_expire=5
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/ctld.log
SlurmdLogFile=$dir/d.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
SchedulerType=sched/builtin
# Run the main scheduler every second, so a requeued job starts as soon as it is eligible.
SchedulerParameters=sched_interval=1
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$dir/slurm.conf
  # -c: start clean (no jobs or state from an earlier run); -i: ignore state files.
  slurmctld -c -i -f "$SLURM_CONF" 2>"$dir/slurmctld.err" ||
    { local_slurm_skip "slurmctld would not start: $(local_slurm_tail "$dir/slurmctld.err" "$dir/ctld.log")"; return 77; }
  slurmd -f "$SLURM_CONF" 2>"$dir/slurmd.err" ||
    { local_slurm_skip "slurmd would not start: $(local_slurm_tail "$dir/slurmd.err" "$dir/d.log")"; return 77; }
  local state="" pid
  for _ in $(seq 60); do
    # A controller that died (e.g. its port taken after all) makes every sinfo wait out its
    # message timeout: say so at once instead.
    pid=$(cat "$dir/slurmctld.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      local_slurm_skip "slurmctld exited: $(local_slurm_tail "$dir/slurmctld.err" "$dir/ctld.log")"
      return 77
    fi
    state=$(timeout 5 sinfo -h -n "$host" -o %T 2>/dev/null || true)
    [ "$state" = idle ] && return 0
    sleep 0.5
  done
  local_slurm_skip "node $host not idle after 30 s (state '$state'): $(local_slurm_tail "$dir/ctld.log" "$dir/d.log")"
  return 77
}

local_slurm_stop() {
  [ -n "$LOCAL_SLURM_DIR" ] || return 0
  local dir=$LOCAL_SLURM_DIR name pid
  # Jobs first, so no task outlives the daemons.
  scancel --full --quiet --user=root 2>/dev/null || true
  for name in slurmd slurmctld munged; do
    [ -s "$dir/$name.pid" ] || continue
    pid=$(cat "$dir/$name.pid")
    kill "$pid" 2>/dev/null || continue
    # Gone, or a zombie (daemons are children of init, which may reap them late).
    for _ in $(seq 50); do
      case $(ps -o stat= -p "$pid" 2>/dev/null) in ''|Z*) break ;; esac
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  done
  LOCAL_SLURM_DIR=""
}
