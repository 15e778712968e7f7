#!/usr/bin/env bash
# Data parallelism across hosts: `mpirun --host h1:2,h2:2 -np 4` (4 ranks, 1
# stream each, TCP between the hosts, shared memory within each) gives the losses of one
# process holding the same 4 global streams to fp32 rounding, and exactly the losses of the
# same 4 ranks on one host: the reduction order is fixed by rank, not by transport or host.
#   dp.sh BRT_DIST
source "$(dirname "$0")/lib.sh"
cluster_up --hosts 2
steps=(train.steps=12)
run one.log 120 on h1 "${TRAIN[@]}" "${steps[@]}" train.batch=4 log.metrics_path=one.jsonl
expect_rc 0 "one process, 4 streams"
run hosts.log 120 mpi h1:2,h2:2 4 -x OMP_NUM_THREADS "${TRAIN[@]}" "${steps[@]}" log.metrics_path=hosts.jsonl
expect_rc 0 "4 ranks on 2 hosts"
expect_text hosts.log "placement: 4 ranks on 2 hosts: h1 ranks 0-1, 1 thread each (OMP_NUM_THREADS); h2 ranks 2-3"
expect_text hosts.log "data parallel: 4 ranks x 1 streams = 4 global streams"
run host.log 120 mpi h1:4 4 "${TRAIN[@]}" "${steps[@]}" log.metrics_path=host.jsonl
expect_rc 0 "4 ranks on 1 host"
worst=$(close_losses one.jsonl hosts.jsonl 1e-5)
same_losses host.jsonl hosts.jsonl
echo "DP 4 over 2 hosts: 12 steps within $worst (relative) of one process; bit-identical to DP 4 on one host"
