#!/usr/bin/env bash
# brt-dist train under mpirun (tests/core/dp): usage: cli_tests.sh CASE MPIEXEC BRT_DIST CONFIG_DIR
#   ranks:  DP = 2 runs, only world rank 0 prints progress and writes the metrics file, and the
#           loss equals the one-process run on the same 4 global streams to 1e-4;
#   tp:     --tp 2 (DP = 1, AdamW) runs and gives the one-process loss to 1e-4; --tp 4 on 2
#           ranks is refused once with status 2;
#   tp_bst: the same for a BST model (bst:mf:unstructured, SSM features and heads sharded), and
#           d_model = 36 (Ds = 9) refused at --tp 2 naming the SSM features.
set -u
case_name=$1 mpiexec=$2 brt=$3
run_dir=$(mktemp -d)
trap 'rm -rf "$run_dir"' EXIT
cd "$run_dir"
cat > small.toml <<'TOML'
[model]
variant = "rec:lstm:dual"
layers = 2
d_model = 32
heads = 2
head_dim = 16
d_ff = 64
vocab = 64
seq_len = 32
window = 8
state_size = 8
recurrent_layers = [1]
[optim]
kind = "adafactor"
[train]
seed = 5
steps = 6
peak_gflops = 1
[log]
every = 1
TOML
mpirun=("$mpiexec" --allow-run-as-root --oversubscribe -np 2)
fail() { echo "FAIL: $*"; exit 1; }

case $case_name in
  ranks)
    "${mpirun[@]}" "$brt" train small.toml train.batch=2 log.metrics_path=dp.jsonl > dp.out 2>&1 ||
      { cat dp.out; fail "DP=2 run exited non-zero"; }
    "$brt" train small.toml train.batch=4 > one.out 2>&1 || { cat one.out; fail "one-process run failed"; }
    [ "$(grep -c '^step ' dp.out)" = 6 ] || { cat dp.out; fail "expected 6 progress lines (rank 0 only)"; }
    [ "$(grep -c '^config:' dp.out)" = 1 ] || fail "the config line should be printed once"
    grep -q "data parallel: 2 ranks x 2 streams = 4 global streams" dp.out || fail "no DP summary line"
    [ "$(grep -c '"step"' dp.jsonl)" -ge 6 ] || fail "metrics file not written by rank 0"
    paste <(grep '^step ' dp.out | awk '{print $5}') <(grep '^step ' one.out | awk '{print $5}') |
      awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $2 + 1e-4) { print "loss differs: " $0; bad = 1 } }
           END { exit bad }' || fail "DP=2 loss curve differs from one process"
    ;;
  tp)
    "${mpirun[@]}" "$brt" train small.toml --tp 2 optim.kind=adamw train.batch=4 > tp.out 2>&1 ||
      { cat tp.out; fail "TP=2 run exited non-zero"; }
    "$brt" train small.toml optim.kind=adamw train.batch=4 > one.out 2>&1 || { cat one.out; fail "one-process run failed"; }
    grep -q "tensor parallel: 2 ranks per replica" tp.out || { cat tp.out; fail "no TP summary line"; }
    [ "$(grep -c '^step ' tp.out)" = 6 ] || { cat tp.out; fail "expected 6 progress lines (rank 0 only)"; }
    paste <(grep '^step ' tp.out | awk '{print $5}') <(grep '^step ' one.out | awk '{print $5}') |
      awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $2 + 1e-4) { print "loss differs: " $0; bad = 1 } }
           END { exit bad }' || fail "TP=2 loss curve differs from one process"
    "${mpirun[@]}" "$brt" train small.toml --tp 4 > bad.out 2>&1
    status=$?
    [ $status = 2 ] || { cat bad.out; fail "expected status 2 for --tp 4 on 2 ranks, got $status"; }
    [ "$(grep -c 'does not fit' bad.out)" = 1 ] || { cat bad.out; fail "refusal not printed once"; }
    ;;
  tp_bst)
    bst=(model.variant=bst:mf:unstructured model.ssm_state=8 model.ctx_states=4 optim.kind=adamw train.batch=4)
    "${mpirun[@]}" "$brt" train small.toml --tp 2 "${bst[@]}" > tp.out 2>&1 ||
      { cat tp.out; fail "BST TP=2 run exited non-zero"; }
    "$brt" train small.toml "${bst[@]}" > one.out 2>&1 || { cat one.out; fail "one-process BST run failed"; }
    [ "$(grep -c '^step ' tp.out)" = 6 ] || { cat tp.out; fail "expected 6 progress lines (rank 0 only)"; }
    paste <(grep '^step ' tp.out | awk '{print $5}') <(grep '^step ' one.out | awk '{print $5}') |
      awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $2 + 1e-4) { print "loss differs: " $0; bad = 1 } }
           END { exit bad }' || fail "BST TP=2 loss curve differs from one process"
    "${mpirun[@]}" "$brt" train small.toml --tp 2 "${bst[@]}" model.d_model=36 > bad.out 2>&1
    status=$?
    [ $status = 2 ] || { cat bad.out; fail "expected status 2 for Ds = 9 at --tp 2, got $status"; }
    grep -q 'BST SSM features Ds) = 9 is not divisible by 2' bad.out || { cat bad.out; fail "refusal does not name Ds"; }
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
