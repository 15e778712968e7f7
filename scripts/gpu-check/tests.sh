# shellcheck shell=bash
# The GPU parts of `gpu-check.sh run` (docs/gpu.md, "Running the GPU checks"):
#   unit      every suite of test_cuda_kernels, test_cuda_optimizer, test_cuda_training in its
#             own process (a sticky CUDA fault fails one suite, not the rest); a failing suite
#             is run once more with CUDA_LAUNCH_BLOCKING=1; with a GPU a skip is a failure
#   bench     bench_cuda_attention, bench_cuda_train (150m, 1.3b at B 4; 40m at B 1)
#   plan      the planner's calibration: this GPU's kernel-class rates, a 150m run, the plan
#   sanitize  compute-sanitizer memcheck and racecheck on the attention, norm and xent tests
#             at their small shapes (BRT_SMALL_SHAPES=1), where compute-sanitizer works

# Each suite's limit in seconds.
suite_limit() {
  case "$1/$2" in
    test_cuda_training/CudaTraining) echo 240 ;;
    test_cuda_training/*) echo 120 ;;
    test_cuda_optimizer/*) echo 90 ;;
    */CudaSsmTest | */CudaFftConvTest | */CudaTpTest) echo 60 ;;
    *) echo 45 ;;
  esac
}

# Whether a step that needs BIN (and the device, unless CPU=1) can run; else says why.
needs() {
  local what=$1 bin=$2 cpu=${3:-0}
  if [ "${LOADS[$bin]:-not in the bundle}" != ok ]; then
    skip_step "$what" "$bin $([ -n "${LOADS[$bin]:-}" ] && echo 'does not load (preflight)' || echo 'is not in the bundle')"
    return 1
  fi
  if [ "$cpu" != 1 ] && [ "$DEVICE_OK" != 1 ]; then
    skip_step "$what" "the device is unusable ($DEVICE_SHORT)"
    return 1
  fi
}

# One suite: its line, the failing tests' names, the CUDA error, and a rerun if it failed.
gtest_suite() {
  local bin=$1 suite=$2 limit safe log p f s extra=""
  limit=$(suite_limit "$bin" "$suite")
  safe=$bin.${suite//\//_}
  log=$LOGS/$safe.log
  step "$bin $suite" "$limit" "$log" env LD_LIBRARY_PATH="$LDP" BRT_REQUIRE_GPU=1 \
    "$B/bin/$bin" --gtest_filter="$suite.*" --gtest_output="xml:$LOGS/$safe.xml"
  [ "$STEP_RC" = 200 ] && return
  read -r p f s <<<"$(gtest_counts "$log")"
  if [ "$STEP_RC" = 0 ] && [ "$f" = 0 ] && [ "$s" = 0 ] && [ "$p" -gt 0 ]; then
    step_result "$bin $suite" 1 "passed $p"
    return
  fi
  [ "$s" != 0 ] && extra=" (a skip is a failure: the device check passed)"
  local err
  err=$(cuda_error_name "$log")
  step_result "$bin $suite" 0 "passed $p, failed $f, skipped $s$extra${err:+, first CUDA error: $err}"
  grep -E '^\[  (FAILED  |SKIPPED )\] [A-Za-z]' "$log" | sed 's/ ([0-9]* ms)$//' | sort -u | say_lines 8
  grep -E -m3 'Failure$|cudaError|exception|Which is|Expected' "$log" | say_lines 3
  step "$bin $suite rerun with CUDA_LAUNCH_BLOCKING=1" "$limit" "$LOGS/$safe.rerun.log" \
    env LD_LIBRARY_PATH="$LDP" BRT_REQUIRE_GPU=1 CUDA_LAUNCH_BLOCKING=1 \
    "$B/bin/$bin" --gtest_filter="$suite.*" --gtest_output="xml:$LOGS/$safe.rerun.xml"
  [ "$STEP_RC" = 200 ] && return
  read -r p f s <<<"$(gtest_counts "$LOGS/$safe.rerun.log")"
  err=$(cuda_error_name "$LOGS/$safe.rerun.log")
  say "    rerun with CUDA_LAUNCH_BLOCKING=1 ($STEP_S s, $(rc_words "$STEP_RC")): passed $p, failed $f, skipped $s${err:+, first CUDA error: $err}"
  pack_logs
}

part_unit() {
  local bin suite suites
  for bin in test_cuda_kernels test_cuda_optimizer test_cuda_training; do
    needs "$bin ($([ -f "$WORK/$bin.suites" ] && wc -l <"$WORK/$bin.suites" || echo '?') suites)" "$bin" || continue
    mapfile -t suites <"$WORK/$bin.suites"
    for suite in "${suites[@]}"; do
      [ "$suite" = CudaDeviceCheck ] && continue # the preflight ran it
      gtest_suite "$bin" "$suite"
    done
  done
}

# A benchmark step: ok when it exits 0 and did not skip; LINES (a grep pattern) to the summary.
bench_step() {
  local name=$1 limit=$2 lines=$3
  shift 3
  local log
  log=$LOGS/$(echo "$name" | tr ' ' '-').log
  step "$name" "$limit" "$log" env LD_LIBRARY_PATH="$LDP" "$@"
  [ "$STEP_RC" = 200 ] && return
  local ok=0
  [ "$STEP_RC" = 0 ] && ! grep -v '^# ' "$log" | grep -E 'skipped|FAILED' >/dev/null && ok=1
  step_result "$name" "$ok"
  grep -E "$lines" "$log" | say_lines 8
}

part_bench() {
  if needs "bench attention" bench_cuda_attention; then
    bench_step "bench attention" 90 'TFLOP/s|ratio|peak|error|skipped|FAILED' "$B/bin/bench_cuda_attention"
  fi
  needs "bench train" bench_cuda_train || return
  # Each config eagerly and from CUDA graphs; 40m at B = 1 is where launches dominate.
  bench_step "bench train 150m" 150 'MFU|launches per step|error|skipped|FAILED' \
    "$B/bin/bench_cuda_train" --batch 4 --steps 5 configs/150m.toml
  bench_step "bench train 1.3b" 180 'MFU|launches per step|error|skipped|FAILED' \
    "$B/bin/bench_cuda_train" --batch 4 --steps 5 configs/1.3b.toml
  bench_step "bench train 40m" 90 'MFU|launches per step|error|skipped|FAILED' \
    "$B/bin/bench_cuda_train" --batch 1 --steps 10 configs/40m.toml
}

# The planner's GPU calibration (docs/gpu.md, "Predicting GPU step time"). PLAN_CONFIG,
# PLAN_DEVICE, PLAN_PRECISION: the CPU stand-ins of the rehearsal.
part_plan() {
  local cpu=0
  [ "${PLAN_DEVICE:-cuda}" = cpu ] && cpu=1
  needs "plan" brt-dist "$cpu" || return
  local cfg=${PLAN_CONFIG:-configs/150m.toml} device=${PLAN_DEVICE:-cuda} precision=${PLAN_PRECISION:-bf16}
  local bd=$B/bin/brt-dist rates=$LOGS/cluster-gpu.toml metrics=$LOGS/plan-run.jsonl
  step "plan rates" 60 "$LOGS/plan-rates.log" env LD_LIBRARY_PATH="$LDP" "$bd" plan "$cfg" \
    --measure-rates "$rates" --device "$device" --precision "$precision" --seconds 1 train.batch=4
  [ "$STEP_RC" = 200 ] && return
  step_result "plan rates ($cfg, $device, $precision)" "$([ "$STEP_RC" = 0 ] && echo 1)"
  grep -E '^plan: |error' "$LOGS/plan-rates.log" | say_lines 4
  [ "$STEP_RC" = 0 ] || return
  step "plan train" 120 "$LOGS/plan-train.log" env LD_LIBRARY_PATH="$LDP" "$bd" train "$cfg" \
    --device "$device" --precision "$precision" data.source=synthetic train.batch=4 train.steps=12 \
    optim.total_steps=12 train.eval_every=0 log.every=1 "log.metrics_path=$metrics"
  [ "$STEP_RC" = 200 ] && return
  step_result "plan train (12 steps)" "$([ "$STEP_RC" = 0 ] && echo 1)"
  grep -E 'error' "$LOGS/plan-train.log" | say_lines 3
  [ "$STEP_RC" = 0 ] || return
  step "plan predict" 30 "$LOGS/plan-predict.log" env LD_LIBRARY_PATH="$LDP" "$bd" plan "$cfg" \
    --cluster "$rates" --global-batch 4 --dp 1 --measured "$metrics" train.batch=4
  [ "$STEP_RC" = 200 ] && return
  step_result "plan predict" "$([ "$STEP_RC" = 0 ] && echo 1)"
  grep -E 'predicted vs measured|error' "$LOGS/plan-predict.log" | say_lines 4
}

part_sanitize() {
  if [ -z "$SANITIZER" ]; then
    skip_step "compute-sanitizer memcheck, racecheck" "$SANITIZER_WHY"
    return
  fi
  needs "compute-sanitizer" test_cuda_kernels || return
  local tool filter='CudaWindowAttention*:CudaCrossAttention*:CudaNormTest.*:CudaXentTest.*'
  for tool in memcheck racecheck; do
    local log=$LOGS/sanitizer-$tool.log p f s
    step "compute-sanitizer $tool" 150 "$log" env LD_LIBRARY_PATH="$LDP" BRT_REQUIRE_GPU=1 BRT_SMALL_SHAPES=1 \
      "$SANITIZER" --tool "$tool" --error-exitcode 99 --print-limit 50 \
      "$B/bin/test_cuda_kernels" --gtest_filter="$filter" --gtest_output="xml:$LOGS/sanitizer-$tool.xml"
    [ "$STEP_RC" = 200 ] && continue
    read -r p f s <<<"$(gtest_counts "$log")"
    step_result "compute-sanitizer $tool (attention, norm, xent; small shapes)" \
      "$([ "$STEP_RC" = 0 ] && [ "$f" = 0 ] && [ "$s" = 0 ] && [ "$p" -gt 0 ] && echo 1)" \
      "tests passed $p, failed $f, skipped $s; $(grep -m1 -E '(ERROR|RACECHECK) SUMMARY' "$log")"
    grep -E -m6 '^========= (Invalid|Error|Race|Warning|    at )' "$log" | say_lines 6
  done
}
