#!/usr/bin/env bash
# Every rank's numerics across hosts (docs/reliability.md "Numerics"). The launcher's shell sets
# OPENBLAS_CORETYPE to a core other than the one OpenBLAS picks by itself on this CPU:
#  - passed on as a real launcher does (mpirun -x, the harness's default): one start-up line,
#    "the same on all 2 ranks, 2 hosts", no warning;
#  - not passed on (BRT_CLUSTER_EXPORT_ENV=0: h2's rank, started through sshd, gets a clean
#    environment): the start-up lines name each host's core, the warning names the field, ranks
#    and hosts; the run trains (exit 0) and its checkpoint records both fingerprints (ckpt
#    inspect); under train.deterministic=true the same start is refused (exit 2) before any step;
#    resuming that checkpoint with the environment passed on says the numerics changed.
#   numerics.sh BRT_DIST
source "$(dirname "$0")/lib.sh"
# The core OpenBLAS (or brt-dist's policy) picks here with the variable unset, and another one
# this CPU runs.
native=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${TRAIN[@]}" train.steps=1 2>&1 |
         sed -nE 's/^numerics: OpenBLAS [^ ]+ core ([A-Za-z0-9]+) .*/\1/p')
[ -n "$native" ] || fail "no numerics line from a local start"
source "$repo/tests/numerics/blas_cores.sh"
other=""
for c in $(blas_cores); do
  [ "$c" != "$native" ] && [ "$c" != SkylakeX ] && { other=$c; break; }
done
echo "OpenBLAS's own core here: $native; the launcher's: $other"
export OPENBLAS_CORETYPE=$other
unset OPENBLAS_L2_SIZE
cluster_up --hosts 2
steps=(train.steps=4 checkpoint.every=2)

run same.log 120 mpi h1:1,h2:1 2 "${TRAIN[@]}" "${steps[@]}" checkpoint.dir=same
expect_rc 0 "the environment passed on"
expect_text same.log "core $other (OPENBLAS_CORETYPE=$other)"
expect_text same.log "(the same on all 2 ranks, 2 hosts)"
expect_no_text same.log "numerics differ"

BRT_CLUSTER_EXPORT_ENV=0 run differ.log 120 mpi h1:1,h2:1 2 "${TRAIN[@]}" "${steps[@]}" checkpoint.dir=differ
expect_rc 0 "h2 without the launcher's environment"
expect_text differ.log "numerics: the ranks differ"
expect_text differ.log "  rank 0 on h1: OpenBLAS"
expect_text differ.log "core $other (OPENBLAS_CORETYPE=$other)"
expect_text differ.log "  rank 1 on h2: OpenBLAS"
expect_text differ.log "warning: the ranks' numerics differ — OpenBLAS core: $other on rank 0 on h1, $native on rank 1 on h2"
expect_text differ.log "results will differ from a one-process run in the last bits"
expect_text differ.log "step      4/4"
warning=$(grep -m1 "^warning: the ranks' numerics differ" differ.log)
"$bin" ckpt inspect differ/ckpt-00000004.h5 > inspect.log 2>&1 || fail "ckpt inspect: $(tail -3 inspect.log)"
expect_text inspect.log "numerics (the ranks that trained it):"
grep -qE "^    rank 0 on h1: OpenBLAS .* core $other " inspect.log || fail "inspect lacks h1's core: $(grep -A3 numerics inspect.log)"
grep -qE "^    rank 1 on h2: OpenBLAS .* core $native " inspect.log || fail "inspect lacks h2's core: $(grep -A3 numerics inspect.log)"

BRT_CLUSTER_EXPORT_ENV=0 run strict.log 120 mpi h1:1,h2:1 2 "${TRAIN[@]}" "${steps[@]}" checkpoint.dir=strict \
  train.deterministic=true
expect_rc 2 "train.deterministic=true with differing numerics"
expect_text strict.log "train.deterministic=true, but the ranks' numerics differ — OpenBLAS core: $other on rank 0 on h1, $native on rank 1 on h2"
expect_text strict.log "Nothing was started."
expect_no_text strict.log "step      1/4"
[ -z "$(ls strict/*.h5 2>/dev/null)" ] || fail "the refused start wrote a checkpoint"

run resumed.log 120 mpi h1:1,h2:1 2 "${TRAIN[@]}" train.steps=6 checkpoint.every=2 checkpoint.dir=differ
expect_rc 0 "resume with the environment passed on"
expect_text resumed.log "resumed from differ/ckpt-00000004.h5 at step 4"
expect_text resumed.log "was written on other numerics (OpenBLAS core $other / $native in the checkpoint, $other now"
echo "two hosts, launcher OPENBLAS_CORETYPE=$other, h2 started without it:"
echo "  $warning"
echo "the same start under train.deterministic=true: exit 2; its resume with the environment passed on names the change"
