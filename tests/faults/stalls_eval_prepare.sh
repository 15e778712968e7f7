#!/usr/bin/env bash
# Deadlines outside training, under `mpirun -np 2`:
#   - prepare: world rank 0 trains the tokenizer while rank 1 waits; its heartbeat keeps a
#     tokenizer training longer than --timeout-s alive, and a SIGSTOPped rank 0 ends the job
#     (exit 124) with a report naming rank 1's wait;
#   - eval: a SIGSTOPped rank 1 (while loading the checkpoint) ends the job within
#     train.timeout_s (exit 124) with the collective timeout report and flight records.
source "$(dirname "$0")/lib.sh"
NP2=("${MPIRUN[@]}" -np 2)
/usr/bin/python3 - <<'PY'
import os, random
random.seed(7)
words = [''.join(random.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(random.randint(2, 9))) for _ in range(4000)]
for split, names, n in [("train", ["a", "b", "c"], 60000), ("validation", ["d"], 3000)]:
    os.makedirs("corpus/" + split, exist_ok=True)
    for name in names:
        with open("corpus/%s/%s.txt" % (split, name), "w") as f:
            for i in range(n):
                f.write(" ".join(random.choice(words) for _ in range(12)) + (".\n" if i % 7 else ".\n\n"))
PY
# A tokenizer that takes longer to train than the 1 s deadline: the heartbeat keeps rank 1 waiting.
run prepare.log 300 "${NP2[@]}" "$bin" prepare --corpus corpus --out data --vocab 3000 --timeout-s 1 --quiet
expect_rc 0 "prepare with a tokenizer that trains longer than --timeout-s"
record "prepare(slow tokenizer)" "vocab-3000 tokenizer training on rank 0 (${secs} s) with --timeout-s 1" "0" \
  "$(first_line prepare.log 'documents in')" "rank 1 waited on rank 0's heartbeat; no false timeout"
ALLOW_124=1
BRT_FAULT_INJECT="stop@prepare: tokenizer@rank=0" run stall.log 60 "${NP2[@]}" "$bin" prepare --corpus corpus --out data2 \
  --vocab 300 --timeout-s 5 --quiet
expect_rc 124 "a stopped rank 0 during prepare"
expect_text stall.log "timeout on world rank 1 (host "
expect_text stall.log "prepare: waiting for world rank 0 to load or train the tokenizer has not finished after"
expect_text stall.log "--timeout-s = 5.0"
expect_text stall.log "no flight record from world rank 0"
[ "$secs" -le 20 ] || fail "prepare took $secs s to end"
record "stall(prepare)" "SIGSTOP world rank 0 as the tokenizer stage begins" "124 after ${secs} s" \
  "$(first_line stall.log 'timeout on world rank')" "the job ended; nothing half-written is used (shards commit by rename)"

run train.log 60 "${TRAIN[@]}" data.source=shards data.path=data model.vocab=3000 train.steps=2 checkpoint.dir=c
expect_rc 0 "a checkpoint on the prepared data"
BRT_FAULT_INJECT="stop@checkpoint load: reading /model/embed@rank=1" run eval.log 60 "${NP2[@]}" "$bin" eval \
  --checkpoint "$(ckpt c 2)" train.timeout_s=5 --quiet
expect_rc 124 "a stopped rank 1 during eval"
expect_text eval.log "timeout on world rank 0 (host "
expect_text eval.log "flight records of the last 64 collectives per rank"
[ "$secs" -le 20 ] || fail "eval took $secs s to end"
verify_ok "$(ckpt c 2)"
record "stall(eval)" "SIGSTOP world rank 1 as eval loads /model/embed" "124 after ${secs} s" \
  "$(first_line eval.log 'timeout on world rank')" "ckpt-2 verifies"
