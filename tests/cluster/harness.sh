#!/usr/bin/env bash
# The cluster harness itself (tests/cluster/cluster.sh): two hosts with their own names,
# addresses and /tmp, one shared file system; mpirun's orted really runs inside the far host's
# namespaces (started by that host's sshd); ranks on different hosts talk TCP (shared memory
# alone cannot connect them) and ranks on one host shared memory; and stop leaves nothing:
# no process, namespace, link, bridge or mount.
#   harness.sh BRT_DIST
source "$(dirname "$0")/lib.sh"
cluster_up --hosts 2
k=$(cluster_get instance)

for h in h1 h2; do
  [ "$(on $h hostname)" = "$h" ] || fail "$h calls itself $(on $h hostname)"
  on $h ip -4 -o addr show eth0 | grep -q "inet $(cluster_addr $h)/24" || fail "$h lacks $(cluster_addr $h)"
done
on h1 sh -c 'echo h1 > /tmp/brt-where'
[ "$(on h2 cat /tmp/brt-where 2> /dev/null)" = "" ] || fail "/tmp is not node-local"
on h1 sh -c "echo shared > $work/brt-where"
[ "$(on h2 cat "$work/brt-where")" = shared ] || fail "the shared folder is not shared"
echo "hosts: h1 $(cluster_addr h1), h2 $(cluster_addr h2); /tmp node-local, $work shared"

# Where each rank runs: host name, network namespace, parent.
run where.log 60 mpi h1:1,h2:1 2 sh -c 'echo "rank $OMPI_COMM_WORLD_RANK $(hostname) $(readlink /proc/self/ns/net) $(cat /proc/$PPID/comm)"'
expect_rc 0 "mpirun across two hosts"
grep -qxF "rank 0 h1 $(cluster_get hosts/h1/netns-id) mpirun" where.log || fail "rank 0 not on h1 under mpirun: $(cat where.log)"
grep -qxF "rank 1 h2 $(cluster_get hosts/h2/netns-id) orted" where.log || fail "rank 1 not on h2 under orted: $(cat where.log)"
grep -q "Accepted publickey for root from $(cluster_addr h1)" "$CLUSTER_DIR/hosts/h2/log/sshd.log" ||
  fail "orted was not started through h2's sshd"
echo "mpirun on h1 -> ssh -> sshd on h2 -> orted in h2's namespaces -> rank 1"

# Transports: shared memory joins ranks of one host, not of two; TCP joins two.
one_step=("${TRAIN[@]}" train.steps=1)
run vader-one.log 60 mpi h1:2 2 --mca btl self,vader "${one_step[@]}"
expect_rc 0 "two ranks on h1 over shared memory alone"
run vader-two.log 60 mpi h1:1,h2:1 2 --mca btl self,vader "${one_step[@]}"
[ "$rc" -ne 0 ] || fail "shared memory alone connected ranks on h1 and h2: they share a host"
expect_text vader-two.log "unable to reach each other"
run tcp-two.log 60 mpi h1:1,h2:1 2 --mca btl self,tcp "${one_step[@]}"
expect_rc 0 "TCP between h1 and h2"
echo "shared memory within a host only; TCP between hosts"

# Stop leaves nothing behind.
dir=$CLUSTER_DIR
ids=$(cat "$dir"/hosts/*/netns-id)
cd /
cluster_stop
[ ! -e "$dir" ] || fail "$dir left behind"
! ip netns list | grep -q "^brtc$k-" || fail "namespaces left: $(ip netns list)"
! ip -o link show | grep -q "brtc$k" || fail "links left: $(ip -o link show | grep "brtc$k")"
! grep -q " $dir/" /proc/mounts || fail "mounts left: $(grep " $dir/" /proc/mounts)"
for p in /proc/[0-9]*; do
  id=$(readlink "$p/ns/net" 2> /dev/null) || continue
  grep -qx "$id" <<< "$ids" && fail "process ${p#/proc/} still in a host's network namespace"
done
echo "stopped: no process, namespace, link, bridge, mount or folder left"
