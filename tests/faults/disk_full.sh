#!/usr/bin/env bash
# A checkpoint disk without room, three ways, on a tmpfs (launch/process/checkpoint_space.h):
#  - too small for one checkpoint at start: train refuses before any step (exit 2), naming the
#    folder, the checkpoint's predicted size and the free space — not after the whole run;
#  - filled (by someone else) before a save: the save fails before writing a byte, naming the
#    file and both sizes;
#  - filled during a save (after its check): the save fails cleanly naming the file and "No
#    space left on device".
# Either way the previous checkpoint keeps its sha256 and verifies; no half-written file is left
# and its space is returned; no HDF5 noise. checkpoint.on_error=continue trains on, but a failed
# final save still fails the job. Once there is room again the next start resumes bit-exactly.
# Needs mount(8) (root); else skipped.
source "$(dirname "$0")/lib.sh"
args=(train.steps=4 checkpoint.every=1 checkpoint.keep=1)
run ref.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=ref log.metrics_path=ref.jsonl
expect_rc 0 "reference run"
ckpt_kb=$(du -k "$(ckpt ref 4)" | cut -f1)  # blocks in use (the file is sparse)
mkdir disk
mount -t tmpfs -o size=$(( ckpt_kb / 2 ))k tmpfs disk 2> /dev/null || { echo "SKIP: cannot mount a tmpfs here"; exit 77; }
trap 'cd /; umount "$work/disk" 2>/dev/null; rm -rf "$work"' EXIT
used() { df --output=used -k "$work/disk" | tail -1 | tr -d ' '; }
# fill_leaving KB: a filler file leaves KB KiB free.
fill_leaving() {
  local avail
  avail=$(df --output=avail -k "$work/disk" | tail -1 | tr -d ' ')
  head -c $(( (avail - $1) * 1024 )) /dev/zero > disk/filler 2> /dev/null || true
}
# start_paused LOG SPEC ARGS...: training in the background under BRT_FAULT_INJECT=SPEC; returns
# once it prints its pause line. wait_paused: waits for it; sets $rc.
start_paused() {
  local log=$1 spec=$2
  shift 2
  # The log of the previous start goes first: its pause line must not be taken for this one's.
  rm -f rc.txt "$log"
  (BRT_FAULT_INJECT=$spec timeout --kill-after=5 60 "${TRAIN[@]}" "$@" > "$log" 2>&1; echo $? > rc.txt) &
  bg=$!
  for _ in $(seq 600); do grep -q "fault injection: pausing" "$log" 2> /dev/null && return 0; sleep 0.05; done
  fail "no pause line in $log"
}
wait_paused() { wait "$bg"; rc=$(cat rc.txt); }

# 1. No room for one checkpoint at start (half a checkpoint's blocks).
run small.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=disk/c
expect_rc 2 "a checkpoint.dir without room for one checkpoint"
expect_text small.log "not enough disk space for checkpoint.dir disk/c: a checkpoint of this run takes about"
expect_text small.log "the file system of disk/c has"
expect_no_text small.log "step      1/4"
expect_clean_error small.log
record "disk_space(start)" "a tmpfs of $(( ckpt_kb / 2 )) KiB, half a checkpoint" "$rc" "$(first_line small.log 'not enough disk space')" \
  "no step run; nothing written"
mount -o remount,size=$(( ckpt_kb * 4 ))k "$work/disk" || fail "cannot grow the tmpfs"

# 2. and 3. Room at start; filled to half a checkpoint before the step-2 save's check (2), or
# inside the save, after it (3).
for mode in before during; do
  for policy in stop continue; do
    rm -rf disk/c disk/filler
    run first.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=1 optim.total_steps=4 checkpoint.dir=disk/c
    expect_rc 0 "the first checkpoint fits"
    sha1=$(sha "$(ckpt disk/c 1)")
    if [ $mode = before ]; then spec="pause@step=2@ms=1500"; else spec="pause@checkpoint save: writing@ms=1500"; fi
    start_paused fault.log "$spec" "${args[@]}" checkpoint.dir=disk/c checkpoint.on_error=$policy \
      log.metrics_path=fault.jsonl
    fill_leaving $(( ckpt_kb / 2 ))
    wait_paused
    rm -f disk/filler
    expect_rc 1 "a save into a full disk ($mode, $policy)"
    expect_text fault.log "resumed from disk/c/ckpt-00000001.h5 at step 1"
    expect_text fault.log "disk/c/ckpt-00000002.h5"
    if [ $mode = before ]; then
      expect_text fault.log "not enough disk space for disk/c/ckpt-00000002.h5: a checkpoint of this run takes about"
    else
      expect_text fault.log "No space left on device"
    fi
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
    record "disk_full($mode the save, on_error=$policy)" "the tmpfs filled to half a checkpoint $([ $mode = before ] && echo "before the step-2 save" || echo "inside the step-2 save, after its space check"), keep=1, a save per step" "$rc" \
      "$printed" "ckpt-1 sha256 unchanged, verifies, is latest; no *.tmp; tmpfs usage back to one checkpoint ($(used) KiB)"
  done
done
run resumed.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=disk/c log.metrics_path=resumed.jsonl
expect_rc 0 "resume once there is room"
expect_text resumed.log "resumed from disk/c/ckpt-00000001.h5 at step 1"
same_losses ref.jsonl resumed.jsonl 1
"$bin" ckpt diff "$(ckpt ref 4)" "$(ckpt disk/c 4)" > /dev/null || fail "final checkpoint differs from the reference"
record "disk_full(resume)" "room again (the filler removed)" "0" "$(first_line resumed.log 'resumed from')" \
  "steps 2-4 and the final checkpoint bit-identical to the uninterrupted run"
