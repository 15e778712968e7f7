# shellcheck shell=bash
# The expected seconds of each step of `gpu-check.sh run` on one H100 or H200, the table the
# deadline's gates read (common.sh step: a step runs when twice its expected time still fits;
# its worst case, the step's own limit, only kills it). No device has run these yet: the values
# are estimates — each workload's work at a modest fraction of the device's rates plus a
# process start, CUDA context and library load of ~5 s — and the summary prints every step's
# measured seconds, so the first device run replaces them. Keys are the step names (a gtest
# suite by its suite name, "suite" for the rest).
declare -A EXPECT=(
  [unpack]=10
  [preflight: start]=3          # each binary, started once with no device visible
  [preflight: device]=5
  [preflight: compute-sanitizer]=20
  [bench train 150m]=15         # 5 steps eagerly and from CUDA graphs, B 4, N 4096
  [bench train 1.3b]=30
  [bench attention]=15
  [bench checkpoint stall]=25   # 150m, 8 steps, asynchronous saves at 4 and 8
  [bench train 40m]=10
  [suite]=3                     # a unit suite of test_cuda_kernels or test_cuda_optimizer
  [suite CudaTraining]=20
  [suite test_cuda_training]=8
  [plan rates]=10
  [plan train]=20
  [plan predict]=3
  [compute-sanitizer memcheck]=35
  [compute-sanitizer racecheck]=50
  [peer python]=8
  [peer spec 1]=60              # 150m, B 4, 10 steps, torch.compile cold
  [peer verify]=45
  [peer spec 2]=30              # 40m, B 1
  [peer spec 3]=60              # 1.3b, B 4, 5 steps
  [python hf_transformers]=30   # prepare, train and export a tiny run; transformers loads it
  [python torch_cuda]=20        # 14 tiny variants, 3 segments each, fp64/fp32/bf16 + CUDA start
)

# The expected seconds of STEP (0 when the table does not know it: it then always runs).
expected() { echo "${EXPECT[$1]:-0}"; }

# The expected seconds of a gtest suite of BIN.
suite_expected() {
  case "$1/$2" in
    test_cuda_training/CudaTraining) expected "suite CudaTraining" ;;
    test_cuda_training/*) expected "suite test_cuda_training" ;;
    *) expected suite ;;
  esac
}

# The expected seconds of PART as this run would do it: its steps' sum (the unit suites counted
# from the lists the preflight wrote; the peer's specs from PEER_SPECS).
part_expected() {
  local total=0 bin suite k
  case "$1" in
    bench)
      for k in "bench train 150m" "bench train 1.3b" "bench attention" "bench checkpoint stall" "bench train 40m"; do
        total=$((total + $(expected "$k")))
      done
      ;;
    unit)
      for bin in test_cuda_kernels test_cuda_optimizer test_cuda_training; do
        [ -f "$WORK/$bin.suites" ] || continue
        while read -r suite; do
          [ "$suite" = CudaDeviceCheck ] || total=$((total + $(suite_expected "$bin" "$suite")))
        done <"$WORK/$bin.suites"
      done
      ;;
    plan) total=$(($(expected "plan rates") + $(expected "plan train") + $(expected "plan predict"))) ;;
    sanitize) total=$(($(expected "compute-sanitizer memcheck") + $(expected "compute-sanitizer racecheck"))) ;;
    peer_first) total=$(($(expected "peer python") + $(expected "peer spec 1"))) ;;
    peer_rest) total=$(($(expected "peer verify") + $(expected "peer spec 2") + $(expected "peer spec 3"))) ;;
    peer) total=$(($(part_expected peer_first) + $(part_expected peer_rest))) ;;
    python) total=$(($(expected "python torch_cuda") + $(expected "python hf_transformers"))) ;;
  esac
  echo "$total"
}

# The start-up's expected seconds: the unpacking, each binary's start, the device check and,
# with the sanitizers among the parts, compute-sanitizer's trial.
startup_expected() {
  local n total
  n=$(find "$B/bin" -maxdepth 1 -type f 2>/dev/null | grep -c .)
  total=$(($(expected unpack) + n * $(expected "preflight: start") + $(expected "preflight: device")))
  case ",$PARTS," in *,sanitize,*) total=$((total + $(expected "preflight: compute-sanitizer"))) ;; esac
  echo "$total"
}

# The budget line: the expected seconds of the start-up and of each part, their sum against the
# budget, and what is left after the start-up as it went (the rehearsal checks the sum).
say_budget() {
  local p s total each
  total=$(startup_expected)
  each="start-up $total s"
  for p in ${PARTS//,/ }; do
    s=$(part_expected "$p")
    total=$((total + s))
    each="$each, $p $s s"
  done
  say "budget: expected $each: $total s of $BUDGET s; $(left) s left after a start-up of $(elapsed) s"
}
