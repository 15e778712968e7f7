#!/usr/bin/env bash
# brt-dist plan / doctor on the command line: each bad input is a
# clear error (status and message checked), a good plan exits 0 with TP > 1 marked not
# runnable, doctor passes under mpirun -np 2 and fails on an unwritable checkpoint dir.
# Usage: plan_cli_tests.sh CASE BRT_DIST MPIEXEC   (run from the repository root)
set -u
case_name=$1
brt=$2
mpiexec=${3:-mpirun}
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT

cat >"$tmp/cluster.toml" <<'TOML'
gpus_per_node = 8
nodes = 2
gpu_memory_gb = 80
peak_tflops = 989
intra_node_gbps = 450
inter_node_gbps = 50
TOML
grep -v inter_node_gbps "$tmp/cluster.toml" >"$tmp/missing.toml"
sed 's/gpu_memory_gb = 80/gpu_memory_gb = 0.05/' "$tmp/cluster.toml" >"$tmp/small.toml"

fail() { echo "FAIL: $*"; echo "--- stdout"; cat "$tmp/out"; echo "--- stderr"; cat "$tmp/err"; exit 1; }
run() { "$@" >"$tmp/out" 2>"$tmp/err"; status=$?; }
expect_status() { [ "$status" -eq "$1" ] || fail "expected exit status $1, got $status"; }
expect_in() { grep -q -- "$2" "$tmp/$1" || fail "expected '$2' in $1"; }
expect_in_re() { grep -Eq -- "$2" "$tmp/$1" || fail "expected /$2/ in $1"; }

case $case_name in
  unknown_config)
    run "$brt" plan no-such-model --cluster "$tmp/cluster.toml" --global-batch 16
    expect_status 1
    expect_in err "unknown config 'no-such-model'"
    expect_in err "configs here:.*tiny"
    ;;
  cluster_missing_field)
    run "$brt" plan tiny --cluster "$tmp/missing.toml" --global-batch 16
    expect_status 1
    expect_in err "missing.toml: missing field 'inter_node_gbps'"
    ;;
  cannot_fit)
    # Every layout of 150m with 16 streams needs more than 0.05 GB: status 3, the reason named.
    run "$brt" plan configs/150m.toml --cluster "$tmp/small.toml" --global-batch 16
    expect_status 3
    expect_in out "does not fit: needs"
    expect_in err "no runnable layout fits in 0.1 GB per device"
    # A chosen layout that does not fit, and one that does not exist.
    run "$brt" plan 150m --cluster "$tmp/small.toml" --global-batch 16 --dp 16
    expect_status 3
    expect_in err "no layout with DP 16 fits: does not fit"
    run "$brt" plan 150m --cluster "$tmp/cluster.toml" --global-batch 16 --dp 3
    expect_status 3
    expect_in err "that layout does not exist"
    ;;
  plan_ok)
    run "$brt" plan 150m --cluster "$tmp/cluster.toml" --global-batch 32 train.bucket_mb=25
    expect_status 0
    expect_in out "^16 *1 *1 *2 .* ok$"
    # Tensor-parallel layouts are runnable (brt-dist train --tp), with their TP traffic costed.
    expect_in out "^8 *2 *0 *4 .* ok$"
    # Best first: the first layout line is runnable and fits.
    sed -n 5p "$tmp/out" | grep -q " ok$" || fail "first layout is not the best runnable one"
    ;;
  device_shorthand)
    # --device h100|h200: one node of 8 such GPUs, the counted step and its predicted MFU; with
    # --cluster, the file's device replaced; an unknown GPU refused naming the known ones.
    run "$brt" plan 150m --device h200 --global-batch 32
    expect_status 0
    expect_in out "cluster: one node of 8 h200 (--device h200) — 1 node(s) × 8 device(s), 141.0 GB"
    expect_in out "counted step on h200"
    expect_in_re out "predicted MFU [0-9.]+% of the 989.4 TFLOP/s bf16 peak"
    run "$brt" plan 150m --cluster "$tmp/cluster.toml" --device h100 --global-batch 32
    expect_status 0
    expect_in out "cluster.toml, device h100 (--device) — 2 node(s) × 8 device(s), 80.0 GB"
    expect_in out "counted step on h100"
    run "$brt" plan 150m --device a100 --global-batch 32
    expect_status 2
    expect_in err "--device: device 'a100': the planner knows h100 and h200"
    run "$brt" plan 150m --global-batch 32
    expect_status 2
    expect_in err "--cluster CLUSTER.toml (or --device h100|h200) is required"
    ;;
  measure_rates)
    # The device's kernel-class rates into a cluster file, a short run, and
    # the plan's predicted step time next to the run's measured one.
    run "$brt" plan tiny --measure-rates "$tmp/rates.toml" --seconds 1
    expect_status 0
    expect_in out "measuring kernel-class rates on cpu"
    expect_in_re out "gemm [0-9.]+ GFLOP/s, attention [0-9.]+ GFLOP/s"
    for field in gemm_tflops attention_tflops memory_gbps gpu_memory_gb; do
      grep -Eq "^$field = [0-9.]+" "$tmp/rates.toml" || fail "rates.toml has no $field"
    done
    [ -e "$tmp/rates.toml.tmp" ] && fail "rates.toml.tmp left behind"
    run "$brt" train configs/tiny.toml data.source=synthetic train.steps=8 log.every=1 train.eval_every=0 \
      "log.metrics_path=$tmp/m.jsonl" optim.total_steps=8 run.dir=
    expect_status 0
    run "$brt" plan tiny --cluster "$tmp/rates.toml" --global-batch 4 --measured "$tmp/m.jsonl"
    expect_status 0
    expect_in out "measured rates"
    expect_in_re out "predicted vs measured \(DP 1, TP 1, B 4\): predicted step [0-9.]+ s .* measured [0-9.]+ s .*measured / predicted = [0-9.]+"
    run "$brt" plan tiny --cluster "$tmp/rates.toml" --global-batch 4 --measured "$tmp/none.jsonl"
    expect_status 1
    expect_in err "none.jsonl: cannot open the metrics file"
    run "$brt" plan tiny --measure-rates "$tmp/no-such-dir/r.toml" --seconds 1
    expect_status 1
    expect_in err "cannot write $tmp/no-such-dir/r.toml: No such file or directory"
    ;;
  doctor_ok)
    run "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$brt" doctor --checkpoint-dir "$tmp/ckpt" --min-free-gb 0.001
    expect_status 0
    expect_in out "rank 1 -> host"
    expect_in_re out "rank 1 -> host .*-> device: none \((no CUDA device\)|no usable CUDA device: cudaError[A-Za-z]+ |this build has no CUDA backend\))"
    expect_in out "MPI: Open MPI"
    expect_in_re out "NCCL: ([0-9]+\.[0-9]+\.[0-9]+|not built)"
    expect_in out "BLAS: OpenBLAS"
    expect_in out "group 'world' (2 ranks): all-reduce"
    expect_in out "GB free at"
    expect_in out "sgemm peak"
    expect_in out "all checks passed"
    ;;
  doctor_unwritable)
    mkdir -p "$tmp/ro"
    chmod a-w "$tmp/ro"
    if [ "$(id -u)" -eq 0 ]; then  # root writes anywhere: use a path under a regular file instead
      touch "$tmp/file"
      dir="$tmp/file/ckpt"
    else
      dir="$tmp/ro"
    fi
    run "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$brt" doctor --checkpoint-dir "$dir"
    expect_status 1
    expect_in out "PROBLEM: checkpoint dir .* not writable on 2 rank(s)"
    expect_in out "problems found"
    run "$brt" doctor --checkpoint-dir "$tmp" --min-free-gb 1e9
    expect_status 1
    expect_in out "PROBLEM: only .* GB free"
    ;;
  *)
    echo "unknown case $case_name"; exit 2 ;;
esac
echo "PASS: $case_name"
