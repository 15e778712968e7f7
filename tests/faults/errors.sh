#!/usr/bin/env bash
# Every command says what went wrong: the cause — file, key or rank — on
# stderr once, a non-zero exit, and none of MPI's abort banner, "leaving MPI with an exception"
# or HDF5's diagnostics; under `mpirun -np 2` too. Every flag of every command is validated and
# named in its error, with the range the help states: a usage error exits 2, any
# other error 1, as `brt-dist help` documents.
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
# usage NAME TEXT CMD...: a command-line error: the message once, exit 2. failure: exit 1.
usage() { check "$@"; expect_rc 2 "$1 (a usage error)"; }
failure() { check "$@"; expect_rc 1 "$1"; }
NP2=("${MPIRUN[@]}" -np 2)
usage eval_no_args "brt-dist eval: error: --checkpoint FILE is required" "$bin" eval
# A setting this machine cannot run is a usage error too, on one process and under mpirun.
usage train_bf16_cpu "train.precision = 'bf16' needs train.device = \"cuda\"" "${TRAIN[@]}" train.steps=1 --precision bf16
usage train_bf16_cpu_np2 "train.precision = 'bf16' needs train.device = \"cuda\"" "${NP2[@]}" "${TRAIN[@]}" train.steps=1 \
  --precision bf16
failure eval_missing "brt-dist eval: error: checkpoint /nonexistent.h5 does not exist" "$bin" eval --checkpoint /nonexistent.h5
failure eval_missing_np2 "brt-dist eval: error: checkpoint /nonexistent.h5 does not exist" "${NP2[@]}" "$bin" eval --checkpoint /nonexistent.h5
failure eval_no_data "no-such-data" "$bin" eval --checkpoint "$good" data.path="$work/no-such-data"
usage eval_bad_key "model.widht: unknown key" "$bin" eval --checkpoint "$good" model.widht=3
usage generate_no_args "brt-dist generate: error: --checkpoint FILE is required" "$bin" generate
failure generate_no_tokenizer "runs/kjv/data/tokenizer.model" "$bin" generate --checkpoint "$good" --prompt hi
failure generate_missing_tokenizer "no-such.model" "$bin" generate --checkpoint "$good" --prompt hi --tokenizer no-such.model
usage prepare_no_args "brt-dist prepare: error: --out DIR is required" "$bin" prepare
failure prepare_missing_corpus "no-such-corpus" "$bin" prepare --corpus no-such-corpus --out out
failure prepare_missing_corpus_np2 "no-such-corpus" "${NP2[@]}" "$bin" prepare --corpus no-such-corpus --out out2
failure prepare_bad_file "bad/train/broken.txt" "$bin" prepare --corpus bad --out out3 --vocab 64
usage train_bad_key "train.stpes: unknown key (did you mean train.steps?)" "$bin" train "$config" train.stpes=3
usage train_bad_key_np2 "train.stpes: unknown key (did you mean train.steps?)" "${NP2[@]}" "$bin" train "$config" train.stpes=3
failure ckpt_verify_missing "DAMAGED: checkpoint /nonexistent.h5 does not exist" "$bin" ckpt verify /nonexistent.h5

# Every flag validated before any work, named in its error with the help's range (exit 2). The
# generate cases give a good checkpoint and no tokenizer: the flag is refused before either is read.
G=("$bin" generate --checkpoint "$good" --prompt hi --tokenizer no-such.model)
usage generate_top_p "brt-dist generate: error: --top-p must be in (0, 1], got 1.5" "${G[@]}" --top-p 1.5
usage generate_max_tokens_1e3 "brt-dist generate: error: --max-tokens needs a whole number, got '1e3'" "${G[@]}" --max-tokens 1e3
usage generate_max_tokens_negative "--max-tokens must be in [1, 2147483647], got -3" "${G[@]}" --max-tokens -3
usage generate_temperature "--temperature needs a number, got 'hot'" "${G[@]}" --temperature hot
usage generate_top_k "--top-k must be in [0, 2147483647], got -1" "${G[@]}" --top-k -1
usage generate_seed "--seed needs a whole number in [0, 2^64), got '-1'" "${G[@]}" --seed -1
usage generate_np2 "--top-p must be in (0, 1], got 2" "${NP2[@]}" "${G[@]}" --top-p 2
usage prepare_shard_mb "brt-dist prepare: error: --shard-mb must be > 0, got 0" "$bin" prepare --corpus corpus --out out4 --shard-mb 0
usage prepare_vocab "--vocab needs a whole number, got '1e3'" "$bin" prepare --corpus corpus --out out4 --vocab 1e3
usage prepare_timeout "--timeout-s must be >= 1, got 0" "$bin" prepare --corpus corpus --out out4 --timeout-s 0
[ -z "$(ls -A out4 2> /dev/null)" ] || fail "prepare with a bad flag wrote $(ls -A out4)"
usage prepare_bad_policy "--on-bad-document must be one of fail, skip, skip_with_warning, got 'ignore'" \
  "$bin" prepare --corpus corpus --out out4 --on-bad-document ignore
usage train_steps_flag "train.steps: expected an integer, got floating-point 1000.0 (given as --steps)" \
  "$bin" train "$config" --steps 1e3
usage train_unknown_flag "command line: unknown flag --stpes" "$bin" train "$config" --stpes 3
usage eval_split "--split must be one of train, validation, test, got 'valid'" "$bin" eval --checkpoint "$good" --split valid
usage ckpt_rtol "brt-dist ckpt: error: --rtol must be >= 0, got -1" "$bin" ckpt diff "$good" "$good" --rtol -1
usage ckpt_extra "unexpected argument 'extra'" "$bin" ckpt verify "$good" extra
usage plan_global_batch "--global-batch needs a whole number, got '2.5'" "$bin" plan "$config" --cluster x.toml --global-batch 2.5
usage doctor_min_free "--min-free-gb must be >= 0, got -1" "$bin" doctor --min-free-gb -1
usage help_unknown "unknown command 'trian'" "$bin" help trian
usage unknown_command "unknown command 'trian'" "$bin" trian
# Weak answers made precise: train.steps=0 names train.steps (not optim.total_steps); an empty
# config file is an error naming it (it would train the built-in defaults).
usage train_steps_zero "command line: train.steps: must be >= 1" "${TRAIN[@]}" train.steps=0
expect_no_text train_steps_zero.log "optim.total_steps: the cosine"
: > empty.toml
failure train_empty_config "empty.toml: the config file sets no keys (it is empty)" "$bin" train empty.toml
printf '# nothing but a comment\n' > comment.toml
failure config_show_empty "comment.toml: the config file sets no keys" "$bin" config show comment.toml
# Resume with another model.window: the mismatch names model.window, not the stream count.
sha_good=$(sha "$good")
failure resume_window "the model differs: model.window = 8 in the checkpoint, 16 in this run" \
  "${TRAIN[@]}" train.steps=4 checkpoint.dir=c model.window=16
expect_no_text resume_window.log "the global stream count"
[ "$(sha "$good")" = "$sha_good" ] || fail "the checkpoint changed"
verify_ok "$good"
echo "errors: every command named the cause; every bad flag named with its range, exit 2"
