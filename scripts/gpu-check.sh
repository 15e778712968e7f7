#!/usr/bin/env bash
# The ONE script for the GPU machine (docs/gpu.md, "Running the GPU checks").
#
# The GPU machine has CUDA 13 (nvcc, cuBLAS, cuFFT, NCCL) but none of the project's Debian
# libraries (OpenBLAS, FFTW, GoogleTest, Open MPI), and no network. So the binaries are built
# HERE, for any x86-64 (-DBRT_MARCH_NATIVE=OFF), and carried there with the few Debian shared
# libraries they need, as one compressed file:
#
#   here:   scripts/gpu-check.sh bundle
#             -> build-gpu-bundle/gpu-bundle.tar.xz (ignored by git via /build*/)
#   there:  scripts/gpu-check.sh run build-gpu-bundle/gpu-bundle.tar.xz
#             (device tool: carry ["build-gpu-bundle/gpu-bundle.tar.xz"], timeout_s ~ 540)
#             -> $OUT/summary.txt, gpu-tests.*, optimizer-tests.*, train-tests.*, bench.txt,
#                bench-train.txt, device.txt
#
# `run` needs about 3-6 minutes on an H200 (hard limits add up to 520 s): the kernel and
# optimizer-kernel tests (each against the CPU backend on the machine's 16 cores), the
# training tests (50-step GPU-vs-CPU loss curves, bit-identical reruns, bf16 vs fp32 after
# 200 steps), the attention benchmark and the training throughput/MFU benchmark (150m, 1.3b).
# Run it from the repository root (the training test and benchmark read configs/). It never
# changes the GPU's settings.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}

bundle() {
  set -e
  local build=$repo/build-gpu-bundle
  mkdir -p "$build"
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRT_CUDA=ON \
    -DBRT_MARCH_NATIVE=OFF -DBRT_BUILD_BENCH=ON >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; exit 1; }
  # The NCCL test is not bundled: it needs two GPUs and mpirun, the machine has one and no MPI.
  ninja -C "$build" -j"${JOBS:-2}" test_cuda_kernels test_cuda_optimizer test_cuda_training \
    bench_cuda_attention bench_cuda_train
  local stage=$build/gpu-bundle
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
  local exe
  for exe in "$build/tests/cuda/test_cuda_kernels" "$build/tests/cuda/test_cuda_optimizer" \
    "$build/tests/cuda/test_cuda_training" \
    "$build/bench/cuda/bench_cuda_attention" "$build/bench/cuda/bench_cuda_train"; do
    cp "$exe" "$stage/bin/"
    # Debian libraries the GPU machine lacks; glibc, libstdc++ and CUDA's own come from there.
    ldd "$exe" | awk '/=> \// && $3 !~ /\/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so|\/usr\/local\/cuda/ {print $3}' |
      xargs -r -I{} cp -L -f {} "$stage/lib/"
  done
  tar -C "$build" -cJf "$build/gpu-bundle.tar.xz" gpu-bundle
  ls -la "$build/gpu-bundle.tar.xz"
  echo "carry build-gpu-bundle/gpu-bundle.tar.xz; run: scripts/gpu-check.sh run build-gpu-bundle/gpu-bundle.tar.xz"
}

run() {
  local archive=${1:-$repo/build-gpu-bundle/gpu-bundle.tar.xz}
  local out=${OUT:-$repo/gpu-check-out}
  mkdir -p "$out"
  local work=/tmp/brt-gpu-check
  rm -rf "$work" && mkdir -p "$work"
  tar -C "$work" -xJf "$archive" || { echo "cannot unpack $archive" | tee "$out/summary.txt"; exit 1; }
  local b=$work/gpu-bundle
  local cuda_lib=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && cuda_lib="$cuda_lib:$d"
  done
  export LD_LIBRARY_PATH="$b/lib$cuda_lib:${LD_LIBRARY_PATH:-}"
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
  {
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
    command -v nvcc >/dev/null && nvcc --version | tail -1
    uname -a
    echo "--- ldd"
    ldd "$b"/bin/*
  } >"$out/device.txt" 2>&1
  if grep -q "=> not found" "$out/device.txt"; then
    echo "missing shared libraries (see device.txt):" | tee "$out/summary.txt"
    grep "=> not found" "$out/device.txt" | tee -a "$out/summary.txt"
    exit 1
  fi
  local tests_rc=0 optim_rc=0 train_rc=0 bench_rc=0 train_bench_rc=0
  timeout 120 "$b/bin/test_cuda_kernels" --gtest_output="xml:$out/gpu-tests.xml" \
    >"$out/gpu-tests.log" 2>&1 || tests_rc=$?
  timeout 60 "$b/bin/test_cuda_optimizer" --gtest_output="xml:$out/optimizer-tests.xml" \
    >"$out/optimizer-tests.log" 2>&1 || optim_rc=$?
  timeout 160 "$b/bin/test_cuda_training" --gtest_output="xml:$out/train-tests.xml" \
    >"$out/train-tests.log" 2>&1 || train_rc=$?
  timeout 60 "$b/bin/bench_cuda_attention" >"$out/bench.txt" 2>&1 || bench_rc=$?
  timeout 120 "$b/bin/bench_cuda_train" --batch 4 --steps 5 configs/150m.toml configs/1.3b.toml \
    >"$out/bench-train.txt" 2>&1 || train_bench_rc=$?
  {
    echo "== brt gpu-check $(date -u +%FT%TZ)"
    grep -m1 "^NVIDIA" "$out/device.txt" || echo "no GPU listed by nvidia-smi"
    echo "gpu tests rc=$tests_rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$out/gpu-tests.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED  \]' "$out/gpu-tests.log" | head -20
    echo "optimizer tests rc=$optim_rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$out/optimizer-tests.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED  \]' "$out/optimizer-tests.log" | head -10
    echo "training tests rc=$train_rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$out/train-tests.log" | tr '\n' ' ')"
    grep -E '^\[  FAILED  \]|steps, worst|after 200 steps' "$out/train-tests.log" | head -20
    echo "attention bench rc=$bench_rc"
    tail -8 "$out/bench.txt"
    echo "training bench rc=$train_bench_rc"
    tail -6 "$out/bench-train.txt"
  } | tee "$out/summary.txt"
  [ "$tests_rc" = 0 ] && [ "$optim_rc" = 0 ] && [ "$train_rc" = 0 ] && [ "$bench_rc" = 0 ] && [ "$train_bench_rc" = 0 ]
}

case "$mode" in
  bundle) bundle ;;
  run) shift; run "$@" ;;
  *) echo "usage: $0 bundle | run [gpu-bundle.tar.xz]" >&2; exit 2 ;;
esac
