#!/usr/bin/env bash
# Ranks of one job on other numerics, on one host (docs/reliability.md "Numerics"): an mpirun app
# context gives rank 0 and rank 1 different OPENBLAS_CORETYPE values (two cores this CPU runs).
#  - train: the start-up names each rank's core, the warning names the field and ranks; the run
#    trains and its checkpoint records both (ckpt inspect); --deterministic refuses the same start
#    (exit 2) before any step or file; on the same core the line says "the same on all 2 ranks";
#  - a resume on other numerics than the checkpoint's says so; ckpt diff names the difference;
#  - eval under the same mismatch warns on stderr; doctor prints each group;
#  - a rank whose BLAS self-check fails (BRT_FAULT_INJECT=wrongblas@rank=1) refuses the start on
#    every rank (exit 2) naming the rank and what to set; nothing is written.
#   ranks_differ.sh MPIEXEC BRT_DIST
set -euo pipefail
mpiexec=$1 bin=$(realpath "$2")
src=$(cd "$(dirname "$0")/../.." && pwd)
expect() { grep -qF -- "$2" "$1" || fail "$1 lacks: $2 -- $(head -c 3000 "$1")"; }
source "$src/tests/numerics/blas_cores.sh"
read -r -a cores <<< "$(blas_cores)"
a=${cores[0]} b=${cores[1]}
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE BRT_FAULT_INJECT
host=$(hostname)
source "$src/tests/integration/common.sh"
word_corpus corpus 3 2 1 60
"$bin" prepare --corpus corpus --out data --vocab 320 --quiet > prepare.log 2>&1 || fail "prepare: $(tail -3 prepare.log)"
small=(model.layers=2 model.recurrent_layers=[1] model.d_model=32 model.heads=2 model.head_dim=16 model.d_ff=64
       model.vocab=320 model.seq_len=32 model.window=8 model.state_size=8 train.batch=1 train.eval_every=0
       train.peak_gflops=1 log.every=1 data.source=shards data.path=data optim.warmup=2 log.metrics_path=
       checkpoint.every=2 run.dir= data.share_documents=true)
train=("$bin" train "$src/configs/tiny.toml" "${small[@]}")
# mpmd CORE0 CORE1 CMD...: rank 0 under CORE0, rank 1 under CORE1.
mpmd() {
  local c0=$1 c1=$2; shift 2
  "$mpiexec" --oversubscribe -np 1 -x OPENBLAS_CORETYPE="$c0" "$@" : -np 1 -x OPENBLAS_CORETYPE="$c1" "$@"
}

mpmd "$a" "$a" "${train[@]}" train.steps=2 checkpoint.dir=same > same.log 2>&1 || fail "same cores: $(tail -5 same.log)"
expect same.log "core $a (OPENBLAS_CORETYPE=$a)"
expect same.log "(the same on all 2 ranks)"
! grep -q "numerics differ" same.log || fail "a warning with equal numerics: $(grep numerics same.log)"

mpmd "$a" "$b" "${train[@]}" train.steps=2 checkpoint.dir=differ > differ.log 2>&1 || fail "other cores: $(tail -5 differ.log)"
expect differ.log "numerics: the ranks differ"
expect differ.log "  rank 0 on $host: OpenBLAS"
expect differ.log "  rank 1 on $host: OpenBLAS"
expect differ.log "warning: the ranks' numerics differ — OpenBLAS core: $a on rank 0 on $host, $b on rank 1 on $host; GEMM probe bits: "
expect differ.log "results will differ from a one-process run in the last bits"
expect differ.log "step      2/2"
"$bin" ckpt inspect differ/ckpt-00000002.h5 > inspect.log
expect inspect.log "numerics (the ranks that trained it):"
grep -qE "^    rank 0 on $host: OpenBLAS .* core $a " inspect.log || fail "inspect: $(grep -A3 numerics inspect.log)"
grep -qE "^    rank 1 on $host: OpenBLAS .* core $b " inspect.log || fail "inspect: $(grep -A3 numerics inspect.log)"

set +e
mpmd "$a" "$b" "${train[@]}" train.steps=2 checkpoint.dir=strict --deterministic > strict.log 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "--deterministic with other numerics exited $rc: $(tail -5 strict.log)"
expect strict.log "train.deterministic=true, but the ranks' numerics differ — OpenBLAS core: $a on rank 0 on $host, $b on rank 1 on $host"
expect strict.log "Nothing was started."
! grep -q "step      1/" strict.log || fail "the refused start trained"
[ -z "$(ls strict/*.h5 2>/dev/null)" ] || fail "the refused start wrote a checkpoint"

mpmd "$a" "$a" "${train[@]}" train.steps=4 checkpoint.dir=differ > resumed.log 2>&1 || fail "resume: $(tail -5 resumed.log)"
expect resumed.log "resumed from differ/ckpt-00000002.h5 at step 2"
expect resumed.log "checkpoint warning: differ/ckpt-00000002.h5 was written on other numerics (OpenBLAS core $a / $b in the checkpoint, $a now"
expect resumed.log "bit-exact agreement with an uninterrupted run is not promised"
"$bin" ckpt diff same/ckpt-00000002.h5 differ/ckpt-00000002.h5 > diff.log || true
expect diff.log "numerics differ: OpenBLAS core $a in same/ckpt-00000002.h5, $a / $b in differ/ckpt-00000002.h5"

mpmd "$a" "$b" "$bin" eval --checkpoint same/ckpt-00000002.h5 --quiet > eval.out 2> eval.err ||
  fail "eval: $(tail -5 eval.err)"
expect eval.err "brt-dist eval: warning: the ranks' numerics differ — OpenBLAS core: $a on rank 0"
"$mpiexec" --oversubscribe -np 2 "$bin" doctor --checkpoint-dir . --min-free-gb 0 > doctor.log 2>&1 || fail "doctor: $(tail -5 doctor.log)"
expect doctor.log "numerics: ranks 0-1 on $host: OpenBLAS"

set +e
BRT_FAULT_INJECT=wrongblas@rank=1 "$mpiexec" --oversubscribe -np 2 -x BRT_FAULT_INJECT "${train[@]}" train.steps=2 \
  checkpoint.dir=wrong > wrong.log 2>&1
rc=$?
set -e
[ $rc -eq 2 ] || fail "a failed BLAS self-check exited $rc: $(tail -5 wrong.log)"
expect wrong.log "numerics: rank 1 on $host: the BLAS self-check failed: OpenBLAS core"
expect wrong.log "Set OPENBLAS_CORETYPE to another core"
expect wrong.log "Nothing was started."
[ -z "$(ls wrong/*.h5 2>/dev/null)" ] || fail "the refused start wrote a checkpoint"
echo "ranks on $a and $b: warned (train, eval), recorded (inspect, diff, resume), refused under --deterministic;"
echo "  $(grep -m1 "^warning: the ranks' numerics" differ.log | cut -c1-200)..."
echo "a failed BLAS self-check on rank 1: exit 2 on every rank, nothing written"
