# shellcheck shell=bash
# Shared by every part of scripts/gpu-check.sh: the summary, the deadline, the step runner and
# the log archive. Sourced; uses the globals set by run_check (run.sh): OUT_DIR, WORK, LOGS,
# DEADLINE, T0, FAILED, SKIPPED.

# One line into summary.txt (and on stdout, so the device tool's output tail shows progress),
# flushed to disk at once: a call killed at its limit still returns every line written.
say() {
  printf '%s\n' "$*" | tee -a "$OUT_DIR/summary.txt"
  sync "$OUT_DIR/summary.txt" 2>/dev/null || true
}

# Lines (stdin) into summary.txt, indented, at most $1 of them, each cut at 240 characters.
say_lines() {
  local n=${1:-10}
  cut -c1-240 | head -n "$n" | sed 's/^/    /' | tee -a "$OUT_DIR/summary.txt"
  sync "$OUT_DIR/summary.txt" 2>/dev/null || true
}

now() { date +%s; }
elapsed() { echo $(($(now) - T0)); }
left() { echo $((DEADLINE - $(now))); }

# Every log under WORK/logs into OUT/logs.tar.gz (text only, so it stays small): after each
# step, so a call cut short still returns the logs of what ran. A log over 4 MiB keeps its
# first and last 2 MiB.
pack_logs() {
  local f
  for f in "$LOGS"/*; do
    [ -f "$f" ] || continue
    if [ "$(stat -c %s "$f")" -gt 4194304 ]; then
      { head -c 2097152 "$f"; printf '\n[... cut by gpu-check ...]\n'; tail -c 2097152 "$f"; } >"$f.cut" &&
        mv -f "$f.cut" "$f"
    fi
  done
  tar -C "$WORK" -czf "$WORK/logs.tar.gz" logs 2>/dev/null && cp -f "$WORK/logs.tar.gz" "$OUT_DIR/logs.tar.gz"
  sync "$OUT_DIR/logs.tar.gz" 2>/dev/null || true
}

# STEP NAME LIMIT LOG CMD...: runs CMD under `timeout -k 10 LIMIT` with its output in LOG, if
# LIMIT (plus the kill grace and the packing) still fits before the deadline; otherwise writes
# "NAME: skipped: needs N s, M s left" and returns 200. Sets STEP_RC and STEP_S. The caller
# writes the step's result line (step_result) with what it parses from LOG.
STEP_RC=0
STEP_S=0
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local rest
  rest=$(left)
  if [ "$rest" -lt $((limit + 15)) ]; then
    say "$name: skipped: needs $limit s, $rest s left"
    SKIPPED=$((SKIPPED + 1))
    STEP_RC=200
    return 200
  fi
  local t
  t=$(now)
  {
    echo "# $name (limit $limit s, at +$(elapsed) s): $*"
    timeout -k 10 "$limit" "$@"
  } >"$log" 2>&1
  STEP_RC=$?
  STEP_S=$(($(now) - t))
  return "$STEP_RC"
}

# What a return code means, for the summary.
rc_words() {
  case "$1" in
    0) echo "rc 0" ;;
    124 | 137) echo "TIMED OUT (rc $1)" ;;
    127) echo "rc 127 (not found or not loadable)" ;;
    13[0-9] | 14[0-9] | 15[0-9]) echo "rc $1 (signal $(($1 - 128)))" ;;
    *) echo "rc $1" ;;
  esac
}

# STEP_RESULT NAME OK DETAILS: the step's one line; OK = 1 passes, else it counts as a failure.
step_result() {
  local name=$1 ok=$2
  shift 2
  if [ "$ok" = 1 ]; then
    say "$name: ok ($STEP_S s) $*"
  else
    say "$name: FAILED ($STEP_S s, $(rc_words "$STEP_RC")) $*"
    FAILED=$((FAILED + 1))
  fi
  pack_logs
}

# A step that was not run for a reason other than the deadline (a binary that does not load,
# no usable device): counted as skipped, so the run is never reported as passed.
skip_step() {
  say "$1: skipped: $2"
  SKIPPED=$((SKIPPED + 1))
}

# The loader's fatal complaints in LOG (a library or symbol version the image lacks). A "weak
# version ... not found" is only a warning (the bundle's libevent on a glibc < 2.36, bundle.sh).
loader_errors() {
  # shellcheck disable=SC2016  # the backquote is the loader's, not an expansion
  grep -E 'error while loading shared libraries|symbol lookup error|version `[^`]*'"'"' not found|=> not found|undefined symbol|cannot open shared object' "$1" |
    grep -v 'weak version' | sort -u
}
