#!/usr/bin/env bash
# Data and tokenizer verified (deliverable 4; docs/data-format.md "Verification"):
#   data.sh shards     flipped low bits, a truncated shard, an out-of-range token, a bad index.tsv
#                      row, a .meta or tokenizer.model of another run: train and eval refuse with
#                      exit 1, naming the shard file and the document; the checkpoint is untouched;
#                      prepare with the same flags redoes exactly the damaged shard and eval gives
#                      the clean numbers again
#   data.sh tokenizer  eval and generate given another tokenizer's data or model: refused, both
#                      hashes named (once under mpirun -np 2 too); with --allow-tokenizer-mismatch
#                      a warning and exit 0
#   data.sh prepare    reruns with a changed --vocab, --model-type or corpus: refused, nothing
#                      changed (under mpirun -np 2 too); --retrain (mpirun -np 2) retrains and
#                      removes the shards no longer planned; --tokenizer OUT/tokenizer.model keeps
#                      the tokenizer
source "$(dirname "$0")/lib.sh"
what=$2
DAMAGE=(/usr/bin/python3 "$here/shard_damage.py")
NP2=("${MPIRUN[@]}" -np 2)

# A tiny corpus: 6 train and 2 validation documents of letter words (about 1.5 kB each).
# make_corpus DIR [TRAIN_DOCS]
make_corpus() {
  /usr/bin/python3 - "$1" "${2:-6}" <<'PY'
import os, sys
root, train = sys.argv[1], int(sys.argv[2])
def words(n, seed):
    out = []
    for w in range(n):
        k, s = (w * 7 + seed * 13) % 409 + 26, ""
        while k:
            s += chr(97 + k % 26); k //= 26
        out.append(s + ("\n" if w % 13 == 12 else " "))
    return "".join(out)
for split, count, base in (("train", train, 0), ("validation", 2, 50)):
    os.makedirs(os.path.join(root, split), exist_ok=True)
    for i in range(count):
        open(os.path.join(root, split, "doc%d.txt" % i), "w").write(words(220 + 40 * i, base + i))
PY
}
# prepare_into OUT [flags...]: prepare the corpus in ./corpus with a small vocabulary and ~2 kB shards.
prepare_into() {
  local out=$1
  shift
  run "prepare-$(basename "$out").log" 120 "$bin" prepare --corpus corpus --out "$out" --vocab 300 --shard-mb 0.002 "$@"
}
DATA_TRAIN=("${TRAIN[@]}" model.vocab=320 data.source=shards checkpoint.every=100000)
# refused NAME WANT CMD...: exit 1, WANT printed exactly once, none of MPI's or HDF5's noise.
refused() {
  local name=$1 want=$2
  shift 2
  run "$name.log" 60 "$@"
  expect_rc 1 "$name"
  expect_text "$name.log" "$want"
  [ "$(grep -cF -- "$want" "$name.log")" -eq 1 ] || fail "$name: '$want' printed $(grep -cF -- "$want" "$name.log") times"
  expect_clean_error "$name.log"
}
# The eval report without its timing: equal reports mean equal numbers.
numbers() { /usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r.pop("seconds", None); print(json.dumps(r, sort_keys=True))' "$1"; }
fresh_copy() { rm -rf "$2" && cp -r "$1" "$2"; }
first_error() { grep -m1 "error: " "$1" | cut -c1-220; }

case_shards() {
  make_corpus corpus
  prepare_into data
  expect_rc 0 "prepare"
  run train.log 60 "${DATA_TRAIN[@]}" data.path="$work/data" train.steps=2 checkpoint.dir=c
  expect_rc 0 "a checkpoint to evaluate"
  local good
  good=$(ckpt c 2)
  local good_sha
  good_sha=$(sha "$good")
  run eval-clean.log 60 "$bin" eval --checkpoint "$good" --json clean.json --quiet
  expect_rc 0 "eval of clean data"

  # Flipped low bits: in a validation document (eval) and in a train document (train, resumed).
  fresh_copy data flip
  local hit shard doc source
  IFS=$'\t' read -r shard doc source < <("${DAMAGE[@]}" flip flip validation 1)
  refused eval-flip "$shard is damaged: document $doc ($source)" "$bin" eval --checkpoint "$good" --data "$work/flip" --quiet
  expect_text eval-flip.log "does not match its checksum in"
  expect_no_text eval-flip.log "bits/token"
  IFS=$'\t' read -r shard doc source < <("${DAMAGE[@]}" flip flip train 2)
  fresh_copy c c-flip
  refused train-flip "$shard is damaged: document $doc ($source)" "${DATA_TRAIN[@]}" data.path="$work/flip" \
    train.steps=300 checkpoint.dir=c-flip
  [ "$(sha "$(ckpt c-flip 2)")" = "$good_sha" ] || fail "the resumed run changed ckpt-2"
  [ "$(ls c-flip/*.h5 | wc -l)" -eq 1 ] || fail "the failed run left checkpoints: $(ls c-flip)"
  verify_ok "$(ckpt c-flip 2)"
  record "data(flipped bits)" "the lowest bit of one byte in a validation and a train document" "eval 1, train 1" \
    "$(first_error eval-flip.log)" "ckpt-2 sha256 unchanged and verifies; no checkpoint from the damaged run"
  # In-range damage in the middle of every train document, and a run too short to read any
  # document to its end (3 steps of 32 tokens): refused at the first read of a damaged document
  # (the whole document is verified then), before a step trains on it.
  fresh_copy data flipall
  for k in 0 1 2 3 4 5; do "${DAMAGE[@]}" flipall flip train $k > /dev/null; done
  run train-short.log 60 "${DATA_TRAIN[@]}" data.path="$work/flipall" train.steps=3 checkpoint.dir=c-short
  expect_rc 1 "a 3-step run on damaged shards"
  expect_text train-short.log "is damaged: document"
  expect_text train-short.log "does not match its checksum in"
  expect_no_text train-short.log "step      1/3"
  expect_clean_error train-short.log
  ! ls c-short/*.h5 > /dev/null 2>&1 || fail "the damaged run wrote a checkpoint: $(ls c-short)"
  record "data(damage mid-document, 3 steps)" "the lowest bit in the middle of every train document; train.steps=3" "$rc" \
    "$(first_error train-short.log)" "no step trained, no checkpoint written"
  # prepare with the same flags redoes exactly the two damaged shards; eval is clean again.
  run prepare-redo.log 120 "$bin" prepare --corpus corpus --out flip --vocab 300 --shard-mb 0.002
  expect_rc 0 "prepare over the damaged copy"
  expect_text prepare-redo.log "(2 written,"
  run eval-redone.log 60 "$bin" eval --checkpoint "$good" --data "$work/flip" --json redone.json --quiet
  expect_rc 0 "eval after prepare redid the shards"
  [ "$(numbers clean.json)" = "$(numbers redone.json)" ] || fail "eval after the redo differs from the clean data's"
  record "data(redo)" "prepare with the same flags over the damaged copy" "0" "$(grep -m1 "shards (" prepare-redo.log)" \
    "the 2 damaged shards redone; eval's report identical to the clean data's"

  # A truncated shard: named at open with its first lost document; index.tsv not blamed.
  fresh_copy data trunc
  IFS=$'\t' read -r shard doc source < <("${DAMAGE[@]}" trunc truncate train 0 6)
  fresh_copy c c-trunc
  refused train-trunc "$shard is truncated: " "${DATA_TRAIN[@]}" data.path="$work/trunc" train.steps=4 checkpoint.dir=c-trunc
  expect_text train-trunc.log "and the documents after it lie past its end"
  expect_no_text train-trunc.log "index.tsv"
  [ "$(sha "$(ckpt c-trunc 2)")" = "$good_sha" ] || fail "ckpt-2 changed"
  refused eval-trunc "$shard is truncated: " "$bin" eval --checkpoint "$good" --data "$work/trunc" --split train --quiet
  record "data(truncated shard)" "6 bytes cut off a train shard" "train 1, eval 1" "$(first_error train-trunc.log)" \
    "ckpt-2 sha256 unchanged"

  # An out-of-range token id: named with the shard, document and position.
  fresh_copy data token
  IFS=$'\t' read -r shard doc source < <("${DAMAGE[@]}" token token validation 0 65535)
  refused eval-token "$shard is damaged: document $doc ($source) has token id 65535 at position 5" \
    "$bin" eval --checkpoint "$good" --data "$work/token" --quiet
  expect_text eval-token.log "pieces of $work/token/tokenizer.model"
  record "data(out-of-range token)" "token id 65535 in a validation document (vocabulary 300)" "1" \
    "$(first_error eval-token.log)" "nothing written"

  # A malformed index.tsv row: its line and document.
  fresh_copy data index
  IFS=$'\t' read -r shard doc source < <("${DAMAGE[@]}" index index-field validation 1 4 12x)
  refused eval-index "malformed number '12x'" "$bin" eval --checkpoint "$good" --data "$work/index" --quiet
  expect_text eval-index.log "index.tsv line "
  expect_text eval-index.log "(the row of document $doc, $source;"
  record "data(bad index row)" "a token count '12x' in index.tsv" "1" "$(first_error eval-index.log)" "nothing written"

  # Files of different runs: a .meta of another tokenizer, another tokenizer.model.
  fresh_copy data meta
  IFS=$'\t' read -r shard doc source < <("${DAMAGE[@]}" meta meta-tokenizer train 0 0123456789abcdef)
  refused train-meta "$shard: made with tokenizer 0123456789abcdef, but $work/meta/manifest.tsv says tokenizer" \
    "${DATA_TRAIN[@]}" data.path="$work/meta" train.steps=2
  prepare_into other --vocab 320 --quiet
  fresh_copy data model
  cp other/tokenizer.model model/tokenizer.model
  refused eval-model "$work/model/tokenizer.model is tokenizer $(cut -f2 <(grep ^tokenizer other/manifest.tsv)), but $work/model/manifest.tsv says" \
    "$bin" eval --checkpoint "$good" --data "$work/model" --quiet
  record "data(cross-check)" "a .meta naming another tokenizer; another run's tokenizer.model" "train 1, eval 1" \
    "$(first_error eval-model.log)" "nothing written"
}

case_tokenizer() {
  make_corpus corpus
  prepare_into data --quiet
  prepare_into other --vocab 320 --quiet
  expect_rc 0 "prepare with another vocabulary"
  run train.log 60 "${DATA_TRAIN[@]}" data.path="$work/data" train.steps=2 checkpoint.dir=c
  expect_rc 0 "a checkpoint"
  local good mine theirs
  good=$(ckpt c 2)
  mine=$(cut -f2 <(grep ^tokenizer data/manifest.tsv))
  theirs=$(cut -f2 <(grep ^tokenizer other/manifest.tsv))
  local want="checkpoint $good was trained with tokenizer $mine, but"
  refused eval-other "$want the data $work/other ($work/other/manifest.tsv, made with $work/other/tokenizer.model) is tokenizer $theirs" \
    "$bin" eval --checkpoint "$good" --data "$work/other" --quiet
  expect_text eval-other.log "--allow-tokenizer-mismatch"
  refused eval-other-np2 "$want the data $work/other" "${NP2[@]}" "$bin" eval --checkpoint "$good" --data "$work/other" --quiet
  run eval-allowed.log 60 "$bin" eval --checkpoint "$good" --data "$work/other" --allow-tokenizer-mismatch --quiet
  expect_rc 0 "eval --allow-tokenizer-mismatch"
  expect_text eval-allowed.log "warning: $want"
  expect_text eval-allowed.log "bits/token"
  record "tokenizer(eval)" "eval on data of another tokenizer (vocab 320 vs 300)" "1; 0 with --allow-tokenizer-mismatch" \
    "$(first_error eval-other.log)" "nothing written; the override printed a warning and the report"

  refused generate-other "$want the tokenizer other/tokenizer.model is tokenizer $theirs" \
    "$bin" generate --checkpoint "$good" --prompt hi --max-tokens 4 --tokenizer other/tokenizer.model --quiet
  run generate-own.log 60 "$bin" generate --checkpoint "$good" --prompt hi --max-tokens 4 --quiet
  expect_rc 0 "generate with the run's own tokenizer"
  run generate-allowed.log 60 "$bin" generate --checkpoint "$good" --prompt hi --max-tokens 4 \
    --tokenizer other/tokenizer.model --allow-tokenizer-mismatch --quiet
  expect_rc 0 "generate --allow-tokenizer-mismatch"
  expect_text generate-allowed.log "warning: $want"
  record "tokenizer(generate)" "generate --tokenizer of another prepare" "1; 0 with --allow-tokenizer-mismatch" \
    "$(first_error generate-other.log)" "nothing written; its own tokenizer still generates"
}

case_prepare() {
  make_corpus corpus
  prepare_into data --quiet
  expect_rc 0 "prepare"
  prepare_into data
  expect_rc 0 "an identical rerun"
  expect_text prepare-data.log "(0 written,"
  local before
  before=$(cd data && find . -type f | sort | xargs sha256sum)
  refused vocab "changed: --vocab 300 -> 320" "$bin" prepare --corpus corpus --out data --vocab 320 --shard-mb 0.002 --quiet
  expect_text vocab.log "Nothing was changed. Rerun with --retrain"
  refused model-type-np2 "changed: --model-type bpe -> unigram" "${NP2[@]}" "$bin" prepare --corpus corpus --out data \
    --vocab 300 --shard-mb 0.002 --model-type unigram --quiet
  [ "$(cd data && find . -type f | sort | xargs sha256sum)" = "$before" ] || fail "a refused rerun changed the directory"
  record "prepare(changed settings)" "reruns with --vocab 320, and --model-type unigram under mpirun -np 2" "1" \
    "$(first_error vocab.log)" "every file of the prepared directory (sha256)"

  local shards_before
  shards_before=$(ls data/shards | wc -l)
  run retrain.log 120 "${NP2[@]}" "$bin" prepare --corpus corpus --out data --vocab 320 --shard-mb 1 --retrain
  expect_rc 0 "prepare --retrain"
  expect_text retrain.log "(trained)"
  expect_text retrain.log "(2 written, 0 reused, $((shards_before - 4)) stale files removed)"
  [ "$(ls data/shards | tr '\n' ' ')" = "train-00000.bin train-00000.meta validation-00000.bin validation-00000.meta " ] ||
    fail "shards left behind: $(ls data/shards)"
  expect_text data/tokenizer.tsv $'vocab\t320'
  record "prepare(--retrain)" "--retrain --vocab 320 --shard-mb 1 over ${shards_before} shard files, mpirun -np 2" "0" \
    "$(grep -m1 "shards (" retrain.log)" "only the 2 planned shards; tokenizer.tsv records vocab 320"

  make_corpus corpus 7  # one more train document
  refused corpus "changed: corpus 6 documents" "$bin" prepare --corpus corpus --out data --vocab 320 --shard-mb 1 --quiet
  local hash
  hash=$(cut -f2 <(grep ^tokenizer data/manifest.tsv))
  run keep.log 120 "$bin" prepare --corpus corpus --out data --vocab 320 --shard-mb 1 --tokenizer data/tokenizer.model
  expect_rc 0 "prepare --tokenizer OUT/tokenizer.model"
  expect_text keep.log "tokenizer $hash,"
  expect_text keep.log "prepare: 9 documents"
  record "prepare(changed corpus)" "a seventh train document" "1; 0 with --tokenizer data/tokenizer.model" \
    "$(first_error corpus.log)" "the tokenizer ($hash) kept, the new document encoded"
}

# eval --task with a length no host holds: refused at once (exit 2) with the memory it needs,
# before any model is built — not grown into until the machine swaps.
case_task_lengths() {
  make_corpus corpus
  prepare_into data
  expect_rc 0 "prepare"
  run train.log 60 "${DATA_TRAIN[@]}" data.path="$work/data" train.steps=1 checkpoint.dir=c
  expect_rc 0 "a checkpoint to evaluate"
  run huge.log 30 "$bin" eval --checkpoint "$(ckpt c 1)" --task passkey --lengths 999999999999 --depths 0.5 --samples 1
  expect_rc 2 "eval --task passkey --lengths 999999999999"
  expect_text huge.log "not enough memory: this run needs"
  expect_text huge.log "1 task document of up to 999999999999 tokens (--lengths), each made whole"
  expect_text huge.log "Give shorter --lengths"
  expect_clean_error huge.log
  [ "$secs" -le 10 ] || fail "the refusal took $secs s"
  record "eval(task length beyond memory)" "--task passkey --lengths 999999999999" "$rc after $secs s" \
    "$(first_error huge.log)" "nothing allocated; the checkpoint untouched"
  # A length that fits still runs (the check adds what the documents take, nothing more).
  run fits.log 60 "$bin" eval --checkpoint "$(ckpt c 1)" --task passkey --lengths 200 --depths 0.5 --samples 1 --quiet
  expect_rc 0 "eval --task passkey --lengths 200"
}

# eval of a checkpoint a live run has just pruned (checkpoint.keep): the message says so and
# names the directory's newest; eval DIR evaluates that newest one.
case_eval_pruned() {
  make_corpus corpus
  prepare_into data
  expect_rc 0 "prepare"
  run train.log 60 "${DATA_TRAIN[@]}" data.path="$work/data" train.steps=4 checkpoint.every=1 checkpoint.keep=1 \
    checkpoint.dir=c
  expect_rc 0 "a run that keeps one checkpoint"
  run pruned.log 30 "$bin" eval --checkpoint "$(ckpt c 2)" --quiet
  expect_rc 1 "eval of a pruned checkpoint"
  # keep=1 keeps the newest and the newest confirmed one (docs/checkpoint-format.md): ckpt-3, ckpt-4.
  expect_text pruned.log "c/ckpt-00000002.h5 does not exist: its directory holds 2 other checkpoint(s), the newest c/ckpt-00000004.h5"
  expect_text pruned.log "a live run keeps only its newest checkpoint.keep checkpoints and has pruned this one"
  expect_clean_error pruned.log
  run newest.log 60 "$bin" eval c --json newest.json --quiet
  expect_rc 0 "eval of the run's directory"
  expect_text newest.log "brt-dist eval: c: its newest checkpoint, c/ckpt-00000004.h5"
  run direct.log 60 "$bin" eval "$(ckpt c 4)" --json direct.json --quiet
  [ "$(numbers newest.json)" = "$(numbers direct.json)" ] || fail "eval c differs from eval of its newest checkpoint"
  record "eval(pruned checkpoint)" "eval of ckpt-2 after the run (checkpoint.keep=1) pruned it" "1; eval c: 0" \
    "$(first_error pruned.log)" "eval c evaluated ckpt-4, the same report as eval c/ckpt-00000004.h5"
}

case "$what" in
  shards) case_shards ;;
  eval_pruned) case_eval_pruned ;;
  task_lengths) case_task_lengths ;;
  tokenizer) case_tokenizer ;;
  prepare) case_prepare ;;
  *) fail "unknown case $what" ;;
esac
echo "data ($what): every fault refused with its message, nothing lost"
