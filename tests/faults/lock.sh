#!/usr/bin/env bash
# One run per checkpoint directory (docs/reliability.md): world rank 0 holds
# <checkpoint.dir>/.brt-dist.lock (an OFD lock the kernel drops when the holder dies) for the
# whole run.
#   lock.sh BIN live      a second start while a run holds the directory — alone, under
#                         `mpirun -np 2`, and with the directory spelled differently: refused with
#                         exit 2, the holder's PID, host and start time printed once, nothing
#                         touched; the holding run then finishes bit-identical to an undisturbed one
#   lock.sh BIN requeue   a requeued job starting while the old one is still stopping: it waits
#                         (checkpoint.lock_wait_s), then resumes bit-exactly from the old run's save
#   lock.sh BIN killed    the holder SIGKILLed in the middle of a save: the next start proceeds at
#                         once, removes the half-written file and resumes bit-exactly
#   lock.sh BIN foreign   files another process put into the directory (a ckpt-*.h5.tmp, a
#                         latest.tmp.N) survive every save of the run, a failed save included: no
#                         cleanup touches a file it did not create
source "$(dirname "$0")/lib.sh"
case_name=$2
args=(train.steps=40 checkpoint.every=10 checkpoint.keep=0)
run ref.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=ref log.metrics_path=ref.jsonl
expect_rc 0 "reference run"
host=$(hostname)

# wait_for TEXT FILE: until FILE holds TEXT (20 s at most).
wait_for() {
  for _ in $(seq 400); do grep -qF -- "$1" "$2" 2>/dev/null && return 0; sleep 0.05; done
  fail "never saw '$1' in $2"
}
# start_holder DIR [INJECTION]: a run on DIR that stops itself (SIGSTOP) as step 15 begins,
# holding the directory's lock, until the test continues it; $holder is its pid.
start_holder() {
  BRT_FAULT_INJECT="stop@step=15${2:+;$2}" "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$1" \
    log.metrics_path=holder.jsonl "${holder_args[@]}" > holder.log 2>&1 &
  holder=$!
  wait_for "SIGSTOP at step 15" holder.log
  wait_for "pid=$holder " "$1/.brt-dist.lock"
}
holder_args=()
holder=""
# A failing case must not leave its stopped holder behind.
trap '[ -z "$holder" ] || kill -9 "$holder" 2> /dev/null; cd /; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
once() { [ "$(grep -cF -- "$2" "$1")" -eq 1 ] || fail "$1: '$2' printed $(grep -cF -- "$2" "$1") times"; }
# The holder's run, continued to its end, equals the reference run bit for bit.
holder_finished_intact() {
  wait "$holder"
  rc=$?
  expect_rc "${1:-0}" "the holding run"
  for f in c/ckpt-*.h5; do verify_ok "$f"; done
  "$bin" ckpt diff "$(ckpt ref 40)" "$(ckpt c 40)" > /dev/null || fail "the holding run's final checkpoint differs from the reference"
  same_losses ref.jsonl holder.jsonl 0
}

case $case_name in
  live)
    start_holder c
    sha10=$(sha "$(ckpt c 10)")
    run second.log 30 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=c checkpoint.lock_wait_s=1 log.metrics_path=second.jsonl
    expect_rc 2 "a second start on a held directory"
    want="brt-dist train: error: checkpoint.dir c is in use by PID $holder on host $host since "
    expect_text second.log "$want"
    once second.log "$want"
    expect_text second.log "Waited 1 s for it to end (checkpoint.lock_wait_s = 1 s). Nothing was changed."
    expect_no_text second.log "resumed from"
    expect_clean_error second.log
    [ ! -e second.jsonl ] || fail "the refused start wrote its metrics"
    printed=$(first_line second.log "brt-dist train: error:")
    run np2.log 60 "${MPIRUN[@]}" -np 2 "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/c/" checkpoint.lock_wait_s=0
    expect_rc 2 "mpirun -np 2 on a held directory, spelled $work/c/"
    once np2.log "brt-dist train: error: checkpoint.dir $work/c/ is in use by PID $holder on host $host"
    expect_clean_error np2.log
    [ "$(sha "$(ckpt c 10)")" = "$sha10" ] || fail "ckpt-10 changed while the directory was held"
    kill -CONT "$holder"
    holder_finished_intact 0
    record "lock(second start on a live run's checkpoint.dir)" \
      "a second train (alone, lock_wait_s=1; mpirun -np 2 as $work/c/, lock_wait_s=0) while PID $holder holds c" "2" \
      "$printed" \
      "ckpt-10 sha256 unchanged; the holding run finished (exit 0), every checkpoint verifies, losses and ckpt-40 bit-identical to an undisturbed run"
    ;;
  requeue)
    start_holder c
    t0=$(date +%s)
    timeout 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=c log.metrics_path=requeued.jsonl checkpoint.lock_wait_s=30 \
      > requeued.log 2>&1 &
    requeued=$!
    wait_for "is in use by PID $holder on host $host since" requeued.log
    expect_text requeued.log "waiting up to 30 s for it to end (checkpoint.lock_wait_s)"
    # The old job's end as Slurm makes it: a signal, a checkpoint, exit 75.
    kill -TERM "$holder"
    kill -CONT "$holder"
    wait "$holder"
    rc=$?
    expect_rc 75 "the old run stopping on SIGTERM"
    wait "$requeued"
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    expect_rc 0 "the requeued start"
    expect_text requeued.log "the run that held it ended after"
    # The SIGTERM is pending while the holder is stopped; after SIGCONT any of its threads may run
    # the handler, so the holder stops after step 15 or a few steps later (a step takes < 1 ms).
    # What matters is that the requeued start resumes from the save the old run ended with.
    last=$(sed -nE 's/^stopping cleanly after step ([0-9]+) \(signal 15\)$/\1/p' holder.log)
    [ -n "$last" ] && [ "$last" -ge 15 ] || fail "the old run did not stop cleanly at or after step 15"
    expect_text holder.log "checkpoint saved: $(ckpt c "$last")"
    from=$(sed -nE 's/^resumed from c\/ckpt-0*([0-9]+)\.h5 at step.*/\1/p' requeued.log)
    [ "$from" = "$last" ] || fail "the requeued start resumed from '$from', not the old run's step-$last save"
    same_losses ref.jsonl requeued.jsonl "$last"
    "$bin" ckpt diff "$(ckpt ref 40)" "$(ckpt c 40)" > /dev/null || fail "the requeued run's final checkpoint differs"
    for f in c/ckpt-*.h5; do verify_ok "$f"; done
    record "lock(requeued start while the old run stops)" \
      "train with lock_wait_s=30 while PID $holder holds c; then SIGTERM to the holder" "0 (holder: 75)" \
      "$(first_line requeued.log 'is in use by' | cut -c1-120) ... $(first_line requeued.log 'the run that held it')" \
      "started, waited for the holder and finished in $secs s; resumed from the holder's step-$last save; steps $((last + 1))-40 and ckpt-40 bit-identical to an uninterrupted run"
    ;;
  killed)
    BRT_FAULT_INJECT="kill@checkpoint save: writing /model/embed@nth=3" run killed.log 60 "${TRAIN[@]}" "${args[@]}" \
      checkpoint.dir=c
    expect_rc 137 "SIGKILL during the step-30 save"
    dead=$(sed -nE 's/^pid=([0-9]+) .*/\1/p' c/.brt-dist.lock)
    [ -n "$dead" ] || fail "the killed run left no holder line"
    [ -f c/ckpt-00000030.h5.tmp ] || fail "no half-written ckpt-30 to clean up"
    sha10=$(sha "$(ckpt c 10)") sha20=$(sha "$(ckpt c 20)")
    run next.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=c log.metrics_path=next.jsonl
    expect_rc 0 "the next start after the holder was killed"
    [ "$secs" -le 10 ] || fail "the next start took $secs s: it waited for a dead holder"
    expect_no_text next.log "is in use"
    expect_text next.log "checkpoint.dir c: removed ckpt-00000030.h5.tmp, left by a save that never finished"
    expect_text next.log "resumed from c/ckpt-00000020.h5 at step 20"
    [ "$(sha "$(ckpt c 10)")" = "$sha10" ] && [ "$(sha "$(ckpt c 20)")" = "$sha20" ] || fail "an earlier checkpoint changed"
    ! compgen -G "c/*.tmp*" > /dev/null || fail "a .tmp file was left: $(ls c)"
    grep -q "^pid=[0-9]" c/.brt-dist.lock && ! grep -q "^pid=$dead " c/.brt-dist.lock || fail "the lock file still names the dead run"
    same_losses ref.jsonl next.jsonl 20
    "$bin" ckpt diff "$(ckpt ref 40)" "$(ckpt c 40)" > /dev/null || fail "the resumed run's final checkpoint differs"
    record "lock(holder SIGKILLed mid-save)" "SIGKILL of PID $dead during its step-30 save, then a new start on c" "0" \
      "$(first_line next.log 'removed ckpt-')" \
      "started at once ($secs s, no wait for the dead holder); ckpt-10, ckpt-20 sha256 unchanged; resumed from step 20, steps 21-40 and ckpt-40 bit-identical"
    ;;
  foreign)
    # The holder's save of step 20 fails (an injected error while writing); it trains on.
    holder_args=(checkpoint.on_error=continue)
    start_holder c "throw@checkpoint save: writing /model/embed@nth=2"
    printf 'a save by another process\n' > c/ckpt-00000025.h5.tmp
    printf 'ckpt-00000025.h5\n' > c/latest.tmp.999999
    foreign_sha=$(cat c/ckpt-00000025.h5.tmp c/latest.tmp.999999 | sha256sum)
    kill -CONT "$holder"
    holder_finished_intact 0
    expect_text holder.log "checkpoint FAILED at step 20, training continues (checkpoint.on_error=continue)"
    [ "$(cat c/ckpt-00000025.h5.tmp c/latest.tmp.999999 2>/dev/null | sha256sum)" = "$foreign_sha" ] ||
      fail "a file another process put into c was changed or removed: $(ls -a c)"
    [ ! -e c/ckpt-00000020.h5.tmp ] || fail "the failed save left its own temporary file"
    [ ! -e "$(ckpt c 20)" ] || fail "the failed save committed"
    record "lock(files of another process in the directory)" \
      "ckpt-00000025.h5.tmp and latest.tmp.999999 written into c by another process; the run's step-20 save fails" "0" \
      "$(first_line holder.log 'checkpoint FAILED')" \
      "both foreign files sha256 unchanged after 3 commits and a failed save; the failed save removed only its own ckpt-20.h5.tmp; ckpt-40 bit-identical"
    ;;
  *) fail "unknown case '$case_name'" ;;
esac
echo "lock $case_name: passed"
