#!/bin/bash
# `brt-dist export --hf`'s command line (docs/huggingface.md): --help; a usage error (exit 2)
# for a missing --hf, an unknown flag, key=value, and a DIR that exists and is not empty (named,
# untouched) unless --force; a missing checkpoint named (exit 1, nothing created); a run on
# synthetic data exports without a tokenizer, saying so; a second export into the same DIR is
# refused without --force and replaces the files with it.
# usage: hf_export_failures.sh BRT_DIST SOURCE_DIR
set -u
BIN=$1
SRC=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL: $*"; exit 1; }
# expect STATUS PATTERN CMD...: CMD exits with STATUS and its output matches PATTERN.
expect() {
  local status=$1 pattern=$2
  shift 2
  "$@" >"$WORK/out" 2>&1
  local got=$?
  [ "$got" = "$status" ] || fail "$* exited $got, not $status: $(cat "$WORK/out")"
  grep -q -- "$pattern" "$WORK/out" || fail "$*: no '$pattern' in: $(cat "$WORK/out")"
}

expect 0 "--hf DIR" "$BIN" export --help
expect 0 "brt-dist export --hf" "$BIN" help export
expect 0 "export    a checkpoint as a Hugging Face folder" "$BIN" --help
expect 2 "\-\-hf DIR is required" "$BIN" export "$WORK/none.h5"
expect 2 "unknown" "$BIN" export --hf "$WORK/x" "$WORK/none.h5" --bogus 1
expect 2 "key=value" "$BIN" export --hf "$WORK/x" "$WORK/none.h5" model.layers=2
mkdir "$WORK/full" && echo keep >"$WORK/full/mine.txt"
expect 2 "$WORK/full is not empty" "$BIN" export --hf "$WORK/full" "$WORK/none.h5"
[ "$(cat "$WORK/full/mine.txt")" = keep ] && [ "$(ls "$WORK/full")" = mine.txt ] || fail "a refused export touched DIR"
expect 1 "$WORK/none.h5" "$BIN" export --hf "$WORK/new" "$WORK/none.h5"
[ ! -e "$WORK/new" ] || fail "a failed export created DIR"
expect 1 "$WORK/none.h5" "$BIN" export --hf "$WORK/full" "$WORK/none.h5" --force
mkdir "$WORK/empty-ckpt"
expect 1 "no committed checkpoint" "$BIN" export --hf "$WORK/new" "$WORK/empty-ckpt"

# A real (synthetic-data) checkpoint: exported, refused again without --force, replaced with it.
"$BIN" train "$SRC/configs/tiny.toml" model.layers=2 model.d_model=32 model.heads=2 model.head_dim=16 \
  model.d_ff=64 model.vocab=64 model.seq_len=32 model.window=16 train.steps=2 train.eval_every=0 \
  data.source=synthetic log.metrics_path= checkpoint.async=false "checkpoint.dir=$WORK/ckpt" \
  train.peak_gflops=1 >"$WORK/train.log" 2>&1 || fail "training: $(tail -5 "$WORK/train.log")"
expect 0 "no tokenizer exported" "$BIN" export --hf "$WORK/hf" "$WORK/ckpt"
for f in config.json model.safetensors configuration_brt.py modeling_brt.py brt_model.py brt_config_schema.py; do
  [ -s "$WORK/hf/$f" ] || fail "the export has no $f"
done
[ ! -e "$WORK/hf/tokenizer.model" ] || fail "a synthetic run exported a tokenizer"
grep -q "^EMBEDDED_SCHEMA = r'''" "$WORK/hf/brt_config_schema.py" || fail "the schema is not embedded"
if grep -E "^\s*from \.\.|^\s*from \.(config|torch|layers|blocks|model)\b" "$WORK/hf/"*.py; then
  fail "an import is not flattened"
fi
expect 2 "$WORK/hf is not empty" "$BIN" export --hf "$WORK/hf" "$WORK/ckpt"
echo stale >"$WORK/hf/modeling_brt.py"
expect 0 "$WORK/hf" "$BIN" export --hf "$WORK/hf" "$WORK/ckpt" --force
grep -q "class BrtForCausalLM" "$WORK/hf/modeling_brt.py" || fail "--force did not replace modeling_brt.py"
echo "hf export command line: all checks passed"
