#!/usr/bin/env bash
# Ctrl-C twice (launch/process/stop_signal.h): the first SIGINT says the run will stop after
# this step and save; a second one while that save is being written exits at once (130) and
# says what it does — abandoning the save, removing its .tmp, naming the last good checkpoint.
# The save is held still mid-write (SIGSTOP injected at its first dataset), so the second SIGINT
# lands inside it. Only that .tmp is removed: an unrelated .tmp beside it stays; the last good
# checkpoint keeps its sha256, verifies, stays `latest`, and the next start resumes from it.
source "$(dirname "$0")/lib.sh"
args=(optim.total_steps=1000 checkpoint.keep=0 checkpoint.every=0)
run first.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=2 checkpoint.dir=c
expect_rc 0 "the last good checkpoint"
good=$(ckpt c 2)
sha_good=$(sha "$good")
BRT_FAULT_INJECT="stop@checkpoint save: writing" "${TRAIN[@]}" "${args[@]}" train.steps=100000 checkpoint.dir=c \
  > fault.log 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "^step      5/" fault.log && break; sleep 0.05; done
grep -q "^step      5/" fault.log || { kill -9 $pid; fail "the run did not start"; }
kill -INT $pid
stopped=0
for _ in $(seq 600); do [ "$(ps -o stat= -p $pid | cut -c1)" = T ] && { stopped=1; break; }; sleep 0.05; done
[ $stopped = 1 ] || { kill -9 $pid; fail "the final save was not reached"; }
tmp=$(cd c && ls ckpt-*.h5.tmp)
[ -n "$tmp" ] || { kill -9 $pid; fail "no .tmp of the save in progress"; }
echo "someone else's" > c/ckpt-00099999.h5.tmp  # not this process's save: it must stay
kill -INT $pid  # the second interrupt, delivered as the save continues
kill -CONT $pid
timeout 30 tail --pid=$pid -f /dev/null
wait $pid; rc=$?
expect_rc 130 "a second Ctrl-C during the save"
expect_text fault.log "brt-dist: interrupt: stopping after this step (saving a checkpoint first"
expect_text fault.log "brt-dist: second interrupt: abandoning the checkpoint save in progress, removing c/$tmp; the last good checkpoint is c/ckpt-00000002.h5"
[ ! -e "c/$tmp" ] || fail "c/$tmp is left"
[ -e c/ckpt-00099999.h5.tmp ] || fail "another .tmp was removed"
[ "$(sha "$good")" = "$sha_good" ] || fail "ckpt-2 changed"
verify_ok "$good"
[ "$(cat c/latest)" = "ckpt-00000002.h5" ] || fail "latest moved to $(cat c/latest)"
record "interrupt(second SIGINT during the save)" "SIGINT at step 5, SIGINT again while the final save writes" "$rc" \
  "$(first_line fault.log 'second interrupt')" "c/$tmp removed (only it); ckpt-2 sha256 unchanged, verifies, is latest"
rm c/ckpt-00099999.h5.tmp
run resumed.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=4 checkpoint.dir=c
expect_rc 0 "resume after the second interrupt"
expect_text resumed.log "resumed from c/ckpt-00000002.h5 at step 2"
record "interrupt(resume)" "a start after it" "0" "$(first_line resumed.log 'resumed from')" "steps 3-4 from ckpt-2"
