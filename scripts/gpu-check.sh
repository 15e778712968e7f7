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
#   there:  scripts/gpu-check.sh run build-gpu-bundle/gpu-bundle.tar.xz [all|tests|peer|plan]
#             (device tool: carry ["build-gpu-bundle/gpu-bundle.tar.xz"], timeout_s ~ 560
#             for one part; `all` runs both parts and needs two calls' worth of time)
#             -> $OUT/summary.txt, device.txt; tests: gpu-tests.*, optimizer-tests.*,
#                train-tests.*, bench.txt, bench-train.txt, plan.txt, cluster-gpu.toml;
#                peer: peer.txt
#   here:   scripts/gpu-check.sh dry-run [BUILD]   (no GPU, no cmake: the self-check below)
#
# Part `tests` needs about 4-7 minutes on an H200 (hard limits add up to 620 s; each step
# writes its own log under OUT, so a call cut at 600 s still returns what ran): the kernel
# and optimizer-kernel tests (each against the CPU backend on the machine's 16 cores), the
# training tests (50-step GPU-vs-CPU loss curves, bit-identical reruns, bf16 vs fp32 after
# 200 steps), the attention benchmark, the training throughput/MFU benchmark (150m, 1.3b) and
# the planner's calibration (plan.txt: this GPU's measured kernel-class rates, predicted vs
# measured 150m step time).
# Part `peer` (hard limits add up to 530 s; docs/gpu.md "The PyTorch peer"): bench/peer's
# fast paths (FlexAttention, torch.compile, bf16) checked against its plain float64 path,
# then bench_peer.py --brt-dist on 40m (B 1), 150m and 1.3b (B 4): tokens/s, TFLOP/s, MFU
# against a bf16 8192^3 matmul measured in the same call, and brt-dist / peer tokens/s.
# It uses the machine's python3 (PyTorch 2.x; PEER_PYTHON overrides) and the bundled brt-dist,
# which runs as an MPI singleton on the bundled Open MPI components (mpi/, see mpi_env).
# Run it from the repository root (the tests and benchmarks read configs/). It never
# changes the GPU's settings.
#
# `dry-run` checks the peer path here without a GPU or a build: it bundles the host build's
# brt-dist (default build/release) as `bundle` does, with the Open MPI runtime, bench/peer and
# python/brt_dist, packs and unpacks it, and runs part `peer` from it on the CPU with tiny
# configs; as root, inside a mount namespace in which Debian's Open MPI components, PMIx and
# /etc/openmpi are hidden, so the carried MPI runtime is what brt-dist starts on.
set -uo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-}
host_ld_path=${LD_LIBRARY_PATH:-}   # python3 keeps the machine's own libraries (peer_part)

# The Debian shared libraries FILE needs that the GPU machine lacks (glibc, libstdc++ and
# CUDA's own come from there), copied into DEST.
copy_libs() {
  ldd "$1" | awk '/=> \// && $3 !~ /\/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s)\.so|\/usr\/local\/cuda/ {print $3}' |
    xargs -r -I{} cp -L -f {} "$2/"
}

# Open MPI's runtime for brt-dist's MPI_Init as a singleton (no mpirun there): the MCA
# components, PMIx's, their libraries and the help texts, under STAGE/mpi and STAGE/lib.
stage_mpi_runtime() {
  local stage=$1 ompi pmix
  ompi=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
  [ -d "$ompi" ] || { echo "no Open MPI components (ompi_info --path pkglibdir)" >&2; return 1; }
  pmix=$(dirname "$(realpath "$(ldd "$ompi/mca_pmix_ext3x.so" | awk '/libpmix/ {print $3}')")")/pmix
  mkdir -p "$stage/mpi/ompi" "$stage/mpi/pmix" "$stage/mpi/share"
  cp "$ompi"/*.so "$stage/mpi/ompi/"
  [ -d "$pmix" ] && cp "$pmix"/*.so "$stage/mpi/pmix/"
  local f
  for f in "$stage"/mpi/ompi/*.so "$stage"/mpi/pmix/*.so; do copy_libs "$f" "$stage/lib"; done
  local data
  data=$(ompi_info --path pkgdatadir --parsable 2>/dev/null | sed -n 's/^path:pkgdatadir://p')
  [ -d "$data" ] && cp -r "$data" "$stage/mpi/share/openmpi"
  return 0
}

# bench/peer and the Python package (checkpoint reading) ride in the bundle beside brt-dist.
stage_peer() {
  mkdir -p "$1/bench/peer" "$1/python"
  cp "$repo"/bench/peer/*.py "$1/bench/peer/"
  cp -r "$repo/python/brt_dist" "$1/python/"
  find "$1" -name __pycache__ -prune -exec rm -rf {} +
}

# The carried Open MPI (stage_mpi_runtime) for a singleton: no daemon, shared memory only,
# Debian's /etc/openmpi defaults (absent there) as variables.
mpi_env() {
  export OMPI_MCA_mca_base_component_path=$1/mpi/ompi PMIX_MCA_mca_base_component_path=$1/mpi/pmix
  export OPAL_PKGDATADIR=$1/mpi/share/openmpi OMPI_MCA_ess_singleton_isolated=1
  export OMPI_MCA_mca_base_component_show_load_errors=0 PMIX_MCA_mca_base_component_show_load_errors=0
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mtl=^ofi OMPI_MCA_osc=^ucx,pt2pt
  export OMPI_MCA_btl_base_warn_component_unused=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

bundle() {
  set -e
  local build=$repo/build-gpu-bundle
  mkdir -p "$build"
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRT_CUDA=ON \
    -DBRT_MARCH_NATIVE=OFF -DBRT_BUILD_BENCH=ON >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; exit 1; }
  # The NCCL test is not bundled: it needs two GPUs and mpirun, the machine has one and no MPI.
  ninja -C "$build" -j"${JOBS:-2}" test_cuda_kernels test_cuda_optimizer test_cuda_training \
    bench_cuda_attention bench_cuda_train brt-dist
  local stage=$build/gpu-bundle
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
  local exe
  for exe in "$build/tests/cuda/test_cuda_kernels" "$build/tests/cuda/test_cuda_optimizer" \
    "$build/tests/cuda/test_cuda_training" \
    "$build/bench/cuda/bench_cuda_attention" "$build/bench/cuda/bench_cuda_train" \
    "$build/launch/brt-dist"; do
    cp "$exe" "$stage/bin/"
    copy_libs "$exe" "$stage/lib"
  done
  stage_mpi_runtime "$stage"   # brt-dist (bench_peer --brt-dist) calls MPI_Init
  stage_peer "$stage"
  tar -C "$build" -cJf "$build/gpu-bundle.tar.xz" gpu-bundle
  ls -la "$build/gpu-bundle.tar.xz"
  echo "carry build-gpu-bundle/gpu-bundle.tar.xz; run: scripts/gpu-check.sh run build-gpu-bundle/gpu-bundle.tar.xz [all|tests|peer]"
}

# The planner's GPU calibration (docs/gpu.md, "Predicting GPU step time"): this GPU's
# kernel-class rates at 150m's shapes into OUT/cluster-gpu.toml, a short 150m bf16 run, and the
# plan's predicted step time next to the measured one -> OUT/plan.txt.
plan_part() {
  local b=$1 out=$2 rc=0 log=$2/plan.txt
  mpi_env "$b"
  # PLAN_CONFIG, PLAN_DEVICE, PLAN_PRECISION: the dry run's CPU stand-ins.
  local cfg=${PLAN_CONFIG:-configs/150m.toml} shape="train.batch=4"
  local device=${PLAN_DEVICE:-cuda} precision=${PLAN_PRECISION:-bf16}
  {
    echo "== plan --measure-rates ($cfg, $shape, $device, $precision)"
    timeout 30 "$b/bin/brt-dist" plan "$cfg" --measure-rates "$out/cluster-gpu.toml" --device "$device" \
      --precision "$precision" --seconds 1 $shape || rc=1
    cat "$out/cluster-gpu.toml" 2>/dev/null
    echo "== train $cfg 12 steps ($precision, synthetic)"
    timeout 60 "$b/bin/brt-dist" train "$cfg" --device "$device" --precision "$precision" data.source=synthetic \
      $shape train.steps=12 optim.total_steps=12 train.eval_every=0 log.every=1 \
      "log.metrics_path=$out/plan-run.jsonl" 2>&1 | tail -4 || rc=1
    echo "== plan with the measured rates"
    timeout 10 "$b/bin/brt-dist" plan "$cfg" --cluster "$out/cluster-gpu.toml" --global-batch 4 --dp 1 \
      --measured "$out/plan-run.jsonl" $shape || rc=1
  } >"$log" 2>&1
  return $rc
}

# Part `peer`: bench/peer against brt-dist (docs/gpu.md, "The PyTorch peer") -> OUT/peer.txt.
# PEER_SPECS: "timeout_s|bench_peer arguments" entries separated by ';'; PEER_ARGS is added to
# every call (the dry run: --device cpu ...); PEER_VERIFY: the variants of --verify.
peer_part() {
  local b=$1 out=$2 rc=0 r spec
  local py=${PEER_PYTHON:-python3} bench=$b/bench/peer/bench_peer.py log=$out/peer.txt
  # Only brt-dist sees the bundle's Debian libraries; python3 and torch load the machine's own.
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$LD_LIBRARY_PATH" "$b/bin/brt-dist" >"$b/brt-dist.sh"
  chmod +x "$b/brt-dist.sh"
  py="env LD_LIBRARY_PATH=$host_ld_path $py"
  local specs=${PEER_SPECS:-"90|configs/40m.toml train.batch=1 --steps 10;120|configs/150m.toml train.batch=4 --steps 10;170|configs/1.3b.toml train.batch=4 --steps 5 --warmup 2"}
  mpi_env "$b"
  {
    echo "== verify: $py bench_peer.py --verify ${PEER_VERIFY:-rec:fixed:skip bst:sh:s4d} ${PEER_ARGS:-}"
    $py -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())' 2>&1
  } >"$log"
  # shellcheck disable=SC2086  # the word lists are meant to split
  PYTHONUNBUFFERED=1 timeout 150 $py "$bench" --verify ${PEER_VERIFY:-rec:fixed:skip bst:sh:s4d} \
    ${PEER_ARGS:-} >>"$log" 2>&1 || { r=$?; echo "verify rc=$r" >>"$log"; rc=1; }
  local IFS=';'
  for spec in $specs; do
    IFS=' '
    echo "== ${spec#*|}" >>"$log"
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 timeout "${spec%%|*}" $py "$bench" ${spec#*|} ${PEER_ARGS:-} --brt-dist "$b/brt-dist.sh" \
      >>"$log" 2>&1 || { r=$?; echo "bench rc=$r$([ "$r" = 124 ] && echo ' (timed out)')" >>"$log"; rc=1; }
  done
  return $rc
}

run() {
  local archive=${1:-$repo/build-gpu-bundle/gpu-bundle.tar.xz} parts=${2:-all}
  case "$parts" in all|tests|peer|plan) ;; *) echo "run: part $parts is not all, tests, peer or plan" >&2; exit 2 ;; esac
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
  local tests_rc=0 optim_rc=0 train_rc=0 bench_rc=0 train_bench_rc=0 peer_rc=0 plan_rc=0
  if [ "$parts" = plan ]; then
    plan_part "$b" "$out" || plan_rc=$?
  fi
  if [ "$parts" = all ] || [ "$parts" = tests ]; then
    timeout 120 "$b/bin/test_cuda_kernels" --gtest_output="xml:$out/gpu-tests.xml" \
      >"$out/gpu-tests.log" 2>&1 || tests_rc=$?
    timeout 60 "$b/bin/test_cuda_optimizer" --gtest_output="xml:$out/optimizer-tests.xml" \
      >"$out/optimizer-tests.log" 2>&1 || optim_rc=$?
    timeout 220 "$b/bin/test_cuda_training" --gtest_output="xml:$out/train-tests.xml" \
      >"$out/train-tests.log" 2>&1 || train_rc=$?
    timeout 60 "$b/bin/bench_cuda_attention" >"$out/bench.txt" 2>&1 || bench_rc=$?
    # Each config eagerly and from CUDA graphs; 40m at B = 1 is where launches dominate.
    timeout 200 "$b/bin/bench_cuda_train" --batch 4 --steps 5 configs/150m.toml configs/1.3b.toml \
      >"$out/bench-train.txt" 2>&1 || train_bench_rc=$?
    timeout 60 "$b/bin/bench_cuda_train" --batch 1 --steps 10 configs/40m.toml \
      >>"$out/bench-train.txt" 2>&1 || train_bench_rc=$?
    plan_part "$b" "$out" || plan_rc=$?
  fi
  if [ "$parts" = all ] || [ "$parts" = peer ]; then
    peer_part "$b" "$out" || peer_rc=$?
  fi
  {
    echo "== brt gpu-check $(date -u +%FT%TZ), part $parts"
    grep -m1 "^NVIDIA" "$out/device.txt" || echo "no GPU listed by nvidia-smi"
    if [ "$parts" = all ] || [ "$parts" = tests ]; then
      echo "gpu tests rc=$tests_rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$out/gpu-tests.log" | tr '\n' ' ')"
      grep -E '^\[  FAILED  \]' "$out/gpu-tests.log" | head -20
      echo "optimizer tests rc=$optim_rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$out/optimizer-tests.log" | tr '\n' ' ')"
      grep -E '^\[  FAILED  \]' "$out/optimizer-tests.log" | head -10
      echo "training tests rc=$train_rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$out/train-tests.log" | tr '\n' ' ')"
      grep -E '^\[  FAILED  \]|steps, worst|after 200 steps|replayed, ' "$out/train-tests.log" | head -24
      echo "attention bench rc=$bench_rc"
      tail -8 "$out/bench.txt"
      echo "training bench rc=$train_bench_rc"
      grep -E 'MFU|launches per step|error|skipped' "$out/bench-train.txt" | cut -c1-300
    fi
    if [ "$parts" != peer ]; then
      echo "planner calibration rc=$plan_rc (plan.txt)"
      grep -E '^plan: gemm|predicted vs measured|error' "$out/plan.txt" | cut -c1-300
    fi
    if [ "$parts" = all ] || [ "$parts" = peer ]; then
      echo "peer rc=$peer_rc (peer.txt)"
      grep -E '^(torch |verify |peer: |peer:|brt-dist:|brt-dist / peer|FLOPs/token|bench_peer: error|== |bench rc|verify rc|Traceback)' \
        "$out/peer.txt" | cut -c1-300
    fi
  } | tee "$out/summary.txt"
  [ "$tests_rc" = 0 ] && [ "$optim_rc" = 0 ] && [ "$train_rc" = 0 ] && [ "$bench_rc" = 0 ] &&
    [ "$train_bench_rc" = 0 ] && [ "$peer_rc" = 0 ] && [ "$plan_rc" = 0 ]
}

# The self-check of the peer path without a GPU (header): a bundle of the host build's
# brt-dist, then `run ARCHIVE peer` on the CPU with tiny configs.
dry_run() {
  set -e
  local build=${1:-$repo/build/release}
  [ -x "$build/launch/brt-dist" ] || { echo "dry-run: no $build/launch/brt-dist (build it first)" >&2; exit 1; }
  local work=/tmp/brt-gpu-dry-run
  rm -rf "$work" && mkdir -p "$work/gpu-bundle/bin" "$work/gpu-bundle/lib" "$work/empty"
  cp "$build/launch/brt-dist" "$work/gpu-bundle/bin/"
  copy_libs "$build/launch/brt-dist" "$work/gpu-bundle/lib"
  stage_mpi_runtime "$work/gpu-bundle"
  stage_peer "$work/gpu-bundle"
  tar -C "$work" -cJf "$work/gpu-bundle.tar.xz" gpu-bundle
  rm -rf "$work/gpu-bundle"
  echo "dry-run: bundle $(du -h "$work/gpu-bundle.tar.xz" | cut -f1) in $work"
  export PEER_PYTHON=${PEER_PYTHON:-/usr/bin/python3} PEER_VERIFY=${PEER_VERIFY:-rec:fixed:skip}
  export PEER_ARGS=${PEER_ARGS:-"--device cpu --threads 1 --no-peak"}
  export PEER_SPECS=${PEER_SPECS:-"120|configs/tiny.toml train.batch=1 --steps 2 --warmup 1;120|configs/bench-small.toml model.variant=bst:sh:s4d train.batch=1 --steps 2 --warmup 1"}
  export OUT=$work/out OMP_NUM_THREADS=1
  set +e
  local hide="" d
  for d in "$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')" \
    /usr/lib/x86_64-linux-gnu/pmix2 /etc/openmpi /usr/share/openmpi; do
    [ -d "$d" ] && hide="$hide mount --bind $work/empty $d &&"
  done
  if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
    echo "dry-run: Debian's Open MPI components, PMIx and /etc/openmpi hidden (unshare -m)"
    unshare -m bash -c "$hide \"\$0\" run \"\$1\" peer; p=\$?; PLAN_CONFIG=configs/tiny.toml PLAN_DEVICE=cpu PLAN_PRECISION=fp32 \"\$0\" run \"\$1\" plan || p=1; exit \$p" "$0" "$work/gpu-bundle.tar.xz"
  else
    echo "dry-run: not root or no unshare: the system's Open MPI stays visible"
    "$0" run "$work/gpu-bundle.tar.xz" peer
    local p=$?
    PLAN_CONFIG=configs/tiny.toml PLAN_DEVICE=cpu PLAN_PRECISION=fp32 "$0" run "$work/gpu-bundle.tar.xz" plan || p=1
    (exit $p)
  fi
  local rc=$?
  echo "dry-run: rc=$rc (outputs in $OUT)"
  return $rc
}

case "$mode" in
  bundle) bundle ;;
  run) shift; run "$@" ;;
  dry-run) shift; dry_run "$@" ;;
  *) echo "usage: $0 bundle | run [gpu-bundle.tar.xz [all|tests|peer]] | dry-run [BUILD]" >&2; exit 2 ;;
esac
