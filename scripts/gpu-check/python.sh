# shellcheck shell=bash
# Part `python` of `gpu-check.sh run`: the Python tests that skip on the build machine for want
# of what only the device image has (Debian 12 packages no transformers): the `brt-dist export
# --hf` folder through transformers' own AutoModelForCausalLM.from_pretrained(DIR,
# trust_remote_code=True), against `brt-dist eval --token-losses` (tests/python/
# test_hf_transformers.py, docs/huggingface.md). The machine's python3 runs it with the
# machine's libraries; brt-dist is the bundle's, through the peer's wrapper (peer.sh). A test
# that exits 77 (an import missing) is reported as skipped with its reason.

part_python() {
  needs "python hf_transformers" brt-dist 1 || return
  peer_setup
  local log=$LOGS/python-hf-transformers.log
  step "python hf_transformers" "$(expected "python hf_transformers")" 180 "$log" "${PEER_ENV[@]}" \
    "$PEER_PY" tests/python/test_hf_transformers.py "$PEER_WRAPPER"
  [ "$STEP_RC" = 200 ] && return
  if [ "$STEP_RC" = 77 ]; then
    skip_step "python hf_transformers" "$(sed -n 's/^skipped: //p' "$log" | head -1 | cut -c1-200)"
    return
  fi
  step_result "python hf_transformers (export --hf through AutoModelForCausalLM)" "$([ "$STEP_RC" = 0 ] && echo 1)"
  grep -E '^  |Error|error' "$log" | say_lines 6
}
