# shellcheck shell=bash
# Part `peer` of `gpu-check.sh run` (docs/gpu.md, "The PyTorch peer"): bench_peer.py --brt-dist
# on 150m (B 4) first — the headline ratio —, then bench/peer's fast paths (FlexAttention,
# torch.compile, bf16) checked against its plain float64 path (--verify), then 40m (B 1) and
# 1.3b (B 4): tokens/s, TFLOP/s, MFU against a bf16 8192^3 matmul measured in the same call,
# and brt-dist / peer tokens/s. Each in its own step, with torch.compile's caches in the work
# folder (shared by the steps of one call: the 150m spec warms them). Two halves, so `all` can
# put the first spec among the headline figures and the rest after the unit suites:
#   peer_first  the python check and the first spec;  peer_rest  --verify and the other specs.
# The machine's python3 (PyTorch 2.x) runs it with the machine's own libraries; only brt-dist,
# started by bench_peer through a wrapper, sees the bundle's (LDP) and its Open MPI runtime.
#   PEER_PYTHON   the Python with torch (python3)
#   PEER_VERIFY   the variants of --verify (rec:fixed:skip bst:sh:s4d)
#   PEER_SPECS    "limit_s|bench_peer arguments" entries separated by ';'
#   PEER_ARGS     added to every bench_peer call (the rehearsal: --device cpu --threads 1 --no-peak)

PEER_READY=""  # "ok" once part_peer_first found a usable python3 with torch; else why not

# Whether the peer can run here: brt-dist loads, the device (unless PEER_ARGS runs on the CPU).
peer_cpu() { case " ${PEER_ARGS:-} " in *" --device cpu "*) echo 1 ;; *) echo 0 ;; esac; }

peer_setup() {
  PEER_PY=${PEER_PYTHON:-python3}
  PEER_BENCH=$B/bench/peer/bench_peer.py
  PEER_WRAPPER=$WORK/brt-dist.sh
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$LDP" "$B/bin/brt-dist" >"$PEER_WRAPPER"
  chmod +x "$PEER_WRAPPER"
  mkdir -p "$WORK/torch-cache/inductor" "$WORK/torch-cache/triton"
  PEER_ENV=(env "LD_LIBRARY_PATH=$HOST_LDP" PYTHONUNBUFFERED=1
    "TORCHINDUCTOR_CACHE_DIR=$WORK/torch-cache/inductor" "TRITON_CACHE_DIR=$WORK/torch-cache/triton")
}

# The specs, one per line: "limit|arguments". 150m first (the headline ratio), 1.3b last (the
# likeliest not to fit).
peer_specs() {
  local m150="150|configs/150m.toml train.batch=4 --steps 10" m40="100|configs/40m.toml train.batch=1 --steps 10"
  local b13="180|configs/1.3b.toml train.batch=4 --steps 5 --warmup 2"
  echo "${PEER_SPECS:-"$m150;$m40;$b13"}" | tr ';' '\n'
}

# Spec number N of peer_specs, as a step whose figures reach the summary as they are printed.
peer_spec() {
  local n=$1 spec
  spec=$(peer_specs | sed -n "${n}p")
  [ -n "$spec" ] || return 0
  local args=${spec#*|} log=$LOGS/peer-bench-$n.log
  # shellcheck disable=SC2086  # the argument lists are meant to split
  STEP_LIVE='^(peer: |peer:|brt-dist:|brt-dist / peer|FLOPs/token|bench_peer: error|Traceback)' \
    step "peer $args" "$(expected "peer spec $n")" "${spec%%|*}" "$log" "${PEER_ENV[@]}" "$PEER_PY" "$PEER_BENCH" \
    $args ${PEER_ARGS:-} --brt-dist "$PEER_WRAPPER"
  [ "$STEP_RC" = 200 ] && return
  step_result "peer $args" "$([ "$STEP_RC" = 0 ] && echo 1)"
}

part_peer_first() {
  PEER_READY="not checked"
  needs "peer" brt-dist "$(peer_cpu)" || { PEER_READY="brt-dist or the device (above)"; return; }
  peer_setup
  step "peer python" "$(expected "peer python")" 90 "$LOGS/peer-python.log" "${PEER_ENV[@]}" "$PEER_PY" -c 'import sys, torch
print("python", sys.version.split()[0], sys.executable, "torch", torch.__version__,
      "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
  [ "$STEP_RC" = 200 ] && { PEER_READY="peer python did not run (deadline)"; return; }
  local ok=0
  [ "$STEP_RC" = 0 ] && { [ "$(peer_cpu)" = 1 ] || grep -q 'available True' "$LOGS/peer-python.log"; } && ok=1
  step_result "peer python" "$ok" "$(grep -m1 '^python ' "$LOGS/peer-python.log" | cut -c1-200)"
  if [ "$ok" != 1 ]; then
    tail -3 "$LOGS/peer-python.log" | say_lines 3
    PEER_READY="no usable python3 with torch (peer python)"
    skip_step "peer benchmarks, verify" "$PEER_READY"
    return
  fi
  PEER_READY=ok
  peer_spec 1
}

part_peer_rest() {
  [ "$PEER_READY" = ok ] || return 0  # part_peer_first said why
  local verify=${PEER_VERIFY:-rec:fixed:skip bst:sh:s4d}
  # shellcheck disable=SC2086  # the variant list is meant to split
  step "peer verify" "$(expected "peer verify")" 120 "$LOGS/peer-verify.log" "${PEER_ENV[@]}" "$PEER_PY" \
    "$PEER_BENCH" --verify $verify ${PEER_ARGS:-}
  if [ "$STEP_RC" != 200 ]; then
    step_result "peer verify ($verify)" "$([ "$STEP_RC" = 0 ] && echo 1)"
    grep -E '^(verify |bench_peer: error|Traceback)|Error' "$LOGS/peer-verify.log" | say_lines 8
  fi
  local n total
  total=$(peer_specs | grep -c .)
  for ((n = 2; n <= total; n++)); do peer_spec "$n"; done
}

part_peer() {
  part_peer_first
  part_peer_rest
}
