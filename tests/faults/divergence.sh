#!/usr/bin/env bash
# Divergence-safe checkpoints. Steps 1-4 train at the normal learning
# rate with a save per step (keep = 3); then the run goes on at a learning rate that blows the
# weights up in one step whose own loss is still finite (its forward ran on the good weights),
# so every later step is non-finite:
#   divergence.sh BIN rollback    optim.lr=1e30 (weights ~1e29, finite), train.rollback=true: the
#                                 checkpoint of the blow-up step is never confirmed, nothing is
#                                 saved inside the run of skips, rollback goes to ckpt-4 (before
#                                 the blow-up), keep is not consumed, exit 1 after max_rollbacks;
#                                 the next start resumes from ckpt-4 bit-exactly
#   divergence.sh BIN end         the same rate, the run ends inside the run of skips: exit 1,
#                                 its end not saved, the unconfirmed ckpt-5 set aside
#   divergence.sh BIN nonfinite   optim.lr=1e40 (weights inf/NaN): the save refuses them naming
#                                 the tensors; then +-inf injected into ckpt-4 with every checksum
#                                 made to match: `ckpt verify` reports it, resume takes ckpt-3
source "$(dirname "$0")/lib.sh"
case_name=$2
args=(checkpoint.every=1 checkpoint.keep=3 optim.total_steps=12)  # one LR schedule for every run
diverge=(train.steps=12 train.max_skipped_steps=3)
run ref.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=12 checkpoint.dir=ref log.metrics_path=ref.jsonl
expect_rc 0 "reference"
run first.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=4 checkpoint.dir=c
expect_rc 0 "steps 1-4"
sha2=$(sha "$(ckpt c 2)") sha3=$(sha "$(ckpt c 3)") sha4=$(sha "$(ckpt c 4)")
kept() { ls c | tr '\n' ' '; }
# The next start at the normal rate resumes from checkpoint $1 and continues bit-exactly.
resumes_from() {
  run resumed.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=12 checkpoint.dir=c log.metrics_path=resumed.jsonl
  expect_rc 0 "the next start"
  expect_text resumed.log "resumed from c/ckpt-0000000$1.h5 at step $1"
  same_losses ref.jsonl resumed.jsonl "$1"
  "$bin" ckpt diff "$(ckpt ref 12)" "$(ckpt c 12)" > /dev/null || fail "final checkpoint differs from the reference"
}
case $case_name in
  rollback)
    run fault.log 60 "${TRAIN[@]}" "${args[@]}" "${diverge[@]}" optim.lr=1e30 train.rollback=true train.max_rollbacks=1 \
      checkpoint.dir=c log.metrics_path=fault.jsonl
    expect_rc 1 "a run that diverges and rolls back"
    grep -qE '"event":"train","step":5,"loss":4\.[0-9]+,' fault.jsonl || fail "step 5 (the blow-up) did not have a finite loss"
    expect_text fault.log "skip  step 6: non-finite loss or gradient norm"
    expect_text fault.log "checkpoint deferred at step 6: inside a run of 1 skipped step (step 6)"
    ! grep -E "checkpoint saved: c/ckpt-0*([6-9]|1[0-2])\.h5" fault.log || fail "saved inside the run of skipped steps"
    expect_text fault.log "set aside unconfirmed checkpoint c/ckpt-00000005.h5 as c/ckpt-00000005.h5.unconfirmed"
    expect_text fault.log "rolled back to c/ckpt-00000004.h5 at step 4"
    [ "$(grep -c '^rolled back to' fault.log)" -eq 1 ] || fail "rolled back to: $(grep '^rolled back to' fault.log)"
    expect_text fault.log "after 1 rollbacks (train.max_rollbacks); the run stops"
    expect_clean_error fault.log
    [ "$(kept)" = "ckpt-00000002.h5 ckpt-00000003.h5 ckpt-00000004.h5 ckpt-00000005.h5.unconfirmed ckpt-00000005.h5.unconfirmed.2 latest " ] ||
      fail "left: $(kept)"
    [ "$(sha "$(ckpt c 2)") $(sha "$(ckpt c 3)") $(sha "$(ckpt c 4)")" = "$sha2 $sha3 $sha4" ] || fail "ckpt-2..4 changed"
    [ "$(cat c/latest)" = "ckpt-00000004.h5" ] || fail "latest names $(cat c/latest)"
    verify_ok "$(ckpt c 4)"
    # What rollback refused: finite weights, so no checksum or verify could have told.
    verify_ok c/ckpt-00000005.h5.unconfirmed
    scale=$(/usr/bin/python3 -c 'import h5py, numpy, sys; print("%.1e" % abs(h5py.File(sys.argv[1])["model/embed"][()]).max())' \
      c/ckpt-00000005.h5.unconfirmed)
    resumes_from 4
    record "divergence(rollback)" "optim.lr=1e30 from step 5: step 5's loss finite, its weights max|embed| $scale, steps 6.. non-finite; a save per step, keep=3, rollback, max_rollbacks=1" \
      "1" "$(first_line fault.log 'set aside unconfirmed')" \
      "no save in the runs of skips (deferred); rollback to ckpt-4 < blow-up step 5; ckpt-2..4 sha256 unchanged (keep not consumed); ckpt-5 set aside unconfirmed; the next start resumed from ckpt-4, steps 5-12 and the final checkpoint bit-identical"
    ;;
  end)
    run fault.log 60 "${TRAIN[@]}" "${args[@]}" "${diverge[@]}" train.steps=7 optim.lr=1e30 checkpoint.dir=c
    expect_rc 1 "a run that ends inside a run of skipped steps"
    expect_text fault.log "the run ended inside a run of 2 skipped steps in a row (steps 6..7); its end is not saved (it may hold diverged weights). The last good checkpoint, c/ckpt-00000004.h5, is intact; the next start resumes from it."
    expect_text fault.log "set aside unconfirmed checkpoint c/ckpt-00000005.h5 as c/ckpt-00000005.h5.unconfirmed"
    expect_clean_error fault.log
    [ ! -e "$(ckpt c 7)" ] || fail "the diverged end was saved"
    [ "$(sha "$(ckpt c 4)")" = "$sha4" ] || fail "ckpt-4 changed"
    [ "$(cat c/latest)" = "ckpt-00000004.h5" ] || fail "latest names $(cat c/latest)"
    resumes_from 4
    record "divergence(end inside skips)" "optim.lr=1e30 from step 5; train.steps=7: steps 6-7 skipped, max_skipped_steps=3 not reached" \
      "1" "$(first_line fault.log 'the run ended inside')" \
      "nothing saved after step 5; ckpt-5 set aside unconfirmed; ckpt-4 sha256 unchanged, latest; the next start resumed from ckpt-4, bit-identical"
    ;;
  nonfinite)
    run fault.log 60 "${TRAIN[@]}" "${args[@]}" "${diverge[@]}" optim.lr=1e40 checkpoint.async=false checkpoint.dir=c
    expect_rc 1 "weights blown up to inf"
    expect_text fault.log "checkpoint refused (the last good checkpoint, c/ckpt-00000004.h5, is intact): step 5 holds "
    expect_text fault.log "non-finite values (NaN or inf) in "
    expect_text fault.log "/model/embed (2048 of 2048)"
    expect_text fault.log "3 consecutive steps skipped (steps 6..8, last: non-finite loss or gradient norm; train.max_skipped_steps = 3); the run stops. The last good checkpoint, c/ckpt-00000004.h5, is intact."
    expect_clean_error fault.log
    [ "$(kept)" = "ckpt-00000001.h5 ckpt-00000002.h5 ckpt-00000003.h5 ckpt-00000004.h5 latest " ] || fail "left: $(kept)"
    [ "$(sha "$(ckpt c 4)")" = "$sha4" ] || fail "ckpt-4 changed"
    printed=$(first_line fault.log 'checkpoint refused')
    # Diverged weights whose checksums match (a file saved before the refusal existed).
    damage "$(ckpt c 4)" nonfinite /model/embed
    run verify.log 30 "$bin" ckpt verify "$(ckpt c 4)"
    expect_rc 1 "ckpt verify of a file with +-inf in /model/embed"
    expect_text verify.log "DAMAGED: checkpoint c/ckpt-00000004.h5, dataset /model/embed: 2 non-finite values (NaN or inf) in chunk 0"
    run inspect.log 30 "$bin" ckpt inspect "$(ckpt c 4)"
    expect_rc 1 "ckpt inspect of it"
    grep -qE "/model/embed +float32 \[64, 32\] +checksum DAMAGED" inspect.log || fail "inspect does not mark /model/embed"
    resumes_from 3
    expect_text resumed.log "set aside damaged checkpoint c/ckpt-00000004.h5 as c/ckpt-00000004.h5.damaged"
    record "divergence(non-finite)" "optim.lr=1e40 from step 5 (weights inf/NaN), synchronous saves; then +-inf in ckpt-4's /model/embed with matching checksums" \
      "train 1, verify 1, inspect 1, resume 0" "$printed" \
      "no ckpt-5 written, ckpt-4 sha256 unchanged; verify: $(first_line verify.log 'DAMAGED: ' | cut -c1-90)...; resume set ckpt-4 aside as damaged, resumed from ckpt-3, steps 4-12 bit-identical"
    ;;
  *) fail "unknown case $case_name" ;;
esac
