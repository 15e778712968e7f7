# shellcheck shell=bash
# A multi-node Slurm on the cluster harness (tests/cluster/cluster.sh start DIR --slurm): one
# slurmctld on this machine at the bridge's address under the machine's own host name (the
# "login node"), one slurmd on every host (`slurmd -N hK`, inside the host's namespaces), and a
# munged per host plus one for the controller, all sharing one key. sbatch/srun/squeue run here
# with SLURM_CONF=$CLUSTER_DIR/slurm/slurm.conf (cluster_slurm_env prints the export); jobs run
# on the hosts. A fast failure detector for tests: SlurmdTimeout=10 s (a host whose slurmd stops
# answering is DOWN after that and its jobs NODE_FAIL: requeued when they allow it).
# Sourced by cluster.sh; Debian's slurm-wlm and munge (scripts/install-deps.sh).

cluster_slurm_tail() {
  local f
  for f in "$@"; do [ -s "$f" ] && { echo "[$f]"; tail -n 5 "$f"; }; done
  return 0
}

# The socket every munge client uses: under /run, which is each host's own (a tmpfs of its
# mount namespace) and, for the controller, this machine's.
cluster_munge_socket() { echo "/run/brt-munge-$(cluster_get instance)/munge.sock"; }

# munged for HOST ("" = the controller, on this machine), with the cluster's key.
cluster_start_munged() {
  local host=$1 d sock
  sock=$(cluster_munge_socket)
  if [ -n "$host" ]; then d=$CLUSTER_DIR/hosts/$host/munge; else d=$CLUSTER_DIR/slurm/munge; fi
  mkdir -p "$d"
  local -a run=()
  [ -n "$host" ] && run=(cluster_exec "$host")
  "${run[@]}" mkdir -p "$(dirname "$sock")" &&
    "${run[@]}" munged --force --key-file="$CLUSTER_DIR/slurm/munge.key" --socket="$sock" \
      --log-file="$d/munged.log" --pid-file="$d/munged.pid" --seed-file="$d/munged.seed" 2> "$d/munged.err" ||
    { cluster_skip "munged${host:+ on $host} would not start: $(cluster_slurm_tail "$d/munged.err" "$d/munged.log")"; return 77; }
}

cluster_write_slurm_conf() {
  local s=$CLUSTER_DIR/slurm net host ctld_port
  net=$(cluster_get net)
  ctld_port=$(( 20000 + RANDOM % 20000 ))
  echo "$ctld_port" > "$s/ctld.port"
  {
    cat <<EOF
ClusterName=brtcluster$(cluster_get instance)
SlurmctldHost=$(hostname -s)($net.254)
SlurmctldPort=$ctld_port
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: a requeued job may start again this many seconds after requeue (default 120).
AuthInfo=socket=$(cluster_munge_socket),cred_expire=5
CredType=cred/munge
StateSaveLocation=$s/state
# %n: the node's name, so every host keeps its own (on the shared file system, readable here).
SlurmdSpoolDir=$s/spool-%n
SlurmdPidFile=/run/slurmd.pid
SlurmctldPidFile=$s/slurmctld.pid
SlurmctldLogFile=$s/ctld.log
SlurmdLogFile=$s/d-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
JobRequeue=1
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
MinJobAge=600
# A host whose slurmd stops answering is DOWN after 10 s (default 300) and its jobs NODE_FAIL.
SlurmdTimeout=10
MessageTimeout=5
KillWait=5
EOF
    for host in $(cluster_hosts); do
      echo "NodeName=$host NodeAddr=$(cluster_addr "$host") CPUs=2 RealMemory=1000 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=$(cluster_hosts | paste -sd,) Default=YES MaxTime=INFINITE State=UP"
  } > "$s/slurm.conf"
}

# slurmd on HOST (again after it died: the same command).
cluster_start_slurmd() {
  local host=$1
  cluster_exec "$host" slurmd -N "$host" -f "$CLUSTER_DIR/slurm/slurm.conf" \
    2> "$CLUSTER_DIR/hosts/$host/log/slurmd.err" ||
    { cluster_skip "slurmd on $host would not start: $(cluster_slurm_tail "$CLUSTER_DIR/hosts/$host/log/slurmd.err" "$CLUSTER_DIR/slurm/d-$host.log")"; return 77; }
}

# PID of HOST's slurmd (its pid file is in the host's own /run).
cluster_slurmd_pid() { cluster_exec "$1" cat /run/slurmd.pid 2> /dev/null; }

cluster_slurm_env() { echo "export SLURM_CONF=$CLUSTER_DIR/slurm/slurm.conf"; }

# Waits until every host (or the given ones) is idle; 1 after $1 seconds.
cluster_slurm_wait_idle() {
  local limit=$1 states
  shift
  local want
  want=$(printf '%s\n' "${@:-$(cluster_hosts)}" | sort | paste -sd,)
  for _ in $(seq $((limit * 2))); do
    states=$(sinfo -h -N -n "$want" -o '%N %T' 2> /dev/null | sort -u)
    [ -n "$states" ] && ! grep -qv ' idle$' <<< "$states" && return 0
    sleep 0.5
  done
  echo "cluster: nodes not idle after $limit s: $states" >&2
  return 1
}

cluster_slurm_start() {
  local tool s=$CLUSTER_DIR/slurm host
  for tool in munged munge slurmctld slurmd sbatch squeue scontrol sinfo srun; do
    command -v "$tool" > /dev/null || { cluster_skip "$tool not installed (scripts/install-deps.sh installs slurm-wlm munge)"; return 77; }
  done
  mkdir -p "$s/state"
  head -c 1024 /dev/urandom > "$s/munge.key"
  chmod 400 "$s/munge.key"
  cluster_start_munged "" || return 77
  for host in $(cluster_hosts); do cluster_start_munged "$host" || return 77; done
  munge -S "$(cluster_munge_socket)" -n | cluster_exec h1 unmunge -S "$(cluster_munge_socket)" | grep -q Success ||
    { cluster_skip "munge credentials from this machine are not accepted on h1"; return 77; }
  cluster_write_slurm_conf
  export SLURM_CONF=$s/slurm.conf
  slurmctld -c -i -f "$SLURM_CONF" 2> "$s/slurmctld.err" ||
    { cluster_skip "slurmctld would not start: $(cluster_slurm_tail "$s/slurmctld.err" "$s/ctld.log")"; return 77; }
  for host in $(cluster_hosts); do cluster_start_slurmd "$host" || return 77; done
  cluster_slurm_wait_idle 30 || { cluster_skip "Slurm nodes did not become idle: $(cluster_slurm_tail "$s/ctld.log")"; return 77; }
  return 0
}

# Jobs first (so no task outlives the daemons), then slurmd on every live host, slurmctld and
# the controller's munged (the hosts' munged die with their hosts).
cluster_slurm_stop() {
  local s=$CLUSTER_DIR/slurm host pid
  [ -d "$s" ] || return 0
  [ -f "$s/slurm.conf" ] && SLURM_CONF=$s/slurm.conf scancel --full --quiet --user=root 2> /dev/null
  for host in $(cluster_hosts); do
    [ -s "$CLUSTER_DIR/hosts/$host/pid" ] || continue
    pid=$(cluster_slurmd_pid "$host") && kill "$pid" 2> /dev/null
  done
  for pid in "$(cat "$s/slurmctld.pid" 2> /dev/null)" "$(cat "$s/munge/munged.pid" 2> /dev/null)"; do
    [ -n "$pid" ] || continue
    kill "$pid" 2> /dev/null || continue
    for _ in $(seq 50); do
      case $(ps -o stat= -p "$pid" 2> /dev/null) in '' | Z*) break ;; esac
      sleep 0.1
    done
    kill -9 "$pid" 2> /dev/null
  done
  rm -rf "$(dirname "$(cluster_munge_socket)")"
  rm -rf "$s"
}
