#!/usr/bin/env bash
# The default thread count per rank: cores in the rank's affinity mask / the
# node's ranks sharing them, at least one; train.threads and OMP_NUM_THREADS override; idle
# threads wait passively. Checked under mpirun -np 1, 2 and 4 with and without core binding.
set -uo pipefail
bin=$(realpath "$1")
cd "$(dirname "$0")/../.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset OMP_NUM_THREADS OMP_WAIT_POLICY
cores=$(nproc)
args=(configs/tiny.toml data.source=synthetic train.steps=1 train.eval_every=0 log.metrics_path= run.dir= train.peak_gflops=1
      model.layers=2 model.recurrent_layers=[1] model.d_model=32 model.heads=2 model.head_dim=16 model.d_ff=64
      model.vocab=64 model.seq_len=32 model.window=8 model.state_size=8)
fail() { echo "FAIL: $*" >&2; exit 1; }
threads_of() { "$@" "${args[@]}" 2>&1 | sed -nE 's/^threads: ([0-9]+) per rank.*/\1/p' | head -1; }
line_of() { "$@" "${args[@]}" 2>&1 | grep -m1 '^threads:'; }
max1() { [ "$1" -lt 1 ] && echo 1 || echo "$1"; }
check() {  # check EXPECTED DESCRIPTION CMD...
  local want=$1 what=$2
  shift 2
  local got
  got=$(threads_of "$@")
  [ "$got" = "$want" ] || fail "$what: $got threads per rank, expected $want ($(line_of "$@"))"
  echo "$what: $got thread(s) per rank"
}
check "$cores" "one process" "$bin" train
for np in 1 2 4; do
  check "$(max1 $((cores / np)))" "mpirun -np $np --bind-to none" mpirun --oversubscribe --bind-to none -np "$np" "$bin" train
done
check 1 "mpirun -np 2 --bind-to core" mpirun --oversubscribe --bind-to core -np 2 "$bin" train
check 3 "train.threads=3" "$bin" train train.threads=3
OMP_NUM_THREADS=1 check 1 "OMP_NUM_THREADS=1" "$bin" train
line=$(line_of "$bin" train)
grep -q "idle threads wait PASSIVE" <<< "$line" || fail "waiting is not passive by default: $line"
line=$(OMP_WAIT_POLICY=ACTIVE line_of "$bin" train)
grep -q "idle threads wait ACTIVE" <<< "$line" || fail "OMP_WAIT_POLICY not respected: $line"
echo "thread_choice: all cases passed"
