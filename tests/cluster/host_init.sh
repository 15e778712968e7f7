#!/bin/bash
# The holder of one host of the cluster harness (tests/cluster/cluster.sh), started inside the
# host's network namespace and its new UTS and mount namespaces: names the host, mounts its
# node-local views (its own /tmp, /run and /dev/shm; /etc/hosts naming every host; the site's
# Open MPI and ssh configs), starts the host's sshd on its address, writes its PID (the
# handle others enter the host by) and waits to be killed. (No PID namespace: a process in one
# cannot enter a sibling host's, which mpirun's launch would need.)
#   host_init.sh NAME ADDRESS CLUSTER_DIR
set -u
name=$1 addr=$2 dir=$3
hd=$dir/hosts/$name
hostname "$name" || exit 1
# A checkout under /tmp (a CI clone may be one) stays visible at its path on every host, as a
# site's software tree is: bound into the node-local /tmp before that covers the machine's.
repo=$(cd "$(dirname "$0")/../.." && pwd)
case $repo in
  /tmp/*) mkdir -p "$hd/tmp${repo#/tmp}" && mount --bind "$repo" "$hd/tmp${repo#/tmp}" || exit 1 ;;
esac
mount --rbind "$hd/tmp" /tmp || exit 1
mount -t tmpfs -o size=64m,mode=755 "run-$name" /run || exit 1
mount -t tmpfs -o size=256m,mode=1777 "shm-$name" /dev/shm || exit 1
mount --bind "$dir/etc/hosts" /etc/hosts || exit 1
mount --bind "$dir/etc/openmpi-mca-params.conf" /etc/openmpi/openmpi-mca-params.conf || exit 1
mount --bind "$dir/etc/ssh/ssh_config" /etc/ssh/ssh_config || exit 1
mkdir -p /run/sshd && chmod 755 /run/sshd
ssh-keygen -q -t ed25519 -N "" -C "$name" -f "$hd/ssh_host_ed25519_key" || exit 1
/usr/sbin/sshd -f "$dir/etc/ssh/sshd_config" -h "$hd/ssh_host_ed25519_key" -o "ListenAddress=$addr" \
  -o "PidFile=$hd/sshd.pid" -E "$hd/log/sshd.log" || exit 1
echo $$ > "$hd/pid.new" && mv "$hd/pid.new" "$hd/pid"
while :; do
  sleep 60 &
  wait $! 2> /dev/null
done
