# shellcheck shell=bash
# Part `python` of `gpu-check.sh run`: the Python tests that skip on the build machine for want
# of what only the device image has (Debian 12 packages no transformers, and has no GPU):
#  - the `brt-dist export --hf` folder through transformers' own
#    AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True), against `brt-dist eval
#    --token-losses` (tests/python/test_hf_transformers.py, docs/huggingface.md);
#  - brt_dist.torch on CUDA against the CPU, every variant, float64/float32/bfloat16
#    (tests/python/test_torch_device.py cuda, docs/python.md "Devices").
# The machine's python3 runs them with the machine's libraries; brt-dist is the bundle's,
# through the peer's wrapper (peer.sh). A test that exits 77 (an import or the device missing)
# is reported as skipped with its reason.

part_python() {
  needs "python hf_transformers" brt-dist 1 || return
  peer_setup
  python_step "python torch_cuda" "brt_dist.torch on CUDA against the CPU (14 variants)" 120 \
    tests/python/test_torch_device.py cuda
  python_step "python hf_transformers" "export --hf through AutoModelForCausalLM" 180 \
    tests/python/test_hf_transformers.py "$PEER_WRAPPER"
}

# python_step NAME TITLE LIMIT SCRIPT ARGS...: one test script as a step of its expected time.
python_step() {
  local name=$1 title=$2 limit=$3 log
  shift 3
  log=$LOGS/${name// /-}.log
  step "$name" "$(expected "$name")" "$limit" "$log" "${PEER_ENV[@]}" "$PEER_PY" "$@"
  [ "$STEP_RC" = 200 ] && return
  if [ "$STEP_RC" = 77 ]; then
    skip_step "$name" "$(sed -n 's/^skipped: //p' "$log" | head -1 | cut -c1-200)"
    return
  fi
  step_result "$name ($title)" "$([ "$STEP_RC" = 0 ] && echo 1)"
  grep -E '^  |Error|error' "$log" | say_lines 6
}
