#!/usr/bin/env bash
# Runs kernels/cuda's kernel code on the CPU through a small CUDA emulator (no GPU needed) and
# compares it with the CPU backend: a development check of indexing and arithmetic before a
# GPU is available (docs/gpu.md). Only check `tc` (the bf16 tensor-core attention, about two
# minutes) is part of CI (ctest cuda_emulated_tensor_core_attention); the others take longer
# (each emulated block starts hundreds of threads). Usage: tools/cuda_emulation/run.sh <build dir with libbrt_kernels.a and
# libbrt_core.a> (the optimizer check runs core's optimizers on the emulated kernels; tp runs
# under mpirun -np 2).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:?usage: run.sh <build dir> [kernels] [tc] [fft] [optimizer] [training] [tp] [graph]  (default: all)}
shift
checks=("$@")
[ ${#checks[@]} -eq 0 ] && checks=(kernels tc fft optimizer training tp graph)
wants() { local c; for c in "${checks[@]}"; do [ "$c" = "$1" ] && return 0; done; return 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$here/transform.py" "$repo" "$work/src"
flags=(-std=c++20 -O1 -w -I"$here/stubs" -I"$work/src" -I"$repo")
libs=("$build/kernels/libbrt_kernels.a" -fopenmp $(pkg-config --libs openblas fftw3 fftw3f))
k=$work/src/kernels/cuda
if wants kernels; then
  g++ "${flags[@]}" "$here/kernels.cpp" \
    "$k"/{attention_reduce,window_attention,attention_tc,cross_attention_tc,cross_attention,xent,xent_split,norms,gates,elementwise,embedding,implicit_filter}.cpp \
    "$k/device_arena.cpp" "${libs[@]}" -o "$work/kernels"
  "$work/kernels"
fi
if wants tc; then
  # The bf16 tensor-core window attention and the cuBLAS calls it makes (attention_tc.cpp).
  g++ "${flags[@]}" "$here/attention_tc.cpp" "$k"/{attention_reduce,window_attention,attention_tc,cross_attention_tc}.cpp \
    "$k/device_arena.cpp" "${libs[@]}" -o "$work/attention_tc"
  "$work/attention_tc"
fi
if wants fft; then
  g++ "${flags[@]}" "$here/fft_conv.cpp" "$k"/{fft_conv,fft_conv_kernels}.cpp "$k/device_arena.cpp" \
    "${libs[@]}" -o "$work/fft_conv"
  "$work/fft_conv"
fi
if wants optimizer; then
  g++ "${flags[@]}" "$here/optimizer.cpp" "$k/optimizer.cpp" "$build/core/libbrt_core.a" \
    "$build/parallel/libbrt_parallel.a" "${libs[@]}" -o "$work/optimizer"
  "$work/optimizer"
fi
if wants training; then
  # The whole CudaBackend class (every .cpp/.cu of kernels/cuda but the GEMM-peak timer) under
  # core's Model and optimizers: a micro model of each variant trained on both backends.
  sources=()
  for f in "$k"/*.cpp; do [ "$(basename "$f")" = gemm_peak.cpp ] || sources+=("$f"); done
  g++ "${flags[@]}" "$here/training.cpp" "${sources[@]}" "$build/core/libbrt_core.a" \
    "$build/parallel/libbrt_parallel.a" "${libs[@]}" $(pkg-config --libs ompi-c) -o "$work/training"
  "$work/training" ${EMU_TRAINING_CASE:-}
fi
if wants tp; then
  # Tensor parallelism (TP = 2, two MPI ranks) on the emulated CudaBackend: the layers'
  # collectives through parallel/nccl_communicator.cpp, built as brt_parallel_nccl builds it,
  # over the NCCL emulation stubs/nccl.h (MPI collectives), against the CPU backend's TP run.
  sources=()
  for f in "$k"/*.cpp; do [ "$(basename "$f")" = gemm_peak.cpp ] || sources+=("$f"); done
  g++ "${flags[@]}" -DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1 $(pkg-config --cflags ompi-c) \
    "$here/training_tp.cpp" "$repo/parallel/nccl_communicator.cpp" "${sources[@]}" \
    "$build/core/libbrt_core.a" "$build/parallel/libbrt_parallel.a" "${libs[@]}" \
    $(pkg-config --libs ompi-c) -o "$work/training_tp"
  mpirun --allow-run-as-root --oversubscribe -np 2 "$work/training_tp" ${EMU_TP_CASE:-}
fi
if wants graph; then
  # CUDA graphs: launch/step_graphs.cpp's captured and replayed training steps against eager
  # ones (bit-identical), a failing capture, and the launch profile of a step (graph.cpp).
  sources=()
  for f in "$k"/*.cpp; do [ "$(basename "$f")" = gemm_peak.cpp ] || sources+=("$f"); done
  g++ "${flags[@]}" -DBRT_WITH_CUDA=1 "$here/graph.cpp" "$repo/launch/step_graphs.cpp" "${sources[@]}" \
    "$build/core/libbrt_core.a" "$build/parallel/libbrt_parallel.a" "${libs[@]}" \
    $(pkg-config --libs ompi-c) -o "$work/graph"
  "$work/graph" ${EMU_GRAPH_VARIANTS:-}
fi
