#!/usr/bin/env bash
# The main job on a fresh machine: install what brt-dist needs to build and run (not the test
# suite's extras), build brt-dist (CPU backend, its own build folder build/main, so the test
# command's build/release is left alone), prepare the bundled default corpus (the King James
# Bible from Debian's bible-kjv, one document per book, held-out books for validation and test)
# and train the tiny model on it, printing progress and validation bits/token and keeping its
# checkpoint; then print the next commands to try. About 4 minutes on a fresh 2-core machine
# (README). Extra arguments go to `brt-dist train` (e.g. train.steps=100). Rerunning it reuses
# the build, the corpus and the finished run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh run
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
build=build/main
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRT_CUDA=OFF -DBRT_BUILD_TESTS=OFF \
  -DBRT_BUILD_BENCH=OFF >/dev/null
ninja -C "$build" brt-dist
bin=$build/launch/brt-dist
$bin prepare --kjv --out runs/kjv/data --config configs/tiny.toml   # vocab = model.vocab
$bin train configs/tiny.toml "$@"   # run.dir = runs/tiny: metrics.jsonl, ckpt/
ckpt=$(ls -1 runs/tiny/ckpt/ckpt-*.h5 | tail -1)  # the newest (zero-padded step numbers)
cat <<NEXT

Done. The run is in runs/tiny (metrics.jsonl, ckpt/). Next, try:
  $bin eval --checkpoint $ckpt --split test
  $bin generate --checkpoint $ckpt --tokenizer runs/kjv/data/tokenizer.model --prompt "In the beginning" --seed 1
  tools/plot_run.py runs/tiny --out runs/tiny/plots             # loss, bits/token, lr, ... as PNGs
  $bin help train                                   # every flag and config key
NEXT
