#!/usr/bin/env bash
# The disk fills during a save (a tmpfs sized for one checkpoint and a half): the save fails
# cleanly naming the file and "No space left on device"; the previous checkpoint keeps its
# sha256 and verifies; no half-written file is left and its space is returned; no HDF5 noise.
# checkpoint.on_error=continue trains on, but a failed final save still fails the job. Once
# there is room again the next start resumes bit-exactly. Needs mount(8) (root); else skipped.
source "$(dirname "$0")/lib.sh"
args=(train.steps=4 checkpoint.every=1 checkpoint.keep=1)
run ref.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=ref log.metrics_path=ref.jsonl
expect_rc 0 "reference run"
size_kb=$(( $(du -k "$(ckpt ref 4)" | cut -f1) * 3 / 2 ))  # blocks in use (the file is sparse)
mkdir disk
mount -t tmpfs -o size=${size_kb}k tmpfs disk 2> /dev/null || { echo "SKIP: cannot mount a tmpfs here"; exit 77; }
trap 'cd /; umount "$work/disk" 2>/dev/null; rm -rf "$work"' EXIT
used() { df --output=used -k "$work/disk" | tail -1 | tr -d ' '; }
for policy in stop continue; do
  rm -rf disk/c
  run first.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=1 optim.total_steps=4 checkpoint.dir=disk/c
  expect_rc 0 "the first checkpoint fits"
  sha1=$(sha "$(ckpt disk/c 1)")
  run fault.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=disk/c checkpoint.on_error=$policy \
    log.metrics_path=fault.jsonl
  expect_rc 1 "a save into a full disk ($policy)"
  expect_text fault.log "resumed from disk/c/ckpt-00000001.h5 at step 1"
  expect_text fault.log "No space left on device"
  expect_text fault.log "disk/c/ckpt-00000002.h5"
  expect_clean_error fault.log
  if [ $policy = continue ]; then
    expect_text fault.log "training continues (checkpoint.on_error=continue)"
    expect_text fault.log "the final checkpoint failed at step 4"
    expect_text fault.log "step      4/4"
  else
    expect_text fault.log "checkpoint failed at step 2 (the last good checkpoint, disk/c/ckpt-00000001.h5, is intact)"
  fi
  [ "$(ls disk/c)" = "$(printf 'ckpt-00000001.h5\nflight\nlatest')" ] || [ "$(ls disk/c)" = "$(printf 'ckpt-00000001.h5\nlatest')" ] ||
    fail "left behind: $(ls disk/c)"
  verify_ok "$(ckpt disk/c 1)"
  [ "$(sha "$(ckpt disk/c 1)")" = "$sha1" ] || fail "ckpt-1 changed"
  [ "$(cat disk/c/latest)" = "ckpt-00000001.h5" ] || fail "latest moved"
  # Every byte of the failed saves came back (tmpfs usage = the one checkpoint and latest).
  [ "$(used)" -le $(( $(du -k "$(ckpt disk/c 1)" | cut -f1) + 16 )) ] || fail "space not returned: $(used) KiB used"
  printed=$(first_line fault.log "checkpoint failed|FAILED at step")
  record "disk_full(on_error=$policy)" "tmpfs of ${size_kb} KiB (1.5 checkpoints), keep=1, a save per step" "$rc" \
    "$printed" "ckpt-1 sha256 unchanged, verifies, is latest; no *.tmp; tmpfs usage back to one checkpoint ($(used) KiB)"
done
mount -o remount,size=$(( size_kb * 4 ))k "$work/disk" || fail "cannot grow the tmpfs"
run resumed.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=disk/c log.metrics_path=resumed.jsonl
expect_rc 0 "resume once there is room"
expect_text resumed.log "resumed from disk/c/ckpt-00000001.h5 at step 1"
same_losses ref.jsonl resumed.jsonl 1
"$bin" ckpt diff "$(ckpt ref 4)" "$(ckpt disk/c 4)" > /dev/null || fail "final checkpoint differs from the reference"
record "disk_full(resume)" "the tmpfs grown to 4 checkpoints" "0" "$(first_line resumed.log 'resumed from')" \
  "steps 2-4 and the final checkpoint bit-identical to the uninterrupted run"
