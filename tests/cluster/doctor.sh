#!/usr/bin/env bash
# `brt-dist doctor` across hosts, 3 hosts, one rank each:
#  - healthy: passes; the rank -> host map, the same software on all hosts, the checkpoint dir
#    as one writable directory of all hosts, the data dir's files everywhere, every host pair's
#    latency and bandwidth; --cluster-file writes a cluster file `brt-dist plan` runs on;
#  - a node-local checkpoint dir (/tmp/...): exit 1 naming h2 and h3 and why it loses a run;
#  - another brt-dist build on h2 (a different file mounted over the path on h2 only): exit 1
#    naming h2;
#  - a data dir that differs on h2: exit 1 naming h2;
#  - h3's link slowed to 20 Mbit/s both ways: exit 1 naming the slow pairs and h3.
#   doctor.sh BRT_DIST
source "$(dirname "$0")/lib.sh"
cluster_up --hosts 3
hosts=(h1:1,h2:1,h3:1 3)
doc=("$bin" doctor --checkpoint-dir "$work/ckpt" --min-free-gb 0 --timeout-s 60)

# Healthy, with a data dir seen by every host (on the shared file system).
mkdir -p shared-data && head -c 100000 /dev/urandom > shared-data/a.bin && echo x > shared-data/b.txt
run ok.log 120 mpi "${hosts[@]}" "${doc[@]}" --data-dir "$work/shared-data" --cluster-file "$work/cluster.toml"
expect_rc 0 "doctor on a healthy cluster: $(cat ok.log)"
expect_text ok.log "rank 2 -> host h3 (local rank 0)"
expect_text ok.log "software: the same on all 3 host(s)"
expect_text ok.log "checkpoint dir $work/ckpt: one writable directory, seen by all 3 host(s)"
expect_text ok.log "data dir $work/shared-data: the same 2 files"
for pair in "h1 <-> h2" "h1 <-> h3" "h2 <-> h3"; do expect_text ok.log "link $pair: latency"; done
expect_text ok.log "doctor: all checks passed"
grep -q "^inter_node_gbps = " cluster.toml || fail "no inter_node_gbps in cluster.toml: $(cat cluster.toml)"
grep -q "^nodes = 3 " cluster.toml || fail "no nodes = 3 in cluster.toml"
run plan.log 60 "$bin" plan "$config" --cluster "$work/cluster.toml" --global-batch 3
expect_rc 0 "plan on the measured cluster file: $(cat plan.log)"
expect_text plan.log "3 node(s)"
[ -z "$(ls -A ckpt)" ] || fail "doctor left files in the checkpoint dir: $(ls -A ckpt)"
echo "healthy: all checks passed; $(grep -c '^link' ok.log) host pairs measured; plan reads $(grep '^inter_node_gbps' cluster.toml | cut -d'#' -f1)"

# A node-local checkpoint dir: each host has its own /tmp.
run local.log 120 mpi "${hosts[@]}" "$bin" doctor --checkpoint-dir /tmp/brt-ckpt --min-free-gb 0
expect_rc 1 "a node-local checkpoint dir"
expect_text local.log "PROBLEM: checkpoint dir /tmp/brt-ckpt is "
expect_text local.log "on h2 (rank 1)"
expect_text local.log "on h3 (rank 2)"
expect_text local.log "A node-local path loses the run"
echo "node-local checkpoint dir: $(first_line local.log 'PROBLEM: checkpoint dir')"

# Another build of brt-dist on h2 only: a copy with one byte more, mounted over the path there.
cp "$bin" other-brt-dist && printf x >> other-brt-dist
on h2 mount --bind "$work/other-brt-dist" "$bin" || fail "cannot mount over $bin on h2"
run version.log 120 mpi "${hosts[@]}" "${doc[@]}"
on h2 umount "$bin"
expect_rc 1 "another brt-dist on h2"
expect_text version.log "PROBLEM: brt-dist differs on h2 (rank 1)"
echo "another build on h2: $(first_line version.log 'PROBLEM: brt-dist differs')"

# A data dir that differs: node-local copies, h2's missing a file.
for h in h1 h2 h3; do on "$h" sh -c 'mkdir -p /tmp/brt-data && echo one > /tmp/brt-data/a && echo two > /tmp/brt-data/b'; done
on h2 rm /tmp/brt-data/b
run data.log 120 mpi "${hosts[@]}" "${doc[@]}" --data-dir /tmp/brt-data
expect_rc 1 "a data dir missing a file on h2"
expect_text data.log "PROBLEM: data dir /tmp/brt-data differs on h2 (rank 1): 1 files"
! grep -q "differs on h3" data.log || fail "h3's identical copy reported"
echo "data dir: node-local copies accepted where equal; $(first_line data.log 'PROBLEM: data dir')"

# A slow link.
cluster_slow h3 20mbit || fail "tc could not shape h3's link"
run slow.log 180 mpi "${hosts[@]}" "${doc[@]}"
expect_rc 1 "h3's link at 20 Mbit/s"
expect_text slow.log "PROBLEM: slow links: h1 <-> h3"
expect_text slow.log "every slow pair involves h3: check its network link"
! grep -q "PROBLEM: slow links: h1 <-> h2" slow.log || fail "h1 <-> h2 reported slow"
echo "slow link: $(first_line slow.log 'PROBLEM: slow')"
