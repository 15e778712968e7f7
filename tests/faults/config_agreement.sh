#!/usr/bin/env bash
# Ranks started with different configs: an mpirun app context that gives one
# rank another model.d_model (a crash inside Open MPI before), another optim.lr or model.window
# (silently diverging replicas, exit 0 before), another train.steps (the collective timeout
# before). Every case: refused before any collective that depends on the config, exit 2, one
# message naming every differing key and which world ranks have which value, no crash or MPI
# abort; the checkpoints already in checkpoint.dir untouched, and nothing created.
source "$(dirname "$0")/lib.sh"
run good.log 60 "${TRAIN[@]}" train.steps=2 checkpoint.dir=c
expect_rc 0 "a run whose checkpoint must survive"
good_sha=$(sha "$(ckpt c 2)") lock_sha=$(sha c/.brt-dist.lock)
base=("${TRAIN[@]}" train.steps=4 checkpoint.dir=c)
# differ NAME LIMIT_S [mpirun app contexts, separated by ':'] — each context: -np N brt-dist train ...
differ() {
  local name=$1
  shift
  run "$name.log" 60 "${MPIRUN[@]}" "$@"
  expect_rc 2 "$name"
  local want="brt-dist train: error: the ranks were started with different configs"
  expect_text "$name.log" "$want"
  [ "$(grep -cF -- "$want" "$name.log")" -eq 1 ] || fail "$name: the message is printed $(grep -cF -- "$want" "$name.log") times"
  expect_clean_error "$name.log"
  for noise in "Segmentation fault" "double free" "Signal: " "timeout on world rank" "collective timeout"; do
    expect_no_text "$name.log" "$noise"
  done
  expect_no_text "$name.log" "step      1/"
  [ "$secs" -le 15 ] || fail "$name: refused after $secs s"
  [ "$(sha "$(ckpt c 2)")" = "$good_sha" ] || fail "$name: ckpt-2 changed"
  [ ! -e "$(ckpt c 4)" ] && [ "$(sha c/.brt-dist.lock)" = "$lock_sha" ] || fail "$name: the refused job touched c"
}
differ d_model -np 1 "${base[@]}" : -np 1 "${base[@]}" model.d_model=64 model.head_dim=32
expect_text d_model.log "  model.d_model: 32 on world rank 0; 64 on world rank 1"
expect_text d_model.log "  model.head_dim: 16 on world rank 0; 32 on world rank 1"
record "config_agreement(model.d_model)" "mpirun -np 1 train d_model=32 : -np 1 train d_model=64 head_dim=32" "$rc" \
  "$(first_line d_model.log 'model.d_model:')" "ckpt-2 sha256 unchanged; nothing written to c"
differ lr_window -np 2 "${base[@]}" : -np 1 "${base[@]}" optim.lr=0.5 model.window=16
expect_text lr_window.log "  model.window: 8 on world ranks 0-1; 16 on world rank 2"
expect_text lr_window.log "  optim.lr: "
expect_text lr_window.log "; 0.5 on world rank 2"
record "config_agreement(optim.lr, model.window)" "mpirun -np 2 train : -np 1 train optim.lr=0.5 model.window=16" "$rc" \
  "$(first_line lr_window.log 'model.window:')" "ckpt-2 sha256 unchanged; nothing written to c"
differ steps -np 1 "${base[@]}" : -np 1 "${base[@]}" train.steps=6
expect_text steps.log "  train.steps: 4 on world rank 0; 6 on world rank 1"
record "config_agreement(train.steps)" "mpirun -np 1 train steps=4 : -np 1 train steps=6" "$rc" \
  "$(first_line steps.log 'train.steps:')" "refused in $secs s (before: the collective timeout); ckpt-2 sha256 unchanged"
echo "config_agreement: passed"
