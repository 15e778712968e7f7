# shellcheck shell=bash
# Shared by the multi-host tests (tests/cluster, `ctest -L cluster`): starts a cluster with the
# harness (cluster.sh) for this test and always stops it on exit, pass or fail, then runs
# brt-dist on it. Source with the brt-dist binary as $1, then `cluster_up [--hosts N] [--slurm]`.
# A test exits 77 (skipped, with the harness's reason on stderr) where namespaces cannot be
# created. Each fault case ends with one line for the record:
#   FAULT <case> | injected: ... | exit: N after S s | printed: ... | survived: ...
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/cluster.sh"
bin=$(realpath "$1")
config=$repo/configs/tiny.toml
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
unset BRT_FAULT_INJECT
# The fault suite's small model (tests/faults/lib.sh), one stream per rank.
SMALL=(model.layers=2 model.recurrent_layers=[1] model.d_model=32 model.heads=2 model.head_dim=16
       model.d_ff=64 model.vocab=64 model.seq_len=32 model.window=8 model.state_size=8
       train.batch=1 train.eval_every=0 train.peak_gflops=1 log.every=1 data.source=synthetic
       optim.warmup=2 log.metrics_path= run.dir=)
TRAIN=("$bin" train "$config" "${SMALL[@]}")

# The full set (CMake passes BRT_CLUSTER_TIER=full) runs only when asked for.
if [ "${BRT_CLUSTER_TIER:-}" = full ] && [ "${BRT_CLUSTER_FULL:-0}" != 1 ]; then
  echo "SKIP: part of the full multi-host set; run it with BRT_CLUSTER_FULL=1 ctest -L cluster"
  exit 77
fi

work=""
cluster_test_cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -n "$work" ] && [ -d "$work" ]; then
    echo "--- logs (test failed) ---" >&2
    for f in "$work"/*.log "$work"/*.out; do [ -f "$f" ] && { echo "== $f"; tail -30 "$f"; } >&2; done
    cluster_procs >&2
  fi
  cd /
  cluster_stop
  exit "$rc"
}
trap cluster_test_cleanup EXIT

# Starts the cluster (options as cluster.sh start) and enters $work, a folder on its shared
# file system; exits 77 where the harness cannot run here.
cluster_up() {
  local base=${BRT_CLUSTER_BASE:-/var/tmp} rc=0
  cluster_start "$(mktemp -d "$base/brt-cluster-XXXXXX")" "$@" || rc=$?
  if [ $rc -eq 77 ]; then echo "SKIP: multi-host tests need network namespaces (see above)"; exit 77; fi
  [ $rc -eq 0 ] || fail "the cluster harness did not start (status $rc)"
  [ -f "$CLUSTER_DIR/slurm/slurm.conf" ] && export SLURM_CONF=$CLUSTER_DIR/slurm/slurm.conf
  work=$CLUSTER_DIR/shared/work
  mkdir -p "$work" && cd "$work" || fail "no work folder"
  echo "cluster: $(cluster_hosts | paste -sd' ') at $(cluster_get net).0/24, shared $CLUSTER_DIR/shared"
}

fail() { echo "FAIL: $*" >&2; exit 1; }

# The launcher's environment for the ranks on the other hosts, as a real launch passes it: Slurm
# exports the submitting shell's environment by default (--export=ALL), and with mpirun the
# operator names what the ranks need (`-x VAR`, or a site's mca_base_env_list). Over ssh a rank
# would otherwise get sshd's clean environment, and so, e.g., OpenBLAS's own core where the
# launcher's shell sets OPENBLAS_CORETYPE (docs/reliability.md "Numerics"). The variables that
# decide a rank's numerics and threads, each as `-x NAME` when set; none with
# BRT_CLUSTER_EXPORT_ENV=0 (the test that checks the numerics warning starts ranks without it).
launcher_env() {
  [ "${BRT_CLUSTER_EXPORT_ENV:-1}" = 0 ] && return 0
  local name
  for name in OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS OMP_NUM_THREADS OMP_WAIT_POLICY; do
    [ -n "${!name+x}" ] && printf -- '-x %s ' "$name"
  done
  return 0
}

# on HOST CMD...: CMD on HOST, in the current folder.
on() { cluster_exec "$@"; }
# mpi HOSTS NP CMD...: `mpirun --host HOSTS -np NP CMD` started on h1 (the operator's shell).
mpi() {
  local hosts=$1 np=$2
  shift 2
  # shellcheck disable=SC2046  # launcher_env's words are separate arguments
  cluster_exec h1 mpirun $(launcher_env) --host "$hosts" -np "$np" "$@"
}
# The command line `on`/`mpi` run, for `timeout` (which runs programs, not functions).
on_command() {
  local host=$1
  shift
  echo nsenter -t "$(cluster_host_pid "$host")" --net --uts --mount --wd="$PWD" --
}

# run LOG LIMIT CMD...: CMD (a program, or `on HOST ...` / `mpi HOSTS NP ...`) with its output
# in LOG; sets $rc and $secs; fails past LIMIT s.
run() {
  local log=$1 limit=$2
  shift 2
  local -a enter
  case $1 in
    on) read -r -a enter <<< "$(on_command "$2")"; set -- "${enter[@]}" "${@:3}" ;;
    mpi) read -r -a enter <<< "$(on_command h1)"
         # shellcheck disable=SC2046
         set -- "${enter[@]}" mpirun $(launcher_env) --host "$2" -np "$3" "${@:4}" ;;
  esac
  local t0
  t0=$(date +%s%N)
  timeout --kill-after=5 "$limit" "$@" > "$log" 2>&1
  rc=$?
  secs=$(( ($(date +%s%N) - t0) / 1000000000 ))
  [ $rc -ne 124 ] || [ "${ALLOW_124:-0}" = 1 ] || fail "$* ran past ${limit} s"
}

expect_rc() { [ "$rc" -eq "$1" ] || fail "expected exit $1, got $rc ($2)"; }
expect_text() { grep -qF -- "$2" "$1" || fail "$1 lacks: $2"; }
expect_no_text() { ! grep -qF -- "$2" "$1" || fail "$1 contains: $2"; }
first_line() { grep -m1 -E "$2" "$1" | cut -c1-220; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
ckpt() { printf '%s/ckpt-%08d.h5' "$1" "$2"; }
verify_ok() { "$bin" ckpt verify "$1" > /dev/null 2>&1 || fail "ckpt verify fails on $1"; }
record() { echo "FAULT $1 | injected: $2 | exit: $3 | printed: $4 | survived: $5"; }
# Losses of the train events in a metrics file, one "step loss" per line.
losses() { grep '"event":"train"' "$1" | sed -E 's/.*"step":([0-9]+),"loss":([^,]+),.*/\1 \2/'; }
# same_losses REF OTHER [FROM_STEP]: every loss OTHER logged after FROM_STEP equals REF's at the
# same step, bit for bit in its printed form.
same_losses() {
  local bad
  bad=$(awk -v s="${3:-0}" 'NR == FNR { want[$1] = $2; next }
        { n++; if ($1 <= s || !($1 in want) || want[$1] != $2) print "step " $1 ": " $2 " vs " want[$1] }
        END { if (n == 0) print "no steps" }' <(losses "$1") <(losses "$2"))
  [ -z "$bad" ] || fail "$2 differs from $1 after step ${3:-0}: $(echo "$bad" | head -3)"
}
# shrunk_run_is_exact STEPS LAUNCH...: after a restart on fewer ranks (brt-dist launch --min-dp,
# train.grad_accum = 2), from the step the relaunch resumed at ($from) every loss it logged and
# the final checkpoint equal the same checkpoint resumed by hand at that size (LAUNCH, possibly
# none, starts it), and the final data cursors equal the uninterrupted run's (ref/): no sample
# skipped or repeated.
shrunk_run_is_exact() {
  local steps=$1
  shift
  from=$(sed -nE 's/.*attempt 2 trains again: resumed at step ([0-9]+),.*/\1/p' fault.log)
  [ -n "$from" ] || fail "no resume step in fault.log"
  run small.log 120 "$@" "${TRAIN[@]}" "${args[@]}" train.grad_accum=2 --resume "$(ckpt c "$from")" \
    checkpoint.dir="$work/small" log.metrics_path="$work/small.jsonl"
  expect_rc 0 "the same checkpoint resumed by hand at the smaller size"
  # The relaunch's steps (the first attempt logged up to step $from in the same file).
  grep '"event":"train"' faulty.jsonl | while read -r line; do
    [ "$(echo "$line" | sed -E 's/.*"step":([0-9]+).*/\1/')" -gt "$from" ] && echo "$line"
  done > relaunch.jsonl
  same_losses small.jsonl relaunch.jsonl "$from"
  "$bin" ckpt diff "$(ckpt small "$steps")" "$(ckpt c "$steps")" > /dev/null ||
    fail "the final checkpoint differs from the hand-made resume's"
  # The data cursor of every global stream and the batches the step guard skips; the guard's
  # loss windows differ with the sums' order.
  "$bin" ckpt diff "$(ckpt ref "$steps")" "$(ckpt c "$steps")" > cursors.txt
  ! grep -qE '^differs: /data/(cursor|skip_batches)' cursors.txt ||
    fail "the data cursors differ from the uninterrupted run's: $(grep /data/ cursors.txt | head -3)"
  "$bin" ckpt inspect "$(ckpt c "$steps")" > inspect.txt  # a file: grep -q would cut the pipe (pipefail)
  grep -q '/data/cursor' inspect.txt || fail "no /data/cursor in the checkpoint"
}
# close_losses REF OTHER RTOL: the same steps, each loss within RTOL (relative) of REF's.
close_losses() {
  local worst
  worst=$(awk -v tol="$3" 'NR == FNR { want[$1] = $2; next }
        { n++; if (!($1 in want)) { print "missing step " $1; exit }
          d = ($2 - want[$1]) / want[$1]; if (d < 0) d = -d; if (d > m) m = d }
        END { if (n == 0) print "no steps"; else if (m > tol) print "max relative difference " m; else print "ok " m }' \
        <(losses "$1") <(losses "$2"))
  case $worst in ok*) echo "${worst#ok }" ;; *) fail "$2 vs $1: $worst (tolerance $3)" ;; esac
}

# Processes of the job left on the hosts: ranks (and their abort helpers), mpirun, orted,
# srun and slurmstepd. Daemons (sshd, munged, slurmd) and ssh sessions are not the job's.
job_procs() { cluster_procs "$@" | grep -E "^\S+ [0-9]+ (\S*/)?(brt-dist|mpirun|orted|srun|slurmstepd)([: ]|$)" || true; }
# wait_no_job_procs LIMIT_S: until none is left; fails naming them after LIMIT_S.
wait_no_job_procs() {
  local left=""
  for _ in $(seq $(($1 * 4))); do
    left=$(job_procs)
    [ -z "$left" ] && return 0
    sleep 0.25
  done
  fail "still running after $1 s: $left"
}

# start_job LOG CMD...: as `run`, in the background (at most 300 s); $job is its PID, $job_t0
# its start (ns).
start_job() {
  local log=$1
  shift
  local -a enter
  case $1 in
    on) read -r -a enter <<< "$(on_command "$2")"; set -- "${enter[@]}" "${@:3}" ;;
    mpi) read -r -a enter <<< "$(on_command h1)"
         # shellcheck disable=SC2046
         set -- "${enter[@]}" mpirun $(launcher_env) --host "$2" -np "$3" "${@:4}" ;;
  esac
  job_t0=$(date +%s%N)
  # The status goes outside the shared file system, which a test may fill. A subshell, so that
  # a launcher killed by a signal is reported by its status, not by this shell's "Killed".
  job_rc=$CLUSTER_DIR/job.rc
  rm -f "$job_rc" "$log"  # an earlier start's lines must not be read as this one's
  (timeout --kill-after=5 300 "$@" > "$log" 2>&1; echo $? > "$job_rc") &
  job=$!
}
# job_process PGREP_MATCH...: the PID of the nearest of $job's descendants that pgrep's match
# (e.g. `-x mpirun`, `-f -- "^$bin launch"`) selects. Never a machine-wide pgrep: other tests
# run beside this one (ctest -j2) with processes of the same names.
job_process() {
  local queue=("$job") pid found
  while [ ${#queue[@]} -gt 0 ]; do
    pid=${queue[0]}
    queue=("${queue[@]:1}")
    found=$(pgrep -P "$pid" "$@" | head -1)
    [ -n "$found" ] && { echo "$found"; return 0; }
    # shellcheck disable=SC2207  # PIDs are single words
    queue+=($(pgrep -P "$pid"))
  done
  echo "job_process: no descendant of job $job matches: $*" >&2
  return 1
}
# wait_text LOG TEXT LIMIT_S: until LOG holds TEXT; fails after LIMIT_S (or when $job ended).
wait_text() {
  for _ in $(seq $(($3 * 20))); do
    grep -qF -- "$2" "$1" 2> /dev/null && return 0
    kill -0 "$job" 2> /dev/null || { grep -qF -- "$2" "$1" && return 0; fail "the job ended before printing '$2'"; }
    sleep 0.05
  done
  fail "no '$2' in $1 after $3 s"
}
now_ns() { date +%s%N; }
# wait_job LIMIT_S: waits for $job; sets $rc and $ended (ns); fails after LIMIT_S.
wait_job() {
  for _ in $(seq $(($1 * 10))); do
    kill -0 "$job" 2> /dev/null || break
    sleep 0.1
  done
  kill -0 "$job" 2> /dev/null && fail "the job has not ended after $1 s"
  ended=$(now_ns)
  wait "$job"
  rc=$(cat "$job_rc")
}
secs_between() { echo $(( ($2 - $1) / 1000000000 )); }

# reference_and_first_steps LAUNCH...: the uninterrupted reference run (ref/, ref.jsonl) and the
# first two steps into c/, each `LAUNCH ${TRAIN[@]} ${args[@]}` (LAUNCH as for `run`, or none);
# sets $sha2, ckpt-2's sha256, which every fault case must leave unchanged.
reference_and_first_steps() {
  run ref.log 120 "$@" "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/ref" log.metrics_path="$work/ref.jsonl"
  expect_rc 0 "reference run"
  run first.log 120 "$@" "${TRAIN[@]}" "${args[@]}" train.steps=2 checkpoint.dir="$work/c"
  expect_rc 0 "first two steps"
  sha2=$(sha "$(ckpt c 2)")
}
# pause_then SPEC ACTION...: starts "${faulty[@]}" "${extra[@]}" (set by the caller) under
# BRT_FAULT_INJECT=SPEC, waits for its injection line (a pause, or a stop), notes the time in
# $injected_at and runs ACTION (a function looks up what it acts on only then).
pause_then() {
  export BRT_FAULT_INJECT=$1
  shift
  start_job fault.log "${faulty[@]}" "${extra[@]}"
  wait_text fault.log "fault injection: " 60
  injected_at=$(now_ns)
  "$@"
}
# resumes_bit_exactly LAUNCH...: after a fault, ckpt-2 still has $sha2 and the newest checkpoint
# ($newest) verifies; the next start, `LAUNCH ${TRAIN[@]} ${args[@]}` into c/, resumes ($from: its
# step) and every later loss and the final checkpoint equal the reference run's.
resumes_bit_exactly() {
  [ "$(sha "$(ckpt c 2)")" = "$sha2" ] || fail "ckpt-2 changed"
  newest=$(ls c/ckpt-*.h5 | sort | tail -1)
  verify_ok "$newest"
  unset BRT_FAULT_INJECT
  run resumed.log 120 "$@" "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/c" log.metrics_path="$work/resumed.jsonl"
  expect_rc 0 "the start after the fault"
  from=$(sed -nE 's/^resumed from .*ckpt-0*([0-9]+)\.h5 at step.*/\1/p' resumed.log)
  [ -n "$from" ] || fail "the next start did not resume: $(head -20 resumed.log)"
  same_losses ref.jsonl resumed.jsonl "$from"
  "$bin" ckpt diff "$(ckpt ref 8)" "$(ckpt c 8)" > /dev/null || fail "the final checkpoint differs from the uninterrupted run's"
}
