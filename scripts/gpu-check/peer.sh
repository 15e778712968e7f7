# shellcheck shell=bash
# Part `peer` of `gpu-check.sh run` (docs/gpu.md, "The PyTorch peer"): bench/peer's fast paths
# (FlexAttention, torch.compile, bf16) checked against its plain float64 path, then
# bench_peer.py --brt-dist on 150m (B 4), 40m (B 1) and 1.3b (B 4): tokens/s, TFLOP/s, MFU
# against a bf16 8192^3 matmul measured in the same call, and brt-dist / peer tokens/s. Each in its own
# step, with torch.compile's caches in the work folder (shared by the steps of one call).
# The machine's python3 (PyTorch 2.x) runs it with the machine's own libraries; only brt-dist,
# started by bench_peer through a wrapper, sees the bundle's (LDP) and its Open MPI runtime.
#   PEER_PYTHON   the Python with torch (python3)
#   PEER_VERIFY   the variants of --verify (rec:fixed:skip bst:sh:s4d)
#   PEER_SPECS    "limit_s|bench_peer arguments" entries separated by ';'
#   PEER_ARGS     added to every bench_peer call (the rehearsal: --device cpu --threads 1 --no-peak)

part_peer() {
  local cpu=0
  case " ${PEER_ARGS:-} " in *" --device cpu "*) cpu=1 ;; esac
  needs "peer" brt-dist "$cpu" || return
  local py=${PEER_PYTHON:-python3} bench=$B/bench/peer/bench_peer.py wrapper=$WORK/brt-dist.sh
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$LDP" "$B/bin/brt-dist" >"$wrapper"
  chmod +x "$wrapper"
  mkdir -p "$WORK/torch-cache/inductor" "$WORK/torch-cache/triton"
  local pyenv=(env "LD_LIBRARY_PATH=$HOST_LDP" PYTHONUNBUFFERED=1
    "TORCHINDUCTOR_CACHE_DIR=$WORK/torch-cache/inductor" "TRITON_CACHE_DIR=$WORK/torch-cache/triton")
  step "peer python" 90 "$LOGS/peer-python.log" "${pyenv[@]}" "$py" -c 'import sys, torch
print("python", sys.version.split()[0], sys.executable, "torch", torch.__version__,
      "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
  [ "$STEP_RC" = 200 ] && return
  local ok=0
  [ "$STEP_RC" = 0 ] && { [ "$cpu" = 1 ] || grep -q 'available True' "$LOGS/peer-python.log"; } && ok=1
  step_result "peer python" "$ok" "$(grep -m1 '^python ' "$LOGS/peer-python.log" | cut -c1-200)"
  if [ "$ok" != 1 ]; then
    tail -3 "$LOGS/peer-python.log" | say_lines 3
    skip_step "peer verify, benchmarks" "no usable python3 with torch (peer python)"
    return
  fi
  local verify=${PEER_VERIFY:-rec:fixed:skip bst:sh:s4d}
  # shellcheck disable=SC2086  # the variant and argument lists are meant to split
  step "peer verify" 120 "$LOGS/peer-verify.log" "${pyenv[@]}" "$py" "$bench" --verify $verify ${PEER_ARGS:-}
  if [ "$STEP_RC" != 200 ]; then
    step_result "peer verify ($verify)" "$([ "$STEP_RC" = 0 ] && echo 1)"
    grep -E '^(verify |bench_peer: error|Traceback)|Error' "$LOGS/peer-verify.log" | say_lines 8
  fi
  # 150m first (the headline ratio), 1.3b last (the likeliest not to fit the budget).
  local m150="150|configs/150m.toml train.batch=4 --steps 10" m40="100|configs/40m.toml train.batch=1 --steps 10"
  local b13="180|configs/1.3b.toml train.batch=4 --steps 5 --warmup 2"
  local specs=${PEER_SPECS:-"$m150;$m40;$b13"}
  local spec n=0 IFS=';'
  for spec in $specs; do
    IFS=' '
    n=$((n + 1))
    local args=${spec#*|} log=$LOGS/peer-bench-$n.log
    # shellcheck disable=SC2086
    step "peer $args" "${spec%%|*}" "$log" "${pyenv[@]}" "$py" "$bench" $args ${PEER_ARGS:-} --brt-dist "$wrapper"
    [ "$STEP_RC" = 200 ] && continue
    step_result "peer $args" "$([ "$STEP_RC" = 0 ] && echo 1)"
    grep -E '^(peer: |peer:|brt-dist:|brt-dist / peer|FLOPs/token|bench_peer: error|Traceback)' "$log" | say_lines 8
  done
}
