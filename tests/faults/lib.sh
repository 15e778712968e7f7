# Shared by the fault suite (tests/faults, `ctest -L faults`): a small model that trains in
# about a second, the damage tools, and the assertions every case makes — the message, the exit
# status, and that nothing was lost (the previous good checkpoint's sha256 unchanged, `ckpt
# verify` OK, resume continuing bit-exactly). Each case ends with one FAULT line for the record:
#   FAULT <case> | injected: ... | exit: N | printed: ... | survived: ...
set -uo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=$(realpath "$1")
config=$(realpath "$here/../../configs/tiny.toml")
SMALL=(model.layers=2 model.recurrent_layers=[1] model.d_model=32 model.heads=2 model.head_dim=16
       model.d_ff=64 model.vocab=64 model.seq_len=32 model.window=8 model.state_size=8
       train.batch=2 train.eval_every=0 train.peak_gflops=1 log.every=1 data.source=synthetic
       optim.warmup=2 log.metrics_path= run.dir=)
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
work=$(mktemp -d /tmp/brt-faults-XXXXXX)
cd "$work"
trap 'cd /; [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.log; do [ -f "$f" ] && { echo "---- $f"; tail -40 "$f"; } >&2; done
  exit 1
}
# run LOG LIMIT_S CMD...: runs CMD with output to LOG; sets $rc and $secs; fails past LIMIT_S.
run() {
  local log=$1 limit=$2
  shift 2
  local t0=$(date +%s%N)
  timeout --kill-after=5 "$limit" "$@" > "$log" 2>&1
  rc=$?
  secs=$(( ($(date +%s%N) - t0) / 1000000000 ))
  [ $rc -ne 124 ] || [ "${ALLOW_124:-0}" = 1 ] || fail "$* ran past ${limit} s (timeout)"
}
TRAIN=("$bin" train "$config" "${SMALL[@]}")
expect_rc() { [ "$rc" -eq "$1" ] || fail "expected exit $1, got $rc ($2)"; }
expect_nonzero() { [ "$rc" -ne 0 ] || fail "expected a non-zero exit ($1)"; }
expect_text() { grep -qF -- "$2" "$1" || fail "$1 lacks: $2"; }
expect_no_text() { ! grep -qF -- "$2" "$1" || fail "$1 contains: $2"; }
# The noise no user error may end in.
expect_clean_error() {
  expect_no_text "$1" "MPI_ABORT was invoked"
  expect_no_text "$1" "leaving MPI with an exception"
  expect_no_text "$1" "infinite loop closing library"
  expect_no_text "$1" "HDF5-DIAG"
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
verify_ok() { "$bin" ckpt verify "$1" > /dev/null 2>&1 || fail "ckpt verify fails on $1"; }
ckpt() { printf '%s/ckpt-%08d.h5' "$1" "$2"; }
# Losses of the train events in a metrics file, one "step loss" per line.
losses() { grep '"event":"train"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
# same_losses REF RESUMED FROM_STEP: every loss the resumed run logged (all after FROM_STEP)
# equals, bit for bit in its printed form, the reference run's at the same step.
same_losses() {
  local bad
  bad=$(awk -v s="$3" 'NR == FNR { want[$1] = $2; next }
        { n++; if ($1 <= s || !($1 in want) || want[$1] != $2) print "step " $1 ": " $2 " vs " want[$1] }
        END { if (n == 0) print "no resumed steps" }' <(losses "$1") <(losses "$2"))
  [ -z "$bad" ] || fail "losses after step $3 differ from the uninterrupted run: $(echo "$bad" | head -3)"
}
# damage FILE data DATASET | header | config OLD NEW | truncate: one kind of damage in place.
damage() { /usr/bin/python3 "$here/damage.py" "$@" || fail "damage.py $*"; }
first_line() { grep -m1 -E "$2" "$1" | cut -c1-200; }
record() { echo "FAULT $1 | injected: $2 | exit: $3 | printed: $4 | survived: $5"; }
