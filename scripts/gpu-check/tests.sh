# shellcheck shell=bash
# The GPU parts of `gpu-check.sh run` (docs/gpu.md, "Running the GPU checks"):
#   bench     bench_cuda_train (150m, 1.3b at B 4), bench_cuda_attention, an asynchronous
#             checkpoint's training stall (brt-dist train 150m), bench_cuda_train 40m at B 1
#   unit      every suite of test_cuda_kernels, test_cuda_optimizer, test_cuda_training in its
#             own process (a sticky CUDA fault fails one suite, not the rest); a failing suite
#             is run once more with CUDA_LAUNCH_BLOCKING=1; with a GPU a skip is a failure
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
  local bin=$1 suite=$2 limit expect safe log p f s extra=""
  limit=$(suite_limit "$bin" "$suite")
  expect=$(suite_expected "$bin" "$suite")
  safe=$bin.${suite//\//_}
  log=$LOGS/$safe.log
  step "$bin $suite" "$expect" "$limit" "$log" env LD_LIBRARY_PATH="$LDP" BRT_REQUIRE_GPU=1 \
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
  step "$bin $suite rerun with CUDA_LAUNCH_BLOCKING=1" "$expect" "$limit" "$LOGS/$safe.rerun.log" \
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

# A benchmark step: ok when it exits 0 and did not skip; the lines matching LINES (a grep
# pattern) reach the summary the moment the benchmark prints them (common.sh STEP_LIVE), so a
# figure is returned even when a later step, or the call itself, is cut short.
bench_step() {
  local name=$1 limit=$2 lines=$3
  shift 3
  local log
  log=$LOGS/$(echo "$name" | tr ' ' '-').log
  STEP_LIVE=$lines STEP_LIVE_MAX=16 step "$name" "$(expected "$name")" "$limit" "$log" env LD_LIBRARY_PATH="$LDP" "$@"
  [ "$STEP_RC" = 200 ] && return
  local ok=0
  [ "$STEP_RC" = 0 ] && ! grep -v '^# ' "$log" | grep -E 'skipped|FAILED' >/dev/null && ok=1
  step_result "$name" "$ok"
}

# The headline figures first (docs/gpu.md): the training step's MFU at 150m and 1.3b, the
# attention kernels' TF/s, the training stall of an asynchronous checkpoint, then 40m at B 1
# (where launches dominate).
part_bench() {
  if needs "bench train" bench_cuda_train; then
    # Each config eagerly and from CUDA graphs.
    bench_step "bench train 150m" 150 'MFU|launches per step|component|error|skipped|FAILED' \
      "$B/bin/bench_cuda_train" --batch 4 --steps 5 configs/150m.toml
    bench_step "bench train 1.3b" 180 'MFU|launches per step|component|error|skipped|FAILED' \
      "$B/bin/bench_cuda_train" --batch 4 --steps 5 configs/1.3b.toml
  fi
  if needs "bench attention" bench_cuda_attention; then
    bench_step "bench attention" 90 'TFLOP/s|ratio|peak|error|skipped|FAILED' "$B/bin/bench_cuda_attention"
  fi
  if needs "bench checkpoint stall" brt-dist; then
    bench_step "bench checkpoint stall" 120 'checkpoint saved|error|FAILED' \
      "$B/bin/brt-dist" train configs/150m.toml --device cuda --precision bf16 data.source=synthetic \
      train.batch=4 train.steps=8 optim.total_steps=8 train.eval_every=0 log.every=4 log.metrics_path= run.dir= \
      "checkpoint.dir=$WORK/checkpoint-stall" checkpoint.every=4 checkpoint.async=true
  fi
  if needs "bench train" bench_cuda_train; then
    bench_step "bench train 40m" 90 'MFU|launches per step|error|skipped|FAILED' \
      "$B/bin/bench_cuda_train" --batch 1 --steps 10 configs/40m.toml
  fi
}

# The planner's GPU calibration (docs/gpu.md, "Predicting GPU step time"). PLAN_CONFIG,
# PLAN_DEVICE, PLAN_PRECISION: the CPU stand-ins of the rehearsal.
part_plan() {
  local cpu=0
  [ "${PLAN_DEVICE:-cuda}" = cpu ] && cpu=1
  needs "plan" brt-dist "$cpu" || return
  local cfg=${PLAN_CONFIG:-configs/150m.toml} device=${PLAN_DEVICE:-cuda} precision=${PLAN_PRECISION:-bf16}
  local bd=$B/bin/brt-dist rates=$LOGS/cluster-gpu.toml metrics=$LOGS/plan-run.jsonl
  step "plan rates" "$(expected "plan rates")" 60 "$LOGS/plan-rates.log" env LD_LIBRARY_PATH="$LDP" "$bd" plan "$cfg" \
    --measure-rates "$rates" --device "$device" --precision "$precision" --seconds 1 train.batch=4
  [ "$STEP_RC" = 200 ] && return
  step_result "plan rates ($cfg, $device, $precision)" "$([ "$STEP_RC" = 0 ] && echo 1)"
  grep -E '^plan: |error' "$LOGS/plan-rates.log" | say_lines 4
  [ "$STEP_RC" = 0 ] || return
  step "plan train" "$(expected "plan train")" 120 "$LOGS/plan-train.log" env LD_LIBRARY_PATH="$LDP" "$bd" train "$cfg" \
    --device "$device" --precision "$precision" data.source=synthetic train.batch=4 train.steps=12 \
    optim.total_steps=12 train.eval_every=0 log.every=1 "log.metrics_path=$metrics" run.dir= checkpoint.dir=
  [ "$STEP_RC" = 200 ] && return
  step_result "plan train (12 steps)" "$([ "$STEP_RC" = 0 ] && echo 1)"
  grep -E 'error' "$LOGS/plan-train.log" | say_lines 3
  [ "$STEP_RC" = 0 ] || return
  step "plan predict" "$(expected "plan predict")" 30 "$LOGS/plan-predict.log" env LD_LIBRARY_PATH="$LDP" "$bd" plan "$cfg" \
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
    step "compute-sanitizer $tool" "$(expected "compute-sanitizer $tool")" 150 "$log" env LD_LIBRARY_PATH="$LDP" BRT_REQUIRE_GPU=1 BRT_SMALL_SHAPES=1 \
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
