#!/usr/bin/env bash
# Resume without surprises (one process): --resume FILE resumes from exactly that file;
# --resume of a missing or empty directory is an error; a fresh start or an older FILE would
# overwrite (and later resumes prefer) checkpoints already in checkpoint.dir, so it is refused
# unless checkpoint.overwrite=true; a configured checkpoint.dir that does not exist yet starts
# fresh (Slurm's first start); a CONFIG that is a directory is an error. Every refusal leaves
# the existing checkpoints' sha256 unchanged.
source "$(dirname "$0")/lib.sh"
args=(optim.total_steps=6 checkpoint.every=2 checkpoint.keep=0)
run ref.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=6 checkpoint.dir=ref log.metrics_path=ref.jsonl
expect_rc 0 "reference"
run base.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=4 checkpoint.dir=c
expect_rc 0 "a run of 4 steps"
sha2=$(sha "$(ckpt c 2)") sha4=$(sha "$(ckpt c 4)")
unchanged() { [ "$(sha "$(ckpt c 2)")" = "$sha2" ] && [ "$(sha "$(ckpt c 4)")" = "$sha4" ] || fail "$1: a checkpoint changed"; }

# train.steps at or below the checkpoint's step: nothing to train, said in one line (exit 0: a
# requeued finished job is done), nothing written.
run past.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=3 checkpoint.dir=c
expect_rc 0 "train.steps below the checkpoint's step"
expect_text past.log "resumed from c/ckpt-00000004.h5 at step 4"
expect_text past.log "nothing to train: the run is at step 4 and train.steps = 3 (raise train.steps to train on)"
expect_no_text past.log "step      4/"
unchanged "train.steps below the checkpoint's step"
[ ! -f "$(ckpt c 3)" ] || fail "a checkpoint was written"
record "resume(past train.steps)" "train.steps=3 over ckpt-4" "$rc" "$(first_line past.log 'nothing to train')" "ckpt-2 and ckpt-4 sha256 unchanged, nothing written"

# --resume FILE with a newer checkpoint beside it: refused, then allowed with overwrite.
run older.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=6 --resume "$(ckpt c 2)"
expect_rc 1 "--resume of an older file"
expect_text older.log "checkpoints newer than ckpt-00000002.h5 are in c (ckpt-00000004.h5)"
expect_text older.log "checkpoint.overwrite=true"
expect_clean_error older.log
unchanged "--resume older FILE"
record "resume(older FILE)" "--resume c/ckpt-2 while c/ckpt-4 exists" "$rc" "$(first_line older.log error)" "ckpt-2 and ckpt-4 sha256 unchanged"
# --resume FILE alone in its directory: exactly that file, saves beside it.
mkdir f && cp "$(ckpt c 2)" f/
run file.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=6 --resume "$(ckpt f 2)" log.metrics_path=file.jsonl
expect_rc 0 "--resume FILE"
expect_text file.log "resumed from f/ckpt-00000002.h5 at step 2"
[ -f "$(ckpt f 6)" ] || fail "--resume FILE did not save beside it"
same_losses ref.jsonl file.jsonl 2
record "resume(FILE)" "--resume f/ckpt-2" "$rc" "$(first_line file.log 'resumed from')" "steps 3-6 bit-identical to the uninterrupted run"
# A damaged FILE is an error, not a fallback: the user chose it.
cp "$(ckpt f 2)" bad.h5 && damage bad.h5 data /model/embed
run damaged.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=6 --resume bad.h5
expect_rc 1 "--resume of a damaged file"
expect_text damaged.log "--resume bad.h5: the checkpoint is damaged"
expect_text damaged.log "dataset /model/embed"
record "resume(damaged FILE)" "--resume of a file with a flipped byte" "$rc" "$(first_line damaged.log error)" "nothing written"

# --resume of a directory that does not exist, or holds nothing: errors; nothing created.
run missing.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=6 --resume no-such-dir
expect_rc 1 "--resume of a missing directory"
expect_text missing.log "--resume no-such-dir: no such file or directory"
[ ! -e no-such-dir ] || fail "--resume created the directory"
mkdir empty
run empty.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=6 --resume empty
expect_rc 1 "--resume of an empty directory"
expect_text empty.log "--resume empty: the directory holds no checkpoint to resume from"
record "resume(missing DIR)" "--resume of a mistyped directory" "1" "$(first_line missing.log error)" "no directory created, no run started"

# A fresh start into a directory with another run's checkpoints: refused, or overwrite.
run fresh.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=6 checkpoint.dir=c checkpoint.resume=false
expect_rc 1 "a fresh start over checkpoints"
expect_text fresh.log "a fresh start would overwrite and prune checkpoints already in c (ckpt-00000004.h5, ckpt-00000002.h5)"
unchanged "fresh start"
record "resume(fresh over a run)" "checkpoint.resume=false into a directory with ckpt-2, ckpt-4" "$rc" "$(first_line fresh.log error)" "ckpt-2 and ckpt-4 sha256 unchanged"
# Another run's directory as checkpoint.dir while resuming a file from elsewhere: refused.
run other.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=6 --resume "$(ckpt f 2)" checkpoint.dir=c
expect_rc 1 "saving into another run's directory"
expect_text other.log "checkpoint.dir c already holds checkpoints of another run"
unchanged "another run's directory"
run overwrite.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=6 --resume "$(ckpt c 2)" checkpoint.overwrite=true log.metrics_path=ow.jsonl
expect_rc 0 "--resume older FILE with overwrite"
expect_text overwrite.log "checkpoint.overwrite: checkpoints newer than ckpt-00000002.h5"
expect_text overwrite.log "resumed from c/ckpt-00000002.h5 at step 2"
same_losses ref.jsonl ow.jsonl 2
run fresh_ow.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=2 checkpoint.dir=c checkpoint.resume=false checkpoint.overwrite=true
expect_rc 0 "a fresh start with overwrite"
expect_text fresh_ow.log "checkpoint.overwrite: a fresh start would overwrite"
[ "$(ls c/*.h5 | wc -l)" -eq 1 ] || fail "overwrite kept old checkpoints: $(ls c)"

# Slurm's first start: a configured checkpoint.dir that does not exist yet.
run first.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=2 checkpoint.dir=new-run
expect_rc 0 "first start"
expect_text first.log "no checkpoint in new-run: starting from step 0"
# A CONFIG that is not a regular file.
run dirconfig.log 30 "$bin" train "$work"
expect_rc 1 "a directory as CONFIG"
expect_text dirconfig.log "$work: is a directory, not a config file"
record "config(directory)" "brt-dist train DIR" "$rc" "$(first_line dirconfig.log error)" "no run started"
echo "resume_semantics: all cases passed"
