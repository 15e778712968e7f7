#!/usr/bin/env bash
# Installs dependencies, builds brt-dist (Release, and Debug with ASan/UBSan) and runs the
# test suite: the full suite on the Release build, the kernel and model tests under the
# sanitizers. Usage: scripts/run-tests.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
# The cores, counted before OMP_NUM_THREADS=1 below: GNU nproc honours OMP_NUM_THREADS and
# OMP_THREAD_LIMIT, and would answer 1 (a one-job build and a one-job suite on any machine).
jobs=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
source scripts/test-timing.sh
trap timing_report EXIT

timing_stage "packages"
scripts/install-deps.sh

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Each test runs single-threaded so ctest can run two at once on two cores without OpenMP
# threads spinning against each other; MPI tests start their own ranks.
export OMP_NUM_THREADS=1

timing_stage "Release build"
echo "== Release build ($jobs jobs)"
# The whole suite, whatever an earlier configure of this folder chose.
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRT_BUILD_TESTS=ON \
  -DBRT_BUILD_BENCH=ON >/dev/null
ninja -C build/release -j"$jobs"

# The sanitizer build compiles at the lowest priority while the Release tests run: many of them
# wait (on ranks, timeouts, daemons) and leave the cores idle part of the time; nice 19 takes
# only that idle time, so it slows no test. Its output is kept in build/asan-build.log.
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBRT_SANITIZE=ON -DBRT_BUILD_BENCH=OFF >/dev/null
asan_targets=(test_kernels test_ssm_kernels test_model_gradcheck test_layer_gradcheck test_device_residency
              test_feedback test_carried_state_gradient optim_tests test_s4d_state_passing test_xl_blocks
              test_blas_core)
nice -n 19 ninja -C build/asan -j"$jobs" "${asan_targets[@]}" > build/asan-build.log 2>&1 &
asan_build=$!
trap 'kill $asan_build 2>/dev/null || true; timing_report' EXIT

timing_stage "Release tests"
echo "== Release: full test suite ($jobs at a time)"
# --no-tests=error: a build that registered no tests fails instead of passing having run nothing.
# The suite never writes into runs/ (the user's runs, the main job's): what is there before is
# all that is there after (names, sizes, times), or the suite fails naming what it wrote.
runs_before=$(find runs -printf '%p %s %T@\n' 2>/dev/null | sort || true)
(cd build/release && ctest --no-tests=error --output-on-failure -j"$jobs" --timeout 900 "$@") |
  timing_tee Release
runs_after=$(find runs -printf '%p %s %T@\n' 2>/dev/null | sort || true)
if [ "$runs_before" != "$runs_after" ]; then
  echo "FAIL: the test suite wrote into runs/:" >&2
  diff <(echo "$runs_before") <(echo "$runs_after") >&2 || true
  exit 1
fi

timing_stage "sanitizer build (rest)"
echo "== Debug + AddressSanitizer/UBSan: kernel, model (feedback included), device-residency and optimizer tests"
echo "(the build, begun beside the Release tests: $(grep -c '^\[' build/asan-build.log || true) steps so far)"
if ! wait $asan_build; then
  tail -50 build/asan-build.log >&2
  echo "FAIL: the sanitizer build failed (build/asan-build.log)" >&2
  exit 1
fi
tail -1 build/asan-build.log
timing_stage "sanitizer tests"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build/asan && ctest --no-tests=error --output-on-failure -j"$jobs" --timeout 900 -L 'kernels|model|optim') |
  timing_tee sanitizer
timing_stage ""
