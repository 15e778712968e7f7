#!/usr/bin/env bash
# A throw-away multi-host cluster on one machine (docs/parallelism.md "The test
# cluster"): N hosts (2-4 in the tests), each a set of Linux namespaces — its own network
# namespace with an address on a private bridge, its own host name (UTS) and its own mount table
# (a node-local /tmp, /run and /dev/shm; an /etc/hosts naming every host; the site's Open MPI
# and ssh client configs) — with its own sshd (Debian's openssh-server) on its address, so
# mpirun launches across the hosts as on a real cluster: `ssh HOST orted ...` over the bridge,
# TCP between hosts, shared memory within one. A shared file system (a tmpfs mounted before the
# hosts exist, so every host sees the same one at the same path) stands in for the cluster's
# NFS/Lustre; each host's /tmp is its node-local scratch. tests/cluster/cluster_slurm.sh adds
# a multi-node Slurm on top (--slurm).
#
#   cluster.sh start DIR [--hosts N] [--cpus "LIST1 LIST2 ..."] [--shared-mb M] [--slurm]
#   cluster.sh stop DIR                 every process of every host, the daemons, the
#                                       namespaces, the bridge and DIR itself (KEEP_WORK=1 keeps DIR)
#   cluster.sh exec DIR HOST CMD...     CMD on HOST (environment and working directory kept)
#   cluster.sh cut DIR HOST | heal DIR HOST     take HOST's link to the bridge down / up
#   cluster.sh slow DIR HOST RATE       limit HOST's link to RATE (tc units, e.g. 20mbit)
#   cluster.sh readonly DIR HOST | readwrite DIR HOST   the shared file system as HOST sees it
#   cluster.sh kill-host DIR HOST       SIGKILL every process of HOST at once (the host dies;
#                                       its network stays, so its peers see connections close)
#   cluster.sh procs DIR [HOST]         processes running on the hosts ("HOST PID COMMAND")
#   cluster.sh status DIR               hosts, addresses, directories
#
# Or source it and call cluster_start / cluster_stop / cluster_exec / ... with CLUSTER_DIR set
# (cluster_start sets it). Everything lives under DIR (not under /tmp: each host mounts its own
# /tmp). Addresses: 10.77.K.0/24 on a bridge this script creates (K = a free instance number),
# hosts .1-.N, the bridge itself (the Slurm controller) .254; nothing outside the machine is
# ever addressed. Needs root, ip(8), nsenter(1), unshare(1) and sshd; where they are missing or
# namespaces cannot be created, start prints "SKIP: cluster harness: ..." and returns 77.
set -uo pipefail

CLUSTER_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-}

cluster_skip() { echo "SKIP: cluster harness: $*" >&2; return 77; }
cluster_die() { echo "cluster: $*" >&2; return 1; }
cluster_get() { cat "$CLUSTER_DIR/$1" 2>/dev/null; }
cluster_hosts() { cluster_get host-list; }
cluster_addr() { echo "$(cluster_get net).$(( ${1#h} ))"; }
cluster_host_pid() { cluster_get "hosts/$1/pid"; }

# The instance number K: the first whose bridge does not exist (under a lock, so two starts
# never take the same one).
cluster_pick_instance() {
  local k
  for k in $(seq 0 63); do
    ip link show "brtc$k" > /dev/null 2>&1 && continue
    ip route show | grep -q "^10\.77\.$k\.0/24" && continue
    echo "$k"
    return 0
  done
  return 1
}

# Can this machine create what we need? A network namespace and UTS + mount namespaces.
cluster_preflight() {
  local tool
  [ "$(id -u)" -eq 0 ] || { cluster_skip "needs root (network namespaces, mounts)"; return 77; }
  for tool in ip nsenter unshare mount setsid ssh ssh-keygen /usr/sbin/sshd; do
    command -v "$tool" > /dev/null || { cluster_skip "$tool not installed (scripts/install-deps.sh: openssh-server, iproute2, util-linux)"; return 77; }
  done
  local probe="brtc-probe-$$"
  ip netns add "$probe" 2> "$CLUSTER_DIR/probe.err" ||
    { cluster_skip "cannot create a network namespace: $(head -c 300 "$CLUSTER_DIR/probe.err")"; return 77; }
  ip netns del "$probe"
  unshare --uts --mount --propagation private true 2> "$CLUSTER_DIR/probe.err" ||
    { cluster_skip "cannot create UTS and mount namespaces: $(head -c 300 "$CLUSTER_DIR/probe.err")"; return 77; }
  return 0
}

# The files every host mounts over its own view, as a site's administrator would set them up:
# /etc/hosts naming the hosts; Open MPI's site-wide MCA file (TCP only on the cluster's
# subnet); ssh's client config (root's key, no host-key prompts) and an sshd config, so that
# mpirun's default launch, `ssh HOST orted ...`, reaches each host's own sshd over the bridge.
cluster_write_etc() {
  local n=$1 net=$2 i e="$CLUSTER_DIR/etc"
  mkdir -p "$e/ssh"
  {
    echo "127.0.0.1 localhost"
    for i in $(seq 1 "$n"); do echo "$net.$i h$i"; done
    echo "$net.254 $(hostname -s)"
  } > "$e/hosts"
  {
    grep -v '^#' /etc/openmpi/openmpi-mca-params.conf 2>/dev/null | grep -v '^\s*$'
    echo "# brt-dist cluster harness ($CLUSTER_DIR)"
    echo "btl_tcp_if_include = $net.0/24"
    echo "oob_tcp_if_include = $net.0/24"
    # Every host shares this machine's cores: ranks polling for messages would starve the
    # kernel's packet processing between namespaces (a message then waits a scheduler tick,
    # 4 ms; a checkpoint save of many small collective writes took seconds). Yielding when idle
    # is what an oversubscribed node needs; real hosts have their own cores and NICs.
    echo "mpi_yield_when_idle = 1"
  } > "$e/openmpi-mca-params.conf"
  ssh-keygen -q -t ed25519 -N "" -C brt-cluster -f "$e/ssh/id_ed25519" || return 1
  cp "$e/ssh/id_ed25519.pub" "$e/ssh/authorized_keys"
  cat > "$e/ssh/ssh_config" <<EOF
Host *
  IdentityFile $e/ssh/id_ed25519
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  BatchMode yes
  LogLevel ERROR
  # A common site setting: an ssh whose peer stopped answering gives up after 15 s instead
  # of holding its session until TCP does (mpirun ignores a launch ssh that ends later).
  ServerAliveInterval 5
  ServerAliveCountMax 3
EOF
  cat > "$e/ssh/sshd_config" <<EOF
Port 22
AuthorizedKeysFile $e/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
EOF
}

# One host: network namespace + veth to the bridge, then a holder process
# (tests/cluster/host_init.sh) that owns its UTS and mount namespaces and starts its sshd.
cluster_add_host() {
  local k=$1 i=$2 net=$3 cpus=$4 name="h$2" ns="brtc$1-h$2" veth="brtc$1h$2"
  local hd="$CLUSTER_DIR/hosts/$name"
  mkdir -p "$hd/tmp" "$hd/log"
  chmod 1777 "$hd/tmp"
  ip netns add "$ns" || return 1
  ip link add "$veth" type veth peer name eth0 netns "$ns" || return 1
  ip link set "$veth" master "brtc$k" up || return 1
  ip -n "$ns" addr add "$net.$i/24" dev eth0 || return 1
  ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || return 1
  echo "$ns" > "$hd/netns"
  stat -L -c 'net:[%i]' "/var/run/netns/$ns" > "$hd/netns-id"
  echo "$veth" > "$hd/veth"
  local -a pin=()
  [ -n "$cpus" ] && pin=(taskset -c "$cpus")
  setsid "${pin[@]}" nsenter --net="/var/run/netns/$ns" unshare --uts --mount --propagation private -- \
    /bin/bash "$CLUSTER_LIB_DIR/host_init.sh" "$name" "$net.$i" "$CLUSTER_DIR" > "$hd/log/init.log" 2>&1 < /dev/null &
  disown $!  # killed by cluster_stop: no "Killed" notice from this shell
  local _
  for _ in $(seq 100); do
    [ -s "$hd/pid" ] && return 0
    sleep 0.05
  done
  cluster_die "host $name did not come up: $(cat "$hd/log/init.log")"
}

cluster_start() {
  local dir=$1; shift
  local n=2 cpus="" shared_mb=1024 slurm=0
  while [ $# -gt 0 ]; do
    case $1 in
      --hosts) n=$2; shift 2 ;;
      --cpus) cpus=$2; shift 2 ;;
      --shared-mb) shared_mb=$2; shift 2 ;;
      --slurm) slurm=1; shift ;;
      *) cluster_die "start: unknown option $1"; return 2 ;;
    esac
  done
  [ "$n" -ge 1 ] && [ "$n" -le 8 ] || { cluster_die "start: --hosts must be 1-8"; return 2; }
  case $dir in /tmp/*) cluster_die "start: DIR must not be under /tmp (each host mounts its own /tmp)"; return 2 ;; esac
  mkdir -p "$dir" && CLUSTER_DIR=$(cd "$dir" && pwd) || return 1
  export CLUSTER_DIR
  local rc=0
  cluster_preflight || return $?
  exec 9> /run/lock/brt-cluster.lock && flock -w 60 9 || { cluster_die "cannot lock /run/lock/brt-cluster.lock"; return 1; }
  local k
  k=$(cluster_pick_instance) || { flock -u 9; cluster_die "no free instance (10.77.0-63.0/24 all in use)"; return 1; }
  local net="10.77.$k"
  echo "$k" > "$CLUSTER_DIR/instance"
  echo "$net" > "$CLUSTER_DIR/net"
  ip link add "brtc$k" type bridge && ip addr add "$net.254/24" dev "brtc$k" && ip link set "brtc$k" up || rc=1
  flock -u 9
  exec 9>&-
  [ $rc -eq 0 ] || { cluster_stop; cluster_die "cannot create the bridge brtc$k"; return 1; }
  # The shared file system: mounted before the hosts are made, so each host's copy of the
  # mount table holds the same tmpfs at the same path.
  mkdir -p "$CLUSTER_DIR/shared"
  mount -t tmpfs -o "size=${shared_mb}m,mode=1777" brt-cluster-shared "$CLUSTER_DIR/shared" ||
    { cluster_stop; cluster_die "cannot mount the shared tmpfs"; return 1; }
  echo 1 > "$CLUSTER_DIR/shared.mounted"
  cluster_write_etc "$n" "$net"
  local -a cpu_lists=()
  read -r -a cpu_lists <<< "$cpus"
  : > "$CLUSTER_DIR/host-list"
  local i
  for i in $(seq 1 "$n"); do
    echo "h$i" >> "$CLUSTER_DIR/host-list"
    cluster_add_host "$k" "$i" "$net" "${cpu_lists[$((i - 1))]:-}" || { cluster_stop; cluster_die "cannot start host h$i"; return 1; }
  done
  if [ "$slurm" = 1 ]; then
    source "$CLUSTER_LIB_DIR/cluster_slurm.sh"
    cluster_slurm_start || { rc=$?; cluster_stop; return $rc; }
  fi
  return 0
}

# CMD on HOST: its network, host name and mounts; environment and working directory as the
# caller's (unlike ssh, which passes no environment).
cluster_exec() {
  local host=$1 pid; shift
  pid=$(cluster_host_pid "$host") || { cluster_die "no such host: $host"; return 255; }
  nsenter -t "$pid" --net --uts --mount --wd="$PWD" -- "$@"
}

cluster_cut() { ip link set "$(cluster_get "hosts/$1/veth")" down; }
cluster_heal() { ip link set "$(cluster_get "hosts/$1/veth")" up; }
# The shared file system read-only (or writable again) as HOST sees it; the other hosts are
# unaffected: a read-only bind mount of it over itself in HOST's mount table (a new mount, so
# files open for writing on the old one do not keep it busy; they stay writable).
cluster_readonly() {
  cluster_exec "$1" mount --bind "$CLUSTER_DIR/shared" "$CLUSTER_DIR/shared" &&
    cluster_exec "$1" mount -o remount,bind,ro "$CLUSTER_DIR/shared"
}
cluster_readwrite() { cluster_exec "$1" umount "$CLUSTER_DIR/shared"; }
# HOST's link limited to RATE (tc's units: 20mbit) both ways: a token bucket on each end.
cluster_slow() {
  tc qdisc replace dev "$(cluster_get "hosts/$1/veth")" root tbf rate "$2" burst 32kbit latency 400ms &&
    ip netns exec "$(cluster_get "hosts/$1/netns")" tc qdisc replace dev eth0 root tbf rate "$2" burst 32kbit latency 400ms
}

# Every process of HOST dies at once, as when a machine loses power: all processes in its
# network namespace are stopped, then killed (repeated until none is left, so none escapes by
# forking). Its sockets close, so peers that are still connected see resets.
cluster_kill_host() {
  local host=$1 pids _
  for _ in $(seq 50); do
    pids=$(cluster_host_pids "$host")
    [ -n "$pids" ] || break
    kill -STOP $pids 2> /dev/null
    kill -KILL $pids 2> /dev/null
    sleep 0.05
  done
  [ -z "$(cluster_host_pids "$host")" ] || { cluster_die "processes of $host survive SIGKILL"; return 1; }
  rm -f "$CLUSTER_DIR/hosts/$host/pid"
  echo dead > "$CLUSTER_DIR/hosts/$host/state"
}

# PIDs of every live process on HOST (its network namespace), the holder included. Zombies
# have no namespaces left and are not listed.
cluster_host_pids() {
  local want p
  want=$(cluster_get "hosts/$1/netns-id") || return 0
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/net" 2> /dev/null)" = "$want" ] && echo "${p#/proc/}"
  done
  return 0
}

# "HOST PID COMMAND" for every process on the hosts (HOST, or all) other than the holder and
# its sleep; empty when nothing is left.
cluster_procs() {
  local host holder p args
  for host in ${1:-$(cluster_hosts)}; do
    holder=$(cluster_host_pid "$host")
    for p in $(cluster_host_pids "$host"); do
      [ "$p" = "$holder" ] && continue
      [ -n "$holder" ] && [ "$(ps -o ppid= -p "$p" 2> /dev/null | tr -d ' ')" = "$holder" ] && continue
      args=$(ps -o args= -p "$p" 2> /dev/null | cut -c1-160)
      [ -n "$args" ] && echo "$host $p $args"
    done
  done
  return 0
}

cluster_status() {
  local host
  echo "cluster $CLUSTER_DIR: instance $(cluster_get instance), bridge brtc$(cluster_get instance) $(cluster_get net).254"
  echo "  shared: $CLUSTER_DIR/shared (every host); node-local scratch: /tmp of each host ($CLUSTER_DIR/hosts/HOST/tmp)"
  for host in $(cluster_hosts); do
    echo "  $host: $(cluster_addr "$host"), netns $(cluster_get "hosts/$host/netns"), holder pid $(cluster_host_pid "$host" || echo dead)"
  done
}

cluster_stop() {
  [ -n "$CLUSTER_DIR" ] && [ -d "$CLUSTER_DIR" ] || return 0
  local host hd k
  if [ -d "$CLUSTER_DIR/slurm" ]; then
    source "$CLUSTER_LIB_DIR/cluster_slurm.sh"
    cluster_slurm_stop
  fi
  for hd in "$CLUSTER_DIR"/hosts/*/; do
    [ -d "$hd" ] || continue
    host=$(basename "$hd")
    [ -s "$hd/netns-id" ] && cluster_kill_host "$host"
  done
  # Namespaces and links by the instance's names, so a start that failed half-way is undone too.
  if k=$(cluster_get instance); then
    local ns link
    for ns in $(ip netns list | awk '{print $1}' | grep "^brtc$k-h"); do ip netns del "$ns"; done
    for link in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^brtc${k}h"); do ip link del "$link"; done
    ip link del "brtc$k" 2> /dev/null
  fi
  if [ -f "$CLUSTER_DIR/shared.mounted" ]; then
    [ -n "${KEEP_WORK:-}" ] && cp -a "$CLUSTER_DIR/shared" "$CLUSTER_DIR/kept-shared"  # the tmpfs goes
    umount "$CLUSTER_DIR/shared" 2> /dev/null || umount -l "$CLUSTER_DIR/shared"
    rm -f "$CLUSTER_DIR/shared.mounted"
  fi
  if [ -n "${KEEP_WORK:-}" ]; then
    echo "cluster: kept $CLUSTER_DIR" >&2
  else
    rm -rf "$CLUSTER_DIR"
  fi
  CLUSTER_DIR=""
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  cmd=${1:-}; dir=${2:-}
  [ -n "$cmd" ] && [ -n "$dir" ] || { sed -n '13,25p' "$0"; exit 2; }
  shift 2
  if [ "$cmd" = start ]; then
    cluster_start "$dir" "$@"; rc=$?
    [ $rc -eq 0 ] && cluster_status
    exit $rc
  fi
  [ -f "$dir/instance" ] || { echo "cluster: no cluster at $dir" >&2; exit 1; }
  CLUSTER_DIR=$(cd "$dir" && pwd)
  case $cmd in
    stop) cluster_stop ;;
    exec) cluster_exec "$@" ;;
    cut) cluster_cut "$1" ;;
    heal) cluster_heal "$1" ;;
    slow) cluster_slow "$1" "$2" ;;
    readonly) cluster_readonly "$1" ;;
    readwrite) cluster_readwrite "$1" ;;
    kill-host) cluster_kill_host "$1" ;;
    procs) cluster_procs "$@" ;;
    status) cluster_status ;;
    *) echo "cluster: unknown command $cmd" >&2; exit 2 ;;
  esac
fi
