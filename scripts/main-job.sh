#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build brt-dist, prepare the bundled
# default corpus (the King James Bible from Debian's bible-kjv, one document per book, with
# held-out books) and train the tiny model on it, printing progress and validation bits/token.
# Extra arguments go to `brt-dist train` (e.g. train.steps=100).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRT_BUILD_TESTS=OFF >/dev/null
ninja -C build/release brt-dist
bin=build/release/launch/brt-dist
$bin prepare --kjv --out runs/kjv/data --config configs/tiny.toml   # vocab = model.vocab
$bin train configs/tiny.toml "$@"
