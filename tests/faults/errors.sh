#!/usr/bin/env bash
# Every command says what went wrong (issue 14 item 4): the cause — file, key or rank — on
# stderr once, a non-zero exit, and none of MPI's abort banner, "leaving MPI with an exception"
# or HDF5's diagnostics; under `mpirun -np 2` too.
source "$(dirname "$0")/lib.sh"
run good.log 60 "${TRAIN[@]}" train.steps=2 checkpoint.dir=c
expect_rc 0 "a good checkpoint to work with"
good=$(ckpt c 2)
mkdir -p corpus/train bad/train
printf 'In the beginning.\n' > corpus/train/a.txt
printf 'ok\n\xff\xfe\xfa broken\n' > bad/train/broken.txt
check() {  # check NAME EXPECTED_TEXT CMD...
  local name=$1 want=$2
  shift 2
  run "$name.log" 60 "$@"
  expect_nonzero "$name"
  expect_text "$name.log" "$want"
  expect_clean_error "$name.log"
  [ "$(grep -cF -- "$want" "$name.log")" -eq 1 ] || fail "$name: the message is printed $(grep -cF -- "$want" "$name.log") times"
  record "error($name)" "$*" "$rc" "$(grep -m1 -F -- "$want" "$name.log" | cut -c1-200)" "nothing written"
}
NP2=("${MPIRUN[@]}" -np 2)
check eval_no_args "brt-dist eval: error: --checkpoint FILE is required" "$bin" eval
check eval_missing "brt-dist eval: error: checkpoint /nonexistent.h5 does not exist" "$bin" eval --checkpoint /nonexistent.h5
check eval_missing_np2 "brt-dist eval: error: checkpoint /nonexistent.h5 does not exist" "${NP2[@]}" "$bin" eval --checkpoint /nonexistent.h5
check eval_no_data "no-such-data" "$bin" eval --checkpoint "$good" data.path="$work/no-such-data"
check eval_bad_key "model.widht: unknown key" "$bin" eval --checkpoint "$good" model.widht=3
check generate_no_args "brt-dist generate: error: --checkpoint FILE is required" "$bin" generate
check generate_no_tokenizer "runs/kjv/data/tokenizer.model" "$bin" generate --checkpoint "$good" --prompt hi
check generate_missing_tokenizer "no-such.model" "$bin" generate --checkpoint "$good" --prompt hi --tokenizer no-such.model
check prepare_no_args "brt-dist prepare: error: prepare: --out DIR is required" "$bin" prepare
check prepare_missing_corpus "no-such-corpus" "$bin" prepare --corpus no-such-corpus --out out
check prepare_missing_corpus_np2 "no-such-corpus" "${NP2[@]}" "$bin" prepare --corpus no-such-corpus --out out2
check prepare_bad_file "bad/train/broken.txt" "$bin" prepare --corpus bad --out out3 --vocab 64
check train_bad_key "train.stpes: unknown key (did you mean train.steps?)" "$bin" train "$config" train.stpes=3
check train_bad_key_np2 "train.stpes: unknown key (did you mean train.steps?)" "${NP2[@]}" "$bin" train "$config" train.stpes=3
check ckpt_verify_missing "DAMAGED: checkpoint /nonexistent.h5 does not exist" "$bin" ckpt verify /nonexistent.h5
echo "errors: every command named the cause"
