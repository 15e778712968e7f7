#!/usr/bin/env bash
# Cases of the adversarial re-trial (docs/reliability.md), each asserting the message, the exit
# status and what survived:
#   trial.sh BIN seed     a start with another train.seed on a run's checkpoint.dir — at once,
#                         past its steps, and after waiting on the first run's lock — is refused
#                         (exit 2) naming both seeds; the first run's checkpoints are untouched
#   trial.sh BIN plan     a cluster whose nodes overflow names the field and the limit; --cp 2 of a
#                         recurrent variant gives the reason (exit 3)
#   trial.sh BIN doctor   a --checkpoint-dir that does not exist is probed and removed again; a
#                         missing --data-dir and an unwritten --cluster-file are problems (exit 1)
source "$(dirname "$0")/lib.sh"
case_name=$2

case_seed() {
  local args=(train.steps=3 checkpoint.every=3)
  run first.log 60 "${TRAIN[@]}" "${args[@]}" checkpoint.dir=c train.seed=1
  expect_rc 0 "the first run"
  local sha3
  sha3=$(sha "$(ckpt c 3)")
  local want="checkpoint.dir c holds a run with train.seed = 1 (c/ckpt-00000003.h5), and this run has train.seed = 2"
  for steps in 3 6; do
    run other.log 60 "${TRAIN[@]}" "${args[@]}" train.steps=$steps checkpoint.dir=c train.seed=2
    expect_rc 2 "another train.seed on the first run's directory (train.steps=$steps)"
    expect_text other.log "$want"
    expect_text other.log "Give a new run its own checkpoint.dir, or train.seed=1 to continue that one"
    expect_no_text other.log "resumed from"
    expect_clean_error other.log
  done
  [ "$(ls c)" = "$(printf 'ckpt-00000003.h5\nlatest')" ] || fail "the refused runs changed c: $(ls c)"
  [ "$(sha "$(ckpt c 3)")" = "$sha3" ] || fail "ckpt-3 changed"
  verify_ok "$(ckpt c 3)"
  record "trial(seed)" "train.seed=2 on a train.seed=1 run's checkpoint.dir (train.steps 3 and 6)" "$rc" \
    "$(first_line other.log 'holds a run with')" "ckpt-3 sha256 unchanged and verifies; nothing else written"

  # While the first run still trains: the second waits on the lock, then is refused — it does not
  # take the first run's finished checkpoint and exit 0.
  local long=(train.steps=4000 checkpoint.every=2000 log.every=1000)
  rm -f first.rc
  ("${TRAIN[@]}" "${long[@]}" checkpoint.dir=d train.seed=1 > live.log 2>&1; echo $? > first.rc) &
  local first=$!
  for _ in $(seq 200); do grep -q "step " live.log 2> /dev/null && break; sleep 0.05; done
  run waited.log 120 "${TRAIN[@]}" "${long[@]}" checkpoint.dir=d train.seed=2 checkpoint.lock_wait_s=100
  wait "$first"
  [ "$(cat first.rc)" = 0 ] || fail "the first run failed: $(tail -3 live.log)"
  expect_rc 2 "another train.seed after waiting on the first run's lock"
  expect_text waited.log "checkpoint.dir d holds a run with train.seed = 1 (d/ckpt-00004000.h5)"
  verify_ok "$(ckpt d 4000)"
  record "trial(seed after the lock)" "train.seed=2 started while a train.seed=1 run holds d" "$rc" \
    "$(first_line waited.log 'holds a run with')" "the first run finished; its ckpt-4000 verifies"
}

case_plan() {
  local cfg=$here/../../configs/150m.toml cluster=$here/../../configs/clusters/h200-8x8.toml
  sed 's/^nodes *=.*/nodes = 4294967296/' "$cluster" > huge.toml
  run huge.log 30 "$bin" plan "$cfg" --cluster huge.toml --global-batch 64
  expect_rc 1 "a cluster file with 2^32 nodes"
  expect_text huge.log "cluster file huge.toml: field 'nodes' = 4294967296 is more than 1048576"
  expect_no_text huge.log "cluster has no devices"
  sed 's/^nodes *=.*/nodes = 200000/' "$cluster" > many.toml
  run many.log 30 "$bin" plan "$cfg" --cluster many.toml --global-batch 64
  expect_rc 1 "200000 nodes of 8 devices"
  expect_text many.log "nodes × gpus_per_node = 1600000 devices, more than 1048576"
  run cp.log 30 "$bin" plan "$cfg" --cluster "$cluster" --global-batch 64 --cp 2 model.variant=rec:fixed:skip
  expect_rc 3 "--cp 2 with a recurrent variant"
  expect_text cp.log "no layout with CP 2 fits: train.cp = 2 with model.variant = rec:fixed:skip: the recurrent state is updated block after block"
  record "trial(plan)" "nodes = 2^32; 200000 x 8 devices; --cp 2 with rec:fixed:skip" "1, 1, 3" \
    "$(first_line huge.log 'error')" "nothing written"
}

case_doctor() {
  run made.log 120 "$bin" doctor --checkpoint-dir "$work/none/deep/x" --min-free-gb 0
  expect_rc 0 "doctor of a checkpoint dir that does not exist yet"
  expect_text made.log "checkpoint dir $work/none/deep/x does not exist yet: doctor created it to probe it and removed the 3 folder(s) it made"
  expect_text made.log "disk: "
  [ ! -e "$work/none" ] || fail "doctor left $(find "$work/none")"
  run data.log 120 "$bin" doctor --checkpoint-dir "$work/ck" --min-free-gb 0 --data-dir "$work/no-data"
  expect_rc 1 "doctor with a --data-dir that does not exist"
  expect_text data.log "PROBLEM: data dir $work/no-data does not exist on world rank 0"
  run cluster.log 120 "$bin" doctor --checkpoint-dir "$work/ck" --min-free-gb 0 --cluster-file "$work/cl.toml"
  expect_rc 1 "doctor --cluster-file on one host"
  expect_text cluster.log "PROBLEM: --cluster-file $work/cl.toml was not written: the job runs on one host"
  [ ! -e "$work/cl.toml" ] || fail "a cluster file was written"
  record "trial(doctor)" "--checkpoint-dir DIR/none/deep/x; --data-dir that does not exist; --cluster-file on one host" \
    "0, 1, 1" "$(first_line made.log 'does not exist yet')" "no folder left behind; no cluster file"
}

case $case_name in
  seed) case_seed ;;
  plan) case_plan ;;
  doctor) case_doctor ;;
  *) fail "unknown case $case_name" ;;
esac
