#!/usr/bin/env bash
# Outputs that never fail silently (data/output_file.h), on a small tmpfs:
#   - the metrics JSONL fills mid-run: one warning naming the file and "No space left on
#     device", training goes on to its last step and final checkpoint, the file holds only whole
#     JSON records, and the lost ones are counted at the end;
#   - eval --json and --token-losses into a full disk: exit 1 naming the file and the reason,
#     no partial file and no .tmp left, the report still printed;
#   - prepare into a full disk (its tokenizer, a shard): exit 1 naming the file and the reason,
#     no .tmp left.
# Needs mount(8) (root); else skipped.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 - <<'PY'
import os, random
random.seed(3)
words = ["".join(random.choice("abcdefghij") for _ in range(random.randint(2, 6))) for _ in range(300)]
for split, names in [("train", ["a", "b"]), ("validation", ["c"])]:
    os.makedirs("corpus/" + split, exist_ok=True)
    for name in names:
        with open("corpus/%s/%s.txt" % (split, name), "w") as f:
            f.write("\n".join(" ".join(random.choice(words) for _ in range(10)) + "." for _ in range(300)))
PY
run prepare.log 120 "$bin" prepare --corpus corpus --out data --vocab 320 --quiet
expect_rc 0 "prepare a small corpus"
run train.log 60 "${TRAIN[@]}" data.source=shards data.path=data model.vocab=320 train.steps=2 checkpoint.dir=c
expect_rc 0 "a checkpoint on the prepared data"
mkdir disk
mount -t tmpfs -o size=64k tmpfs disk 2> /dev/null || { echo "SKIP: cannot mount a tmpfs here"; exit 77; }
trap 'cd /; umount "$work/disk" 2>/dev/null; rm -rf "$work"' EXIT
fill() {  # fill FREE_KB: the tmpfs keeps about FREE_KB KiB free
  rm -rf disk/*
  dd if=/dev/zero of=disk/fill bs=1k count=$(( 64 - $1 )) 2> /dev/null
}
no_tmp() { [ -z "$(find disk -name '*.tmp*')" ] || fail "left behind: $(find disk -name '*.tmp*')"; }

# The metrics file fills mid-run: warned once, training goes on, only whole records.
fill 16
run metrics.log 120 "${TRAIN[@]}" train.steps=200 optim.total_steps=200 log.metrics_path=disk/m.jsonl \
  checkpoint.dir=c-m checkpoint.every=0
expect_rc 0 "training with a full metrics disk"
expect_text metrics.log "warning: cannot write the metrics file disk/m.jsonl: No space left on device"
[ "$(grep -c "cannot write the metrics file" metrics.log)" -eq 1 ] || fail "the warning is not printed once"
expect_text metrics.log "step    200/200"
expect_text metrics.log "metrics records were not written to disk/m.jsonl"
verify_ok "$(ckpt c-m 200)"
[ -s disk/m.jsonl ] && [ "$(tail -c1 disk/m.jsonl | od -An -c | tr -d ' ')" = '\n' ] || fail "m.jsonl does not end in a whole line"
/usr/bin/python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    json.loads(line); n += 1
print(n)' disk/m.jsonl > records.txt || fail "m.jsonl holds a record cut short"
record "outputs(metrics disk full mid-run)" "tmpfs with 16 KiB free for log.metrics_path, 200 steps" "$rc" \
  "$(first_line metrics.log 'cannot write the metrics file')" \
  "all 200 steps and ckpt-200 (verifies); m.jsonl: $(cat records.txt) whole JSON records, none cut; $(first_line metrics.log 'were not written')"

# eval --json and --token-losses: the disk fills while eval runs (after its start-up checks,
# which find room): eval is held at its checkpoint load, the tmpfs is filled, eval goes on.
for out in json token-losses; do
  fill 8
  BRT_FAULT_INJECT="stop@checkpoint load: reading /model/embed" \
    "$bin" eval --checkpoint "$(ckpt c 2)" --quiet --$out disk/out.$out > "eval-$out.log" 2>&1 &
  pid=$!
  for _ in $(seq 400); do [ "$(ps -o stat= -p $pid | cut -c1)" = T ] && break; sleep 0.05; done
  [ "$(ps -o stat= -p $pid | cut -c1)" = T ] || { kill -9 $pid; fail "eval did not reach its checkpoint load"; }
  dd if=/dev/zero of=disk/fill2 bs=1k 2> /dev/null  # until the tmpfs is full
  kill -CONT $pid
  timeout 60 tail --pid=$pid -f /dev/null
  wait $pid; rc=$?
  expect_rc 1 "eval --$out into a disk that filled"
  expect_text "eval-$out.log" "brt-dist eval: error: cannot write disk/out.$out: No space left on device"
  expect_text "eval-$out.log" "eval validation:"  # the report is printed all the same
  expect_clean_error "eval-$out.log"
  [ ! -e disk/out.$out ] || fail "a partial disk/out.$out is left"
  no_tmp
  record "outputs(eval --$out, full disk)" "the tmpfs filled while eval ran" "$rc" \
    "$(first_line "eval-$out.log" 'cannot write')" "no disk/out.$out, no .tmp; the report printed"
done

# prepare into a full disk (the tokenizer given, so every file written is prepare's own): with
# 4 KiB free the tokenizer copy fails; with 24 KiB it fits and a shard fails.
for free in 4 24; do
  fill $free
  run prepare-full.log 60 "$bin" prepare --corpus corpus --out disk/p --tokenizer data/tokenizer.model --quiet
  expect_nonzero "prepare into a full disk ($free KiB free)"
  expect_text prepare-full.log "No space left on device"
  expect_text prepare-full.log "cannot write disk/p/"
  expect_clean_error prepare-full.log
  [ $free = 4 ] || expect_text prepare-full.log "cannot write disk/p/shards/"
  no_tmp
  record "outputs(prepare, full disk, $free KiB free)" "prepare --out on a tmpfs with $free KiB free" "$rc" \
    "$(first_line prepare-full.log 'No space left')" "no .tmp under disk/p"
done
