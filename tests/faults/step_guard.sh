#!/usr/bin/env bash
# The non-finite and spike guard, with injected faults:
#   step_guard.sh BIN skip       step 5's loss and a gradient are NaN: skipped, logged, counted;
#                                resume from a later checkpoint is bit-exact with the skip in
#                                its history
#   step_guard.sh BIN stop       steps 6-8 NaN, train.max_skipped_steps=3: the run stops with a
#                                message naming the intact last checkpoint (ckpt-4, confirmed by
#                                step 5: a checkpoint counts as good once a step ran on it)
#   step_guard.sh BIN rollback   the same with train.rollback=true: reload ckpt-4, skip the
#                                batches of steps 6-8, finish; resume bit-exact afterwards
#   step_guard.sh BIN spike      step 45's gradients x1000 with train.skip_grad_z=5: skipped
#   step_guard.sh BIN nangrad    step 5's gradient NaN, its loss finite: the update enqueued behind
#                                backward (the default) is skipped by the device's own check of
#                                the norm, logged and counted as the guard's; a run on the judged
#                                path (a spike guard on, which cannot fire in 10 steps) ends with
#                                the same losses and final checkpoint, bit for bit
#   step_guard.sh BIN nangrad_tp the same under TP 2 (mpirun -np 2 --tp 2): the reducer sums the
#                                optimizer's statistics on the device, so the update is enqueued
#                                there too; both ranks skip step 5, bit for bit the judged path
source "$(dirname "$0")/lib.sh"
case_name=$2
case $case_name in
  skip)
    args=(train.steps=10 checkpoint.every=3 checkpoint.keep=0)
    BRT_FAULT_INJECT="nonfinite@step=5" run fault.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=a log.metrics_path=a.jsonl
    expect_rc 0 "a run with one non-finite step"
    expect_text fault.log "skip  step 5: non-finite loss or gradient norm"
    grep -q '"event":"skip","step":5,' a.jsonl || fail "no skip event in the metrics"
    # The progress line of the skipped step shows its loss, not a made-up 0; the
    # JSONL has no train record for it (the skip event is its record).
    expect_text fault.log "step      5/10 | loss nan (skipped) | bits/tok nan"
    # ... and its own gradient norm, not the previous (applied) step's.
    grep -E '^step +5/10 ' fault.log | grep -qF '| gnorm nan |' || fail "step 5's line shows another step's gnorm: $(grep -E '^step +5/10 ' fault.log)"
    ! grep -q '"event":"train","step":5,' a.jsonl || fail "a train record for the skipped step 5"
    grep '"event":"train"' a.jsonl | tail -1 | grep -q '"skipped_steps":1,' || fail "skipped_steps not counted"
    for f in a/ckpt-*.h5; do verify_ok "$f"; done
    mkdir b && cp "$(ckpt a 6)" b/
    run resumed.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=b log.metrics_path=b.jsonl
    expect_rc 0 "resume after the skip"
    expect_text resumed.log "resumed from b/ckpt-00000006.h5 at step 6"
    same_losses a.jsonl b.jsonl 6
    "$bin" ckpt diff "$(ckpt a 10)" "$(ckpt b 10)" > /dev/null || fail "final checkpoints differ"
    record "guard(non-finite step)" "NaN loss and gradient at step 5" "0" "$(first_line fault.log 'skip  step 5')" \
      "no update at step 5, skipped_steps 1 in the metrics; resume from ckpt-6: steps 7-10 and the final checkpoint bit-identical"
    ;;
  stop)
    args=(train.steps=10 checkpoint.every=4 checkpoint.keep=0 train.max_skipped_steps=3)
    run first.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=4 optim.total_steps=10 checkpoint.dir=c
    sha4=$(sha "$(ckpt c 4)")
    BRT_FAULT_INJECT="nonfinite@step=6;nonfinite@step=7;nonfinite@step=8" run fault.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=c
    expect_rc 1 "three non-finite steps in a row"
    expect_text fault.log "3 consecutive steps skipped (steps 6..8, last: non-finite loss or gradient norm; train.max_skipped_steps = 3); the run stops. The last good checkpoint, c/ckpt-00000004.h5, is intact."
    expect_clean_error fault.log
    [ "$(sha "$(ckpt c 4)")" = "$sha4" ] || fail "ckpt-4 changed"
    [ ! -e "$(ckpt c 8)" ] || fail "saved after the stop"
    record "guard(consecutive non-finite)" "NaN at steps 6, 7, 8; max_skipped_steps=3" "$rc" "$(first_line fault.log 'consecutive steps skipped')" \
      "ckpt-4 sha256 unchanged; nothing saved after it (the save due at step 8 deferred)"
    ;;
  rollback)
    args=(train.steps=12 checkpoint.every=4 checkpoint.keep=0 train.max_skipped_steps=3 train.rollback=true)
    BRT_FAULT_INJECT="nonfinite@step=6;nonfinite@step=7;nonfinite@step=8" run fault.log 60 "${TRAIN[@]}" "${args[@]}" \
      checkpoint.dir=a log.metrics_path=a.jsonl
    expect_rc 0 "a run that rolls back"
    expect_text fault.log "rolled back to a/ckpt-00000004.h5 at step 4"
    expect_text fault.log "skip  step 6: its batch is skipped (rolled back past it)"
    expect_text fault.log "skip  step 8: its batch is skipped (rolled back past it)"
    # The save due at step 8 follows the next applied step (a skipped batch teaches nothing).
    expect_text fault.log "checkpoint deferred at step 8: its batch was skipped (rolled back past it)"
    grep -q '"event":"rollback"' a.jsonl || fail "no rollback event in the metrics"
    expect_text fault.log "step     12/12"
    mkdir b && cp "$(ckpt a 9)" b/
    run resumed.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=b log.metrics_path=b.jsonl
    expect_rc 0 "resume after the rollback"
    same_losses a.jsonl b.jsonl 9
    "$bin" ckpt diff "$(ckpt a 12)" "$(ckpt b 12)" > /dev/null || fail "final checkpoints differ"
    record "guard(rollback)" "NaN at steps 6, 7, 8; max_skipped_steps=3, rollback=true" "0" "$(first_line fault.log 'rolled back to')" \
      "reloaded ckpt-4, skipped the batches of steps 6-8, the save due at 8 made at 9, finished 12 steps; resume from ckpt-9: steps 10-12 and the final checkpoint bit-identical"
    ;;
  spike)
    args=(train.steps=50 checkpoint.every=50 train.skip_grad_z=5)
    BRT_FAULT_INJECT="gradspike@step=45" run fault.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=a log.metrics_path=a.jsonl
    expect_rc 0 "a run with a gradient spike"
    expect_text fault.log "skip  step 45: gradient-norm spike (train.skip_grad_z)"
    [ "$(grep -c '^skip  step' fault.log)" -eq 1 ] || fail "other steps were skipped too: $(grep '^skip' fault.log)"
    # The skipped step's progress line shows its own (spiked) gradient norm, as the skip line does.
    spiked=$(sed -nE 's/^skip  step 45: .*gradient norm ([^)]+)\).*/\1/p' fault.log)
    shown=$(sed -nE 's/^step +45\/50 .*\| gnorm ([^ ]+) \|.*/\1/p' fault.log)
    python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if abs(a-b)<=1e-3*abs(a)+1e-3 else 1)" \
      "$spiked" "$shown" || fail "step 45's progress line shows gnorm $shown, the skipped step's is $spiked"
    record "guard(gradient spike)" "gradients x1000 at step 45; skip_grad_z=5" "0" "$(first_line fault.log 'skip  step 45')" \
      "only that step skipped; the run finished"
    ;;
  nangrad | nangrad_tp)
    args=(train.steps=10 checkpoint.every=10 checkpoint.keep=0)
    launch=()
    [ "$case_name" = nangrad_tp ] && launch=("${MPIRUN[@]}" -np 2) && args+=(--tp 2)
    TRAIN=("${launch[@]}" "${TRAIN[@]}")
    BRT_FAULT_INJECT="nangrad@step=5" run fault.log 120 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=a log.metrics_path=a.jsonl
    expect_rc 0 "a run with a NaN gradient and a finite loss"
    expect_text fault.log "skip  step 5: non-finite loss or gradient norm"
    grep -E '^step +5/10 ' fault.log | grep -qF '| gnorm nan |' || fail "step 5's line: $(grep -E '^step +5/10 ' fault.log)"
    ! grep -q '"event":"train","step":5,' a.jsonl || fail "a train record for the skipped step 5"
    grep '"event":"train"' a.jsonl | tail -1 | grep -q '"skipped_steps":1,' || fail "skipped_steps not counted"
    # The judged path: the guard sees the norm before any update (skip_grad_z needs 32 steps of
    # history before it can fire).
    BRT_FAULT_INJECT="nangrad@step=5" run judged.log 120 "${TRAIN[@]}" "${args[@]}" train.skip_grad_z=1000 \
      checkpoint.dir=b log.metrics_path=b.jsonl
    expect_rc 0 "the same run on the judged path"
    expect_text judged.log "skip  step 5: non-finite loss or gradient norm"
    same_losses b.jsonl a.jsonl 0
    "$bin" ckpt diff "$(ckpt a 10)" "$(ckpt b 10)" > /dev/null || fail "final checkpoints differ from the judged path's"
    [ "$case_name" = nangrad ] || expect_text fault.log "tensor parallel: 2 ranks per replica"
    expect_text fault.log "the update enqueued behind backward"
    expect_text judged.log "the update after the spike guard's judgement"
    record "guard(NaN gradient, finite loss${launch[*]:+, TP 2})" "NaN gradient at step 5, loss finite" "0" "$(first_line fault.log 'skip  step 5')" \
      "the enqueued update wrote nothing; losses and the final checkpoint bit-identical to the judged path's"
    ;;
  *) fail "unknown case $case_name" ;;
esac
