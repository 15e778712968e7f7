#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The ONE script for the GPU machine (docs/gpu.md, "Running the GPU checks"). The pieces live in
# scripts/gpu-check/: bundle.sh (what is carried), run.sh (the run and its deadline),
# preflight.sh (libraries, loads, device, compute-sanitizer), tests.sh (GPU tests, benchmarks,
# planner, sanitizer), peer.sh (the PyTorch peer), python.sh (the tests only the device image
# can run: transformers), common.sh (summary, steps, log archive),
# expected.sh (each step's expected seconds, which the deadline's gates read).
#
# The GPU machine has CUDA 13 (its libraries perhaps only as Python wheels) and PyTorch but none
# of the project's Debian libraries, and no network. So the binaries are built HERE for any
# x86-64 and carried there with the Debian libraries they need, as one file:
#
#   here:   scripts/gpu-check.sh bundle [--from BUILD] [--out FILE]
#             -> build-gpu-bundle/gpu-bundle.tar.xz (its size printed; fails above 48 MiB)
#   there:  scripts/gpu-check.sh run build-gpu-bundle/gpu-bundle.tar.xz all     (one call, 540 s:
#             the figures first, then the tests; or `tests` then `peer` as two calls)
#             (device tool: carry ["build-gpu-bundle/gpu-bundle.tar.xz"]; run from the
#             repository root, the tests and benchmarks read configs/)
#             -> $OUT/summary.txt (a line per step as soon as it ends), device.txt, logs.tar.gz
#   here:   scripts/gpu-check.sh rehearse [BUILD]   (alias: dry-run) the bundle of BUILD run in a
#             bare Debian root with no GPU (tests/bundle/rehearse_foreign_image.sh; root only)
#
# It never changes the GPU's settings.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=gpu-check/common.sh
. "$REPO/scripts/gpu-check/common.sh"
# shellcheck source=gpu-check/expected.sh
. "$REPO/scripts/gpu-check/expected.sh"
# shellcheck source=gpu-check/bundle.sh
. "$REPO/scripts/gpu-check/bundle.sh"
# shellcheck source=gpu-check/preflight.sh
. "$REPO/scripts/gpu-check/preflight.sh"
# shellcheck source=gpu-check/tests.sh
. "$REPO/scripts/gpu-check/tests.sh"
# shellcheck source=gpu-check/peer.sh
. "$REPO/scripts/gpu-check/peer.sh"
# shellcheck source=gpu-check/python.sh
. "$REPO/scripts/gpu-check/python.sh"
# shellcheck source=gpu-check/run.sh
. "$REPO/scripts/gpu-check/run.sh"

case "${1:-}" in
  bundle) shift; bundle_cmd "$@" ;;
  run) shift; run_check "$@" ;;
  rehearse | dry-run) shift; exec "$REPO/tests/bundle/rehearse_foreign_image.sh" "$@" ;;
  *)
    echo "usage: $0 bundle [--from BUILD] [--out FILE]" >&2
    echo "       $0 run [ARCHIVE [all|tests|peer|bench,unit,plan,sanitize,peer]]" >&2
    echo "       $0 rehearse [BUILD]    (alias dry-run)" >&2
    exit 2
    ;;
esac
