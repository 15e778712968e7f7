#!/usr/bin/env bash
# Damaged checkpoints, and the retention that must keep the good ones (one process):
#   damage.sh BIN retention KEEP   good ckpt-10, a flipped byte in ckpt-20's data, ckpt-30 cut
#                                  in half; resume with checkpoint.keep=KEEP, a save per step
#   damage.sh BIN data|header|config|truncate
#                                  that damage to the newest checkpoint: ckpt verify, eval and
#                                  generate refuse it naming what is wrong; resume falls back
#   damage.sh BIN all_damaged      every checkpoint damaged: an error naming them, nothing
#                                  renamed; with checkpoint.allow_fresh_start=true step 0
#   damage.sh BIN verify_dir       `ckpt verify DIR`: three good checkpoints OK (exit 0); one
#                                  flipped byte named with its file (exit 1); a save that never
#                                  finished named, not verified; an empty directory exit 1
source "$(dirname "$0")/lib.sh"
case_name=$2
args=(checkpoint.keep=0 optim.total_steps=34)  # one LR schedule for every run
# Three good checkpoints (steps 10, 20, 30) and the uninterrupted reference to step 34.
run ref.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=34 checkpoint.every=10 checkpoint.dir=ref log.metrics_path=ref.jsonl
expect_rc 0 "reference"
run base.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=30 checkpoint.every=10 checkpoint.dir=c
expect_rc 0 "three checkpoints"
case $case_name in
  verify_dir)
    run good.log 60 "$bin" ckpt verify c
    expect_rc 0 "ckpt verify of a directory of good checkpoints"
    expect_text good.log "c/ckpt-00000030.h5: OK"
    expect_text good.log "c/ckpt-00000010.h5: OK"
    expect_text good.log "c: 3 checkpoint(s), all OK"
    sha20=$(sha "$(ckpt c 20)")
    damage "$(ckpt c 20)" data /model/embed
    cp "$(ckpt c 10)" c/ckpt-00000040.h5.tmp
    run bad.log 60 "$bin" ckpt verify c
    expect_rc 1 "ckpt verify of a directory with a damaged checkpoint"
    expect_text bad.log "c/ckpt-00000020.h5: DAMAGED"
    expect_text bad.log "dataset /model/embed"
    expect_text bad.log "c/ckpt-00000030.h5: OK"
    expect_text bad.log "not a checkpoint (a save that never finished): c/ckpt-00000040.h5.tmp"
    expect_text bad.log "c: 3 checkpoint(s), 1 DAMAGED"
    [ "$(sha "$(ckpt c 20)")" != "$sha20" ] && [ -f "$(ckpt c 30)" ] || fail "verify changed the files"
    mkdir empty
    run empty.log 60 "$bin" ckpt verify empty
    expect_rc 1 "ckpt verify of an empty directory"
    expect_text empty.log "empty: no checkpoint (ckpt-NNNNNNNN.h5) to verify"
    record "ckpt verify DIR" "a flipped byte in ckpt-20 of three" "$rc (1 damaged), 0 when all good" \
      "$(grep -m1 'DAMAGED' bad.log | cut -c1-120)" "every file as it was"
    ;;
  retention)
    keep=$3
    sha10=$(sha "$(ckpt c 10)")
    damage "$(ckpt c 20)" data /model/embed
    damage "$(ckpt c 30)" truncate
    run fault.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=11 checkpoint.every=1 checkpoint.keep="$keep" checkpoint.dir=c \
      log.metrics_path=resumed.jsonl
    expect_rc 0 "resume past damaged checkpoints"
    expect_text fault.log "resumed from c/ckpt-00000010.h5 at step 10"
    expect_text fault.log "set aside damaged checkpoint c/ckpt-00000020.h5 as c/ckpt-00000020.h5.damaged"
    expect_text fault.log "set aside damaged checkpoint c/ckpt-00000030.h5 as c/ckpt-00000030.h5.damaged"
    [ "$keep" -lt 2 ] || [ "$(sha "$(ckpt c 10)")" = "$sha10" ] || fail "ckpt-10 changed"
    run more.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=14 checkpoint.every=1 checkpoint.keep="$keep" checkpoint.dir=c \
      log.metrics_path=more.jsonl
    expect_rc 0 "more saves"
    expect_text more.log "resumed from c/ckpt-00000011.h5 at step 11"
    kept=$(ls c/ckpt-*.h5 | xargs -n1 basename | tr '\n' ' ')
    # keep counts confirmed checkpoints; the newest, ckpt-14, is provisional (no step ran on it).
    want=$([ "$keep" -eq 1 ] && echo "ckpt-00000013.h5 ckpt-00000014.h5 " || echo "ckpt-00000012.h5 ckpt-00000013.h5 ckpt-00000014.h5 ")
    [ "$kept" = "$want" ] || fail "keep=$keep left: $kept (want $want)"
    [ "$(cat c/latest)" = "ckpt-00000014.h5" ] || fail "latest names $(cat c/latest)"
    for f in c/ckpt-*.h5; do verify_ok "$f"; done
    [ -f c/ckpt-00000020.h5.damaged ] && [ -f c/ckpt-00000030.h5.damaged ] || fail "set-aside files gone"
    run again.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=14 checkpoint.keep="$keep" checkpoint.dir=c
    expect_text again.log "resumed from c/ckpt-00000014.h5 at step 14"
    same_losses ref.jsonl resumed.jsonl 10
    same_losses ref.jsonl more.jsonl 11
    record "retention(keep=$keep)" "good ckpt-10, flipped byte in ckpt-20's /model/embed, ckpt-30 truncated; a save per step" \
      "0" "$(first_line fault.log 'set aside damaged checkpoint c/ckpt-00000020')" \
      "resumed from ckpt-10 (sha256 unchanged); kept: $kept; latest = ckpt-00000014.h5; damaged files set aside, never counted; the next start resumes at 14"
    ;;
  data|header|config|truncate)
    newest=$(ckpt c 30)
    case $case_name in
      data) damage "$newest" data /model/embed; want="dataset /model/embed" ;;
      header) damage "$newest" header; want="is damaged: its root group cannot be read" ;;
      config) damage "$newest" config "window = 8" "window = 4"; want="root attribute 'config_toml' does not match its checksum" ;;
      truncate) damage "$newest" truncate; want="truncated" ;;
    esac
    sha20=$(sha "$(ckpt c 20)")
    run verify.log 30 "$bin" ckpt verify "$newest"
    expect_nonzero "ckpt verify of a damaged file"
    expect_text verify.log "$want"
    expect_clean_error verify.log
    run eval.log 30 "$bin" eval --checkpoint "$newest" data.path="$work/no-data"
    expect_nonzero "eval of a damaged file"
    expect_text eval.log "brt-dist eval: error: "
    expect_text eval.log "$newest"
    expect_clean_error eval.log
    if [ "$case_name" != data ]; then  # generate reads the tokenizer before the tensors
      run generate.log 30 "$bin" generate --checkpoint "$newest" --prompt x --tokenizer /nonexistent
      expect_nonzero "generate of a damaged file"
      expect_text generate.log "brt-dist generate: error: "
      expect_text generate.log "$want"
      expect_clean_error generate.log
    fi
    run fault.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=34 checkpoint.every=10 checkpoint.dir=c log.metrics_path=resumed.jsonl
    expect_rc 0 "resume past the damaged checkpoint"
    expect_text fault.log "$want"
    expect_text fault.log "resumed from c/ckpt-00000020.h5 at step 20"
    expect_text fault.log "set aside damaged checkpoint $newest"
    [ "$(sha "$(ckpt c 20)")" = "$sha20" ] || fail "ckpt-20 changed"
    same_losses ref.jsonl resumed.jsonl 20
    record "damaged_checkpoint($case_name)" "$case_name damage to the newest checkpoint (ckpt-30)" "verify 1, eval 1, generate 1; train 0" \
      "$(first_line verify.log 'DAMAGED')" \
      "eval/generate refused it naming the file; resume fell back to ckpt-20 (sha256 unchanged), set ckpt-30 aside, steps 21-34 bit-identical"
    ;;
  all_damaged)
    for s in 10 20 30; do damage "$(ckpt c $s)" data /model/embed; done
    run fault.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=34 checkpoint.dir=c
    expect_rc 1 "every checkpoint damaged"
    expect_text fault.log "every checkpoint in c is damaged (ckpt-00000030.h5, ckpt-00000020.h5, ckpt-00000010.h5)"
    expect_text fault.log "checkpoint.allow_fresh_start=true"
    expect_clean_error fault.log
    [ "$(ls c/*.damaged 2>/dev/null | wc -l)" -eq 0 ] || fail "files renamed although the run refused"
    run again.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=34 checkpoint.dir=c
    expect_rc 1 "second start"
    run fresh.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=3 checkpoint.dir=c checkpoint.allow_fresh_start=true
    expect_rc 0 "fresh start allowed"
    expect_text fresh.log "every checkpoint in c is damaged; starting from step 0"
    [ "$(ls c/*.damaged | wc -l)" -eq 3 ] || fail "damaged files not set aside"
    # One step past the fault: the next start resumes the new run, not step 0 or an error.
    run next.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=4 checkpoint.dir=c
    expect_rc 0 "start after the fresh start"
    expect_text next.log "resumed from c/ckpt-00000003.h5 at step 3"
    record "all_checkpoints_damaged" "a flipped byte in /model/embed of ckpt-10, -20 and -30" "1 (twice); 0 with allow_fresh_start" \
      "$(first_line fault.log 'every checkpoint in')" \
      "nothing renamed or deleted until checkpoint.allow_fresh_start=true; then set aside, fresh run, its next start resumes at step 3"
    ;;
  *) fail "unknown case $case_name" ;;
esac
