#!/usr/bin/env bash
# SIGTERM and SIGUSR1 (a scheduler's preemption) during training: the run saves at the next
# step boundary and exits 75; the checkpoint verifies; the next start resumes bit-exactly.
#   signals.sh BIN TERM|USR1 [NP]
source "$(dirname "$0")/lib.sh"
sig=$2 np=${3:-1}
launch=("${TRAIN[@]}")
[ "$np" -gt 1 ] && launch=("${MPIRUN[@]}" -np "$np" "${TRAIN[@]}")
args=(optim.total_steps=1000 checkpoint.keep=0)
"${launch[@]}" "${args[@]}" train.steps=1000 checkpoint.dir=c log.metrics_path=a.jsonl > fault.log 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "^step      5/" fault.log && break; sleep 0.05; done
grep -q "^step      5/" fault.log || { kill -9 $pid; fail "the run did not start"; }
kill -$sig $pid
timeout 60 tail --pid=$pid -f /dev/null
wait $pid; rc=$?
expect_rc 75 "SIG$sig"
expect_text fault.log "stopping cleanly after step"
n=$(sed -nE 's/^stopping cleanly after step ([0-9]+).*/\1/p' fault.log)
verify_ok "$(ckpt c "$n")"
run resumed.log 60 "${launch[@]}" "${args[@]}" train.steps=$((n + 3)) checkpoint.dir=c log.metrics_path=b.jsonl
expect_rc 0 "resume after SIG$sig"
expect_text resumed.log "resumed from $(ckpt c "$n") at step $n"
run ref.log 60 "${launch[@]}" "${args[@]}" train.steps=$((n + 3)) checkpoint.dir=ref log.metrics_path=ref.jsonl
same_losses ref.jsonl b.jsonl "$n"
"$bin" ckpt diff "$(ckpt ref $((n + 3)))" "$(ckpt c $((n + 3)))" > /dev/null || fail "final checkpoint differs"
record "signal(SIG$sig, np $np)" "kill -$sig during training" "75" "$(first_line fault.log 'stopping cleanly')" \
  "ckpt-$n verifies; resumed there; steps $((n + 1))-$((n + 3)) and the final checkpoint bit-identical"
