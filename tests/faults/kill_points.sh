#!/usr/bin/env bash
# SIGKILL at every phase of a save (creating the file, writing a parameter, optimizer state,
# the data cursor, closing, syncing, the rename that commits, pointing `latest`, pruning): the
# earlier checkpoints keep their sha256, the newest committed one verifies, `latest` names an
# existing good file, and the next start resumes and finishes bit-exactly like a run that was
# never killed.
#   kill_points.sh BIN [async|sync]   the save written by a background thread (checkpoint.async,
#                                     the default) or by the training thread
source "$(dirname "$0")/lib.sh"
mode=${2:-async}
args=(train.steps=6 checkpoint.every=1 checkpoint.keep=3 checkpoint.async=$([ "$mode" = async ] && echo true || echo false))
run ref.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=ref log.metrics_path=ref.jsonl
expect_rc 0 "reference run"
for phase in "creating" "writing /model/embed" "writing /optim/" "writing /data/cursor" "closing" \
             "syncing" "renaming" "pointing latest" "pruning"; do
  d="run-${phase//[ \/]/_}"
  run first.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=2 checkpoint.dir="$d"
  expect_rc 0 "first two steps"
  sha1=$(sha "$(ckpt "$d" 1)") sha2=$(sha "$(ckpt "$d" 2)")
  BRT_FAULT_INJECT="kill@checkpoint save: $phase" run killed.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$d" \
    log.metrics_path="$d.killed.jsonl"
  [ "$rc" -eq 137 ] || fail "$phase: expected death by SIGKILL (137), got $rc"
  expect_text killed.log "fault injection: SIGKILL at 'checkpoint save: $phase"
  [ "$(sha "$(ckpt "$d" 1)")" = "$sha1" ] && [ "$(sha "$(ckpt "$d" 2)")" = "$sha2" ] ||
    fail "$phase: an earlier checkpoint changed"
  newest=$(ls "$d"/ckpt-*.h5 | sort | tail -1)
  verify_ok "$newest"
  latest="$d/$(cat "$d/latest")"
  [ -f "$latest" ] || fail "$phase: latest names a missing file"
  verify_ok "$latest"
  run resumed.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$d" log.metrics_path="$d.jsonl"
  expect_rc 0 "$phase: resume"
  from=$(sed -nE 's/^resumed from .*ckpt-0*([0-9]+)\.h5 at step.*/\1/p' resumed.log)
  [ -n "$from" ] || fail "$phase: did not resume"
  same_losses ref.jsonl "$d.jsonl" "$from"
  "$bin" ckpt diff "$(ckpt ref 6)" "$(ckpt "$d" 6)" > /dev/null || fail "$phase: final checkpoint differs from the reference"
  record "kill_during_${mode}_save($phase)" "SIGKILL as '$phase' of the step-3 save begins" "137" \
    "$(first_line killed.log 'fault injection')" \
    "ckpt-1, ckpt-2 sha256 unchanged; newest $(basename "$newest") verifies; resumed from step $from; steps $((from + 1))-6 and the final checkpoint bit-identical"
done
echo "kill_points: all phases passed"
