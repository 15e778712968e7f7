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

# STEP NAME EXPECT LIMIT LOG CMD...: runs CMD with its output in LOG when twice EXPECT, its
# expected seconds (expected.sh), and the packing still fit before the deadline; otherwise
# writes "NAME: skipped: ..." and returns 200. LIMIT, the step's worst case, is only its kill
# limit (`timeout -k 5`), cut to what is left, so no step runs past the deadline and a gate is
# decided by what a step usually takes, not by its worst case. With STEP_LIVE (a grep
# pattern) the matching lines of CMD's output go to the summary the moment they are printed
# (at most STEP_LIVE_MAX, 12). Sets STEP_RC and STEP_S. The caller writes the step's result
# line (step_result) with what it parses from LOG.
STEP_RC=0
STEP_S=0
step() {
  local name=$1 expect=$2 limit=$3 log=$4
  shift 4
  local rest
  rest=$(left)
  if [ "$rest" -lt $((2 * expect + 15)) ]; then
    say "$name: skipped: expected $expect s, run when $((2 * expect)) s fit; $rest s left"
    SKIPPED=$((SKIPPED + 1))
    STEP_RC=200
    return 200
  fi
  local kill=$limit
  [ "$kill" -gt $((rest - 10)) ] && kill=$((rest - 10))
  local t
  t=$(now)
  if [ -n "${STEP_LIVE:-}" ]; then
    {
      echo "# $name (expected $expect s, killed at $kill s, at +$(elapsed) s): $*"
      timeout -k 5 "$kill" "$@"
    } 2>&1 | tee "$log" | live_lines "$STEP_LIVE" "${STEP_LIVE_MAX:-12}"
    STEP_RC=${PIPESTATUS[0]}
  else
    {
      echo "# $name (expected $expect s, killed at $kill s, at +$(elapsed) s): $*"
      timeout -k 5 "$kill" "$@"
    } >"$log" 2>&1
    STEP_RC=$?
  fi
  STEP_S=$(($(now) - t))
  return "$STEP_RC"
}

# Lines of stdin matching PATTERN into the summary as they come, indented, at most MAX.
live_lines() {
  local pattern=$1 max=$2 n=0 line
  grep --line-buffered -v '^# ' | grep --line-buffered -E "$pattern" | while IFS= read -r line; do
    n=$((n + 1))
    [ "$n" -le "$max" ] && say "    ${line:0:240}"
  done
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
