#!/usr/bin/env bash
# Runs kernels/cuda's code on the CPU through the strict CUDA emulator (stubs/; no GPU needed)
# and compares it with the CPU backend: a development check of indexing, arithmetic, stream
# order and CUDA's rules before a GPU is available (docs/gpu.md "The host emulator").
# Usage: tests/cuda_emulation/run.sh <build dir with libbrt_kernels.a, libbrt_core.a,
#   libbrt_parallel.a> [check ...]   (default: all)
# Checks: strict (the emulator's own rules), kernels, tc, fft, optimizer, training, launches, tp, cp, graph,
#   xent_graph, gputest (tests/kernels/cuda GPU test files, GTest, against the emulated backend) and
#   nccltest (tests/kernels/cuda/nccl_communicator_main.cpp), nccl_stall (a host wait behind a
#   collective that never completes, or an NCCL error: stall.cpp); tp, nccltest and nccl_stall
#   run under mpirun -np 2.
#   CI runs tc, strict + gputest, a micro graph case and xent_graph (tests/kernels/CMakeLists.txt).
# Environment: EMU_SEED (every shuffled choice; printed), EMU_SEEDS ("1 2 3": each check once
#   per seed), EMU_REPO (the source tree to emulate, default this one: kernels/cuda, tests/kernels/cuda,
#   launch/train/step_graphs.cpp and parallel/nccl_communicator.cpp come from it, for before/after
#   runs against an old checkout with its own build dir), EMU_TRAINING_CASE, EMU_TP_CASE,
#   EMU_GRAPH_VARIANTS, EMU_GPU_TESTS ("file[:gtest filter] ..." of tests/kernels/cuda),
#   EMU_PREBUILT=DIR (the emulated sources, the backend's objects and the checks' binaries are
#   kept in DIR and taken from it when there; without it they are made in a temporary folder and
#   removed), EMU_COMPILE_ONLY=1 (with EMU_PREBUILT: DIR emptied, then everything the named
#   checks need compiled into it, two compiles at a time, and nothing run). CI compiles its checks
#   once this way (the cuda_emulation_build test) and each of its tests runs from DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=${EMU_REPO:-$(cd "$here/../.." && pwd)}
build=${1:?usage: run.sh <build dir> [strict] [kernels] [tc] [fft] [optimizer] [training] [launches] [tp] [cp] [graph] [xent_graph] [gputest] [nccltest] [nccl_stall]}
shift
checks=("$@")
[ ${#checks[@]} -eq 0 ] && checks=(strict kernels tc fft optimizer training launches tp cp graph xent_graph gputest nccltest nccl_stall)
wants() { local c; for c in "${checks[@]}"; do [ "$c" = "$1" ] && return 0; done; return 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# $out: where the emulated sources, objects and binaries are made (or found, with EMU_PREBUILT);
# $work: this run's own files (logs), never shared.
out=${EMU_PREBUILT:-$work}
compile_only=${EMU_COMPILE_ONLY:-0}
if [ "$compile_only" = 1 ]; then
  [ -n "${EMU_PREBUILT:-}" ] || { echo "run.sh: EMU_COMPILE_ONLY=1 needs EMU_PREBUILT=DIR" >&2; exit 2; }
  rm -rf "$out"
fi
mkdir -p "$out"
if [ ! -d "$out/src" ]; then
  python3 "$here/transform.py" "$repo" "$out/src.tmp" "$here/strict_selftest.cu"
  mv "$out/src.tmp" "$out/src"
fi
flags=(-std=c++20 -O1 -w -I"$here/stubs" -I"$out/src" -I"$repo")
mpi_flags=(-DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 $(pkg-config --cflags ompi-c))
libs=("$build/kernels/libbrt_kernels.a" -fopenmp $(pkg-config --libs openblas fftw3 fftw3f))
core=("$build/core/libbrt_core.a" "$build/parallel/libbrt_parallel.a")
mpi_libs=($(pkg-config --libs ompi-c))
k=$out/src/kernels/cuda
# ksrc NAME...: the emulated kernels/cuda sources NAME.cpp, found in whichever room holds them
# (by name, so an EMU_REPO checkout of another layout works too).
ksrc() {
  local name path
  for name; do
    path=$(find "$k" -name "$name.cpp" | head -n 1)
    [ -n "$path" ] || { echo "run.sh: no $name.cpp under $k" >&2; return 1; }
    echo "$path"
  done
}
# build BINARY COMMAND...: makes $out/BINARY with COMMAND (its -o included) unless it is already
# there; under EMU_COMPILE_ONLY=1 in the background, two at a time (build_wait collects them).
build_pids=()
declare -A build_started
build() {
  local binary=$1
  shift
  [ -x "$out/$binary" ] || [ -n "${build_started[$binary]:-}" ] && return 0
  build_started[$binary]=1
  if [ "$compile_only" = 1 ]; then
    while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n || true; done
    "$@" &
    build_pids+=("$!:$binary")
  else
    "$@"
  fi
}
build_wait() {
  local entry rc=0
  for entry in "${build_pids[@]}"; do
    wait "${entry%%:*}" || { echo "run.sh: compiling ${entry#*:} failed" >&2; rc=1; }
  done
  return $rc
}
# timed LABEL COMMAND...: runs a check and prints its time, passing or not; once per seed of
# EMU_SEEDS ("1 2 3") when that is set.
timed() {
  local label=$1 rc=0 seed t0
  shift
  [ "$compile_only" = 1 ] && return 0
  for seed in ${EMU_SEEDS:-default}; do
    t0=$SECONDS
    if [ "$seed" = default ]; then "$@" || rc=$?; else EMU_SEED=$seed "$@" || rc=$?; fi
    echo "[run.sh] $label$([ "$seed" = default ] || echo " (EMU_SEED=$seed)"): $((SECONDS - t0)) s"
  done
  return $rc
}

# The whole CudaBackend (every .cpp/.cu of kernels/cuda but the GEMM-peak timer and the library
# version queries of the numerics fingerprint, which the emulator has no versions for), compiled
# once into objects (two at a time) for the checks that use the backend class.
backend_objects() {
  [ -d "$out/obj" ] && return
  mkdir -p "$out/obj.tmp"
  find "$k" -name '*.cpp' | grep -vE '/(gemm_peak|device_versions)\.cpp$' |
    xargs -P 2 -I{} sh -c 'g++ "$@" -c {} -o "'"$out"'/obj.tmp/$(basename {} .cpp).o"' _ "${flags[@]}" "${mpi_flags[@]}"
  mv "$out/obj.tmp" "$out/obj"
}
objects() { ls "$out"/obj/*.o; }

if wants strict; then
  # The emulator's own rules: each one makes the call or launch it should fail fail.
  build "strict" g++ "${flags[@]}" "$out/src/strict_selftest.cpp" $(ksrc device_arena) "${libs[@]}" -o "$out/strict"
  timed strict "$out/strict"
fi
if wants kernels; then
  build "kernels" g++ "${flags[@]}" "$here/kernels.cpp" \
    $(ksrc attention_reduce window_attention attention_tc cross_attention_tc cross_attention xent xent_split \
      norms gates elementwise embedding implicit_filter) \
    $(ksrc device_arena) "${libs[@]}" -o "$out/kernels"
  timed kernels "$out/kernels"
fi
if wants tc; then
  # The bf16 tensor-core window attention and the cuBLAS calls it makes (attention_tc.cpp).
  build "attention_tc" g++ "${flags[@]}" "$here/attention_tc.cpp" $(ksrc attention_reduce window_attention attention_tc cross_attention_tc) \
    $(ksrc device_arena) "${libs[@]}" -o "$out/attention_tc"
  timed tc "$out/attention_tc"
fi
if wants fft; then
  build "fft_conv" g++ "${flags[@]}" "$here/fft_conv.cpp" $(ksrc fft_conv fft_conv_kernels) $(ksrc device_arena) \
    "${libs[@]}" -o "$out/fft_conv"
  timed fft "$out/fft_conv"
fi
if wants optimizer; then
  build "optimizer" g++ "${flags[@]}" "$here/optimizer.cpp" $(ksrc optimizer) "${core[@]}" "${libs[@]}" -o "$out/optimizer"
  timed optimizer "$out/optimizer"
fi
if wants training; then
  # The whole CudaBackend class under core's Model and optimizers: a micro model of each
  # variant trained on both backends.
  backend_objects
  build "training" g++ "${flags[@]}" "$here/training.cpp" $(objects) "${core[@]}" "${libs[@]}" "${mpi_libs[@]}" -o "$out/training"
  timed training "$out/training" ${EMU_TRAINING_CASE:-}
fi
if wants launches; then
  # The planner's launches per backend call (kernels/cuda_launches.h) against the emulator's
  # launch counts of one step of five micro variants, fp32 and bf16 (launches.cpp).
  backend_objects
  build "launches" g++ "${flags[@]}" "$here/launches.cpp" $(objects) "${core[@]}" "${libs[@]}" "${mpi_libs[@]}" -o "$out/launches"
  timed launches "$out/launches"
fi
if wants tp; then
  # Tensor parallelism (TP = 2, two MPI ranks) on the emulated CudaBackend: the layers'
  # collectives through parallel/nccl_communicator.cpp, built as brt_parallel_nccl builds it,
  # over the NCCL emulation stubs/nccl.h (MPI collectives in stream order), against the CPU
  # backend's TP run.
  backend_objects
  build "training_tp" g++ "${flags[@]}" "${mpi_flags[@]}" "$here/training_tp.cpp" "$repo/parallel/nccl_communicator.cpp" $(objects) \
    "${core[@]}" "${libs[@]}" "${mpi_libs[@]}" -o "$out/training_tp"
  timed tp mpirun --allow-run-as-root --oversubscribe -np 2 "$out/training_tp" ${EMU_TP_CASE:-}
fi
if wants cp; then
  # Context parallelism (CP = 2, two MPI ranks) on the emulated CudaBackend: the halo shifts and
  # the S4D summaries' all-gathers through parallel/nccl_communicator.cpp over the NCCL emulation
  # (grouped ncclSend/ncclRecv as MPI point-to-point), against the CPU backend's CP run.
  backend_objects
  build "training_cp" g++ "${flags[@]}" "${mpi_flags[@]}" "$here/training_cp.cpp" "$repo/parallel/nccl_communicator.cpp" $(objects) \
    "${core[@]}" "${libs[@]}" "${mpi_libs[@]}" -o "$out/training_cp"
  timed cp mpirun --allow-run-as-root --oversubscribe -np 2 "$out/training_cp" ${EMU_CP_CASE:-}
fi
graph_binary() {
  backend_objects
  # launch/train/step_graphs.cpp (launch/step_graphs.cpp in checkouts from before launch/'s rooms).
  local step_graphs=$repo/launch/train/step_graphs.cpp
  [ -f "$step_graphs" ] || step_graphs=$repo/launch/step_graphs.cpp
  build "graph" g++ "${flags[@]}" -DBRT_WITH_CUDA=1 "$here/graph.cpp" "$step_graphs" $(objects) \
    "${core[@]}" "${libs[@]}" "${mpi_libs[@]}" -o "$out/graph"
}
if wants graph; then
  # CUDA graphs: launch/train/step_graphs.cpp's captured and replayed training steps against eager
  # ones (bit-identical, masks varying), a failing capture, the launch profile (graph.cpp).
  graph_binary
  timed graph "$out/graph" ${EMU_GRAPH_VARIANTS:-}
fi
if wants xent_graph; then
  # A step replayed from a graph with a target outside the vocabulary: it must fail as the
  # eager step does (graph.cpp --bad-target).
  graph_binary
  timed xent_graph "$out/graph" --bad-target
fi
if wants nccltest; then
  # The NCCL communicator's GPU test (tests/kernels/cuda/nccl_communicator_main.cpp) under mpirun -np 2,
  # over the NCCL emulation, each rank with its own emulated device.
  build "nccl_test" g++ "${flags[@]}" "${mpi_flags[@]}" "$repo/tests/kernels/cuda/nccl_communicator_main.cpp" "$repo/parallel/nccl_communicator.cpp" \
    "${core[@]}" "${libs[@]}" "${mpi_libs[@]}" $(pkg-config --libs gtest 2>/dev/null || echo -lgtest -pthread) -o "$out/nccl_test"
  timed nccltest mpirun --allow-run-as-root --oversubscribe -np 2 -x EMU_DEVICES=2 "$out/nccl_test"
  # Again with every collective answering ncclInProgress before it is on its stream (stubs/nccl.h):
  # the communicator must settle it before recording the completion event its Request waits on.
  timed nccltest_in_progress mpirun --allow-run-as-root --oversubscribe -np 2 -x EMU_DEVICES=2 -x EMU_NCCL_IN_PROGRESS=1 \
    "$out/nccl_test"
fi
if wants nccl_stall; then
  # A host waiting on the backend's stream behind a collective that never completes ends the
  # job with the timeout report (exit 124) instead of hanging; an NCCL error is thrown naming
  # the collective (stall.cpp).
  backend_objects
  build "stall" g++ "${flags[@]}" "${mpi_flags[@]}" "$here/stall.cpp" "$repo/parallel/nccl_communicator.cpp" $(objects) \
    "${core[@]}" "${libs[@]}" "${mpi_libs[@]}" -o "$out/stall"
  stall_case() {  # stall_case MODE KNOB WANT_RC WANT_TEXT
    local rc=0 t0=$SECONDS
    timeout -k 5 60 mpirun --allow-run-as-root --oversubscribe -np 2 -x EMU_DEVICES=2 -x "$2=1" \
      "$out/stall" "$1" >"$work/stall-$1.log" 2>&1 || rc=$?
    echo "[run.sh] nccl_stall $1: exit $rc after $((SECONDS - t0)) s; $(grep -m1 -E "$4" "$work/stall-$1.log" | cut -c1-240)"
    if [ "$rc" != "$3" ] || ! grep -qE "$4" "$work/stall-$1.log"; then
      echo "nccl_stall $1: expected exit $3 and /$4/" >&2
      cat "$work/stall-$1.log" >&2
      return 1
    fi
  }
  timed nccl_stall stall_case stall EMU_NCCL_STALL_AT 124 "collective timeout on world rank [01] .*all_reduce\\(sum\\).* still incomplete"
  timed nccl_stall stall_case error EMU_NCCL_ASYNC_ERROR_AT 3 "CommError: all_reduce\\(sum\\).*NCCL: remote process exited.*the check's read-back"
fi
if wants gputest; then
  # GPU tests of tests/kernels/cuda (GTest) run against the emulated CudaBackend, smallest shapes.
  backend_objects
  status=0
  for spec in ${EMU_GPU_TESTS:-test_norms_gates_xent "test_attention:CudaWindowAttention*" test_event_timer optimizer_gpu_test test_s4d_state_passing "test_gemm_elementwise:CudaGemm*:CudaElementwise*"}; do
    file=${spec%%:*}
    filter=${spec#*:}; [ "$filter" = "$spec" ] && filter='*'
    extra=()  # the attention tests' float64 reference (tests/kernels/cuda/CMakeLists.txt links it too)
    [ -f "$repo/tests/kernels/reference.cpp" ] && extra+=("$repo/tests/kernels/reference.cpp")
    build "$file" g++ "${flags[@]}" "$repo/tests/kernels/cuda/$file.cpp" "$repo/tests/kernels/cuda/cuda_test_util.cpp" "${extra[@]}" $(objects) "${core[@]}" \
      "${libs[@]}" "${mpi_libs[@]}" $(pkg-config --libs gtest_main 2>/dev/null || echo -lgtest_main -lgtest -pthread) -o "$out/$file"
    timed "$file" env BRT_REQUIRE_GPU=1 BRT_SMALL_SHAPES=1 "$out/$file" --gtest_filter="$filter" || status=1
  done
  [ $status -eq 0 ]
fi
if [ "$compile_only" = 1 ]; then
  build_wait
  echo "[run.sh] compiled into $out: $(ls "$out" | grep -vE '^(src|obj)$' | tr '\n' ' ')"
fi
