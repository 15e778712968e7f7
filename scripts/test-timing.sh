# Stage times and the slowest tests for scripts/run-tests.sh, so that a CI log says where its
# time went. Sourced, not run:
#   timing_stage NAME     ends the stage running (if any) and starts NAME ("" ends the last)
#   ... | timing_tee TAG  passes ctest's output through, keeping a copy under TAG for the report
#   timing_report         prints every stage's minutes and the ten slowest tests; run on EXIT,
#                         so a failed run reports the stages it reached too
timing_dir=$(mktemp -d "${TMPDIR:-/tmp}/brt-test-timing.XXXXXX")
timing_current=""
timing_started=$SECONDS
timing_stage() {
  local now=$SECONDS
  if [ -n "$timing_current" ]; then
    printf '%s\t%d\n' "$timing_current" $((now - timing_started)) >>"$timing_dir/stages"
  fi
  timing_current=$1
  timing_started=$now
}
timing_tee() {
  tee -a "$timing_dir/$1.ctest"
}
timing_report() {
  timing_stage ""
  echo "== Times (minutes)"
  awk -F'\t' '{ printf "  %-24s %6.1f\n", $1, $2 / 60; total += $2 }
              END { printf "  %-24s %6.1f\n", "in all", total / 60 }' "$timing_dir/stages" 2>/dev/null || true
  local logs=("$timing_dir"/*.ctest)
  if [ -e "${logs[0]}" ]; then
    echo "== The ten slowest tests (seconds)"
    # ctest prints each finished test as "  3/693 Test  #12: name ....   Passed   4.21 sec" (or
    # "***Failed", "***Timeout"): the name follows "#N:", the seconds come before "sec".
    awk '/Test +#[0-9]+: / && $NF == "sec" {
           for (i = 1; i <= NF; i++) if ($i ~ /^#[0-9]+:$/) name = $(i + 1)
           tag = FILENAME; sub(/.*\//, "", tag); sub(/\.ctest$/, "", tag)
           printf "%s\t%s\t%s\n", $(NF - 1), tag, name
         }' "${logs[@]}" | sort -t$'\t' -k1,1 -g -r | head -10 |
      awk -F'\t' '{ printf "  %7.1f  %-9s %s\n", $1, $2, $3 }' || true
  fi
  rm -rf "$timing_dir"
}
