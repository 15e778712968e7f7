#!/usr/bin/env bash
# The rehearsal of a foreign image (docs/gpu.md, "Running the GPU checks"; ctest -L bundle):
# the real bundle of BUILD (scripts/gpu-check.sh bundle --from BUILD) unpacked and run in a bare
# Debian 12 root (debootstrap --variant=minbase: glibc and libstdc++, none of our Debian
# libraries, no xz, no python, no GPU), as the GPU machine would run it:
#   1. `gpu-check.sh run ARCHIVE all` (the one call), with an nvidia-smi that lists a GPU the
#      runtime cannot use (so BRT_REQUIRE_GPU=1), must resolve every library (CUDA's from a
#      stand-in of the machine's PyTorch venv, /opt/torch/.venv/.../nvidia/cu13/lib, bound
#      read-only from /usr/local/cuda/lib), start every binary, find the device unusable WITH a
#      CUDA error name, skip every GPU step with the figures' steps first, exit non-zero and leave
#      exactly summary.txt, device.txt, logs.tar.gz; its budget line's arithmetic must hold: the
#      default part list (tests) expected within 90% of its 400 s, the headline figures (start-up,
#      bench, the peer's first spec) within half of all's 540 s;
#   2. `BRT_GPU_CHECK_CPU=1 gpu-check.sh run ARCHIVE peer,plan` (the old dry run): bench/peer and
#      the planner on the CPU against the bundled brt-dist and Open MPI runtime, must pass.
# Python and torch come from this machine, read-only at /host, started by this machine's loader
# on this machine's libraries (the stand-in for the GPU machine's python3), so the root itself
# stays bare and brt-dist, started from Python, still loads only from the root and the bundle.
# Everything runs in a private mount namespace (its mounts vanish with it). The root is cached
# in BUILD/tests/bundle/foreign-root (about a minute to make; reused while its stamp is there).
#
# usage: rehearse_foreign_image.sh [BUILD]   (default build/release; exit 77 = skipped: needs
# root, debootstrap, patchelf, unshare and a CUDA build)
#   BRT_REHEARSAL_ARCHIVE=FILE  rehearse that archive instead of bundling BUILD
#   BRT_REHEARSAL_DIR=DIR       where the root and the bundle are kept (BUILD/tests/bundle)
#   BRT_REHEARSAL_CUDA_LIB=DIR  the CUDA libraries shown as the venv's (/usr/local/cuda/lib)
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$repo/build/release}" 2>/dev/null && pwd) || { echo "rehearsal: no build folder ${1:-}" >&2; exit 2; }
cache=${BRT_REHEARSAL_DIR:-$build/tests/bundle}
root=$cache/foreign-root
venv_lib=opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu13/lib
cuda_lib=${BRT_REHEARSAL_CUDA_LIB:-/usr/local/cuda/lib}
t0=$(date +%s)

skip() { echo "rehearsal: SKIPPED: $*"; exit 77; }
fail() { echo "rehearsal: FAILED: $*"; failures=$((failures + 1)); }
failures=0

[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, chroot, mounts)"
command -v debootstrap >/dev/null || skip "no debootstrap (scripts/install-deps.sh installs it)"
command -v patchelf >/dev/null || skip "no patchelf (scripts/install-deps.sh installs it)"
unshare -m --propagation private true 2>/dev/null || skip "cannot make a mount namespace (unshare -m)"
if [ ! -x "$build/launch/brt-dist" ] || [ ! -x "$build/tests/kernels/cuda/test_cuda_kernels" ]; then
  skip "no CUDA build in $build"
fi
[ -e "$cuda_lib/libcublas.so.13" ] || skip "no CUDA 13 libraries in $cuda_lib"

# Nothing may be mounted under the root when it is made or cleaned (a leftover bind of / would
# be deleted through).
mounted_under() { awk -v r="$1" '$5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo; }
[ -z "$(mounted_under "$root")" ] || { echo "rehearsal: mounts left under $root; unmount them first" >&2; exit 1; }

# The Debian registry apt uses (deb822 or one-line sources), for debootstrap.
mirror() {
  local m
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '/^URIs:/ {print $2}' | grep -v security | head -1)
  [ -n "$m" ] || m=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  echo "${m:-http://deb.debian.org/debian}"
}

# 1. The bare root, made once.
mkdir -p "$cache"
t=$(date +%s)
root_how="cached"
if [ ! -f "$root/.brt-rehearsal-root" ]; then
  rm -rf "$root" "$root.new"
  echo "rehearsal: debootstrap --variant=minbase bookworm from $(mirror) (log: $cache/debootstrap.log)"
  if ! debootstrap --variant=minbase bookworm "$root.new" "$(mirror)" >"$cache/debootstrap.log" 2>&1; then
    tail -5 "$cache/debootstrap.log"
    rm -rf "$root.new"
    # No registry to download from is the machine's lack, not the bundle's fault.
    grep -qE "Failed getting release file|Couldn't download|Temporary failure resolving|Could not resolve" \
      "$cache/debootstrap.log" && skip "debootstrap could not reach $(mirror)"
    echo "rehearsal: FAILED: debootstrap"
    exit 1
  fi
  mv "$root.new" "$root" && touch "$root/.brt-rehearsal-root"
  root_how="made in $(($(date +%s) - t)) s"
fi
echo "rehearsal: bare Debian 12 root $root ($root_how)"
present=$(find "$root/usr/lib" "$root/usr/local" -name 'libopenblas*' -o -name 'libfftw3*' -o -name 'libhdf5*' \
  -o -name 'libmpi*' -o -name 'libtomlplusplus*' -o -name 'libsentencepiece*' -o -name 'libgtest*' \
  -o -name 'libevent*' -o -name 'libgomp*' -o -name 'libcublas*' -o -name 'libnccl*' -o -name 'libcuda*' 2>/dev/null)
[ -z "$present" ] || { echo "rehearsal: FAILED: the root is not bare: $present"; exit 1; }

# 2. The real bundle of BUILD (or BRT_REHEARSAL_ARCHIVE: an archive made before, e.g. the one
# about to be carried, build-gpu-bundle/gpu-bundle.tar.xz).
t=$(date +%s)
if [ -n "${BRT_REHEARSAL_ARCHIVE:-}" ]; then
  cp "$BRT_REHEARSAL_ARCHIVE" "$cache/gpu-bundle.tar.xz" || exit 1
  echo "rehearsal: the archive $BRT_REHEARSAL_ARCHIVE"
# (xz -1: 4x faster to pack than the real bundle's -6 and larger, so its size bounds the real one.)
elif ! BRT_BUNDLE_XZ_LEVEL=${BRT_BUNDLE_XZ_LEVEL:-1} "$repo/scripts/gpu-check.sh" bundle --from "$build" \
  --out "$cache/gpu-bundle.tar.xz" >"$cache/bundle.log" 2>&1; then
  cat "$cache/bundle.log"
  echo "rehearsal: FAILED: bundle"
  exit 1
else
  grep '^bundle: ' "$cache/bundle.log" | grep -v '^bundle: carry'
fi
bundle_s=$(($(date +%s) - t))

# 3. Into the root: the bundle, the repository's scripts and configs (the device tool's copy of
# the checkout), the Python stand-in and the venv's mount point.
R=$root/rehearsal
rm -rf "$R" "$root/opt/torch" && mkdir -p "$R/repo" "$R/bin" "$R/hostlibs" "$R/out-tests" "$R/out-cpu" "$root/$venv_lib" "$root/host"
cp -r "$repo/scripts" "$repo/configs" "$repo/python" "$R/repo/"
mkdir -p "$R/repo/tests" && cp -r "$repo/tests/python" "$R/repo/tests/"
cp "$cache/gpu-bundle.tar.xz" "$R/"
# Every library of this machine's ldconfig cache by soname, pointing into /host: Python's
# loader finds them all (absolute links such as Debian's /etc/alternatives ones resolved here).
ldconfig -p | awk '/x86-64/ && $NF ~ /^\// {print $1, $NF}' | while read -r soname path; do
  [ -e "$R/hostlibs/$soname" ] || ln -s "/host$(readlink -f "$path")" "$R/hostlibs/$soname"
done
cat >"$R/bin/python3" <<'EOF'
#!/bin/sh
# The host's python3 and torch (read-only at /host), by the host's loader on the host's libraries.
export PYTHONHOME=/host/usr PYTHONDONTWRITEBYTECODE=1
exec /host/lib64/ld-linux-x86-64.so.2 --library-path /rehearsal/hostlibs /host/usr/bin/python3 "$@"
EOF
chmod +x "$R/bin/python3"
# An nvidia-smi that lists a GPU the CUDA runtime cannot use (no driver library in the root):
# the case of a machine whose GPU is listed but refused, with BRT_REQUIRE_GPU=1 exported.
mkdir -p "$R/listed-gpu"
cat >"$R/listed-gpu/nvidia-smi" <<'SMI'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-rehearsal)" ;;
  *noheader*) echo "NVIDIA H200, 580.159.04, 143771 MiB (rehearsal: listed, no driver library)" ;;
  *--query-gpu*) echo "name, driver_version, memory.total [MiB]"; echo "NVIDIA H200, 580.159.04, 143771 MiB" ;;
esac
SMI
chmod +x "$R/listed-gpu/nvidia-smi"

# 4. The runs, in a private mount namespace, chrooted.
t=$(date +%s)
# shellcheck disable=SC2016  # expanded by the inner bash
unshare -m --propagation private bash -c '
  set -u
  root=$1 venv_lib=$2
  mount -t proc proc "$root/proc" && mount --rbind /dev "$root/dev" && mount --rbind /sys "$root/sys" &&
    mount --bind / "$root/host" && mount -o remount,bind,ro "$root/host" &&
    mount --bind "$3" "$root/$venv_lib" && mount -o remount,bind,ro "$root/$venv_lib" ||
    { echo "rehearsal: mounts failed"; exit 1; }
  in_root() {
    chroot "$root" /usr/bin/env -i PATH=/rehearsal/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin \
      HOME=/root LANG=C.UTF-8 "$@"
  }
  echo "rehearsal: run ... all (a GPU listed, no driver: the device must be unusable, with a CUDA error name)"
  s=$(date +%s)
  in_root bash -c "cd /rehearsal/repo && PATH=/rehearsal/listed-gpu:\$PATH OUT=/rehearsal/out-tests \
    BRT_GPU_CHECK_WORK=/tmp/gpu-check-tests scripts/gpu-check.sh run /rehearsal/gpu-bundle.tar.xz all" \
    >"$root/rehearsal/tests.out" 2>&1
  echo "$? $(($(date +%s) - s))" >"$root/rehearsal/tests.rc"
  echo "rehearsal: run ... peer,plan on the CPU (BRT_GPU_CHECK_CPU=1)"
  s=$(date +%s)
  in_root bash -c "cd /rehearsal/repo && OUT=/rehearsal/out-cpu BRT_GPU_CHECK_WORK=/tmp/gpu-check-cpu \
    BRT_GPU_CHECK_CPU=1 scripts/gpu-check.sh run /rehearsal/gpu-bundle.tar.xz peer,plan" >"$root/rehearsal/cpu.out" 2>&1
  echo "$? $(($(date +%s) - s))" >"$root/rehearsal/cpu.rc"
' rehearsal "$root" "$venv_lib" "$cuda_lib"
ns_rc=$?
[ -z "$(mounted_under "$root")" ] || fail "mounts left under $root"
rmdir "$root/$venv_lib" 2>/dev/null && rm -rf "$root/opt/torch"
rmdir "$root/host" 2>/dev/null
[ "$ns_rc" = 0 ] || fail "the mount namespace failed (rc $ns_rc)"

# 5. What the runs must have said.
expect() { # FILE PATTERN WHAT
  grep -qE "$2" "$1" || fail "$3 (no line matching /$2/ in $(basename "$(dirname "$1")")/$(basename "$1"))"
}
check_out() { # DIR: exactly the three files, and a readable archive
  local files
  files=$(find "$1" -mindepth 1 -printf '%f\n' | sort | tr '\n' ' ')
  [ "$files" = "device.txt logs.tar.gz summary.txt " ] || fail "$(basename "$1") holds: $files(not exactly device.txt logs.tar.gz summary.txt)"
  tar -tzf "$1/logs.tar.gz" 2>/dev/null | grep -c '^logs/.' >/dev/null || fail "$(basename "$1")/logs.tar.gz is not an archive of logs/"
}
# The budget line of an `all` run (scripts/gpu-check/expected.sh say_budget): every part's
# expected seconds; the default part list (tests: start-up, bench, unit, plan, sanitize) must be
# expected within 90% of its 400 s budget, and the headline figures (start-up, bench, the peer's
# 150m spec) within half of all's 540 s, so one call returns them however the rest goes.
check_budget() {
  local line part n
  line=$(grep -m1 -E '^budget: expected start-up [0-9]+ s, bench [0-9]+ s, peer_first [0-9]+ s, unit [0-9]+ s, plan [0-9]+ s, python [0-9]+ s, sanitize [0-9]+ s, peer_rest [0-9]+ s: [0-9]+ s of 540 s' "$1")
  [ -n "$line" ] || { fail "no budget line with every part of all in order, against 540 s"; return; }
  declare -A secs=()
  for part in start-up bench peer_first unit plan python sanitize peer_rest; do
    n=$(sed -nE "s/.*[ ,]$part ([0-9]+) s.*/\1/p" <<<"$line")
    secs[$part]=${n:-0}
  done
  local tests=$((secs[start-up] + secs[bench] + secs[unit] + secs[plan] + secs[sanitize]))
  local head=$((secs[start-up] + secs[bench] + secs[peer_first]))
  echo "budget: tests expected $tests s of 400 s; the headline figures $head s of all's 540 s"
  [ "${secs[unit]}" -gt 0 ] || fail "the unit suites were not counted (${secs[unit]} s)"
  [ $((tests * 10)) -le $((400 * 9)) ] || fail "tests is expected to take $tests s: more than 90% of its 400 s"
  [ $((head * 2)) -le 540 ] || fail "the headline figures are expected at $head s: more than half of all's 540 s"
}
read -r tests_rc tests_s <"$R/tests.rc" 2>/dev/null || tests_rc=x
read -r cpu_rc cpu_s <"$R/cpu.rc" 2>/dev/null || cpu_rc=x
S=$R/out-tests/summary.txt
echo "---- all: rc $tests_rc, ${tests_s:-?} s; summary.txt:"
cat "$S" 2>/dev/null || cat "$R/tests.out"
if [ -f "$S" ]; then
  [ "$tests_rc" = 1 ] || fail "run ... all exited $tests_rc, not 1 (no device must be a failure)"
  check_out "$R/out-tests"
  expect "$S" '^gpu: NVIDIA H200' "the listed GPU was not reported"
  expect "$S" '^preflight: libraries: ok' "the preflight did not resolve every library"
  expect "$S" "libcublas\.so\.13=/$venv_lib/libcublas\.so\.13" "cuBLAS did not come from the venv stand-in"
  for bin in $(tar -tJf "$cache/gpu-bundle.tar.xz" | sed -n 's|^gpu-bundle/bin/\(..*\)|\1|p'); do
    expect "$S" "^preflight: load $bin: ok" "$bin did not load"
  done
  expect "$S" '^preflight: device: UNUSABLE: cudaError[A-Za-z]+' "the device was not reported unusable with a CUDA error name"
  expect "$S" '^test_cuda_kernels.*: skipped: the device is unusable \(cudaError' "the GPU tests were not skipped for the device"
  expect "$S" '^RESULT: FAILED' "the result is not FAILED"
  ! grep -q 'PASSED' "$S" || fail "a no-GPU run says PASSED somewhere"
  check_budget "$S"
  # The tests only the device image can run, tried on this python3 (no transformers): skipped, named.
  expect "$S" "^python hf_transformers: skipped: No module named 'transformers'" "python hf_transformers was not tried and skipped"
  # Numbers first: the benchmarks' steps come before the unit suites, the peer's first spec too.
  first_bench=$(grep -n -m1 '^bench' "$S" | cut -d: -f1)
  first_unit=$(grep -n -m1 '^test_cuda_kernels' "$S" | cut -d: -f1)
  first_peer=$(grep -n -m1 '^peer' "$S" | cut -d: -f1)
  if ! [ "${first_bench:-0}" -gt 0 ] || ! [ "${first_peer:-0}" -gt "${first_bench:-0}" ] ||
    ! [ "${first_unit:-0}" -gt "${first_peer:-0}" ]; then
    fail "the order is not bench, peer's first spec, unit suites (lines ${first_bench:-?}, ${first_peer:-?}, ${first_unit:-?})"
  fi
else
  fail "run ... all wrote no summary.txt"
fi
S=$R/out-cpu/summary.txt
echo "---- peer,plan on the CPU: rc $cpu_rc, ${cpu_s:-?} s; summary.txt:"
cat "$S" 2>/dev/null || cat "$R/cpu.out"
if [ -f "$S" ]; then
  [ "$cpu_rc" = 0 ] || fail "run ... peer,plan on the CPU exited $cpu_rc"
  check_out "$R/out-cpu"
  expect "$S" '^peer verify .*: ok' "the peer's --verify did not pass"
  expect "$S" 'brt-dist / peer' "no brt-dist / peer ratio"
  expect "$S" '^plan predict: ok' "the planner's calibration did not pass"
  expect "$S" '^RESULT: PASSED on the CPU' "the CPU run did not pass"
else
  fail "run ... peer,plan wrote no summary.txt"
fi
mib=$(awk -v b="$(stat -c %s "$cache/gpu-bundle.tar.xz")" 'BEGIN {printf "%.1f", b / 1048576}')
echo "rehearsal: $([ "$failures" = 0 ] && echo passed || echo "FAILED ($failures)") in $(($(date +%s) - t0)) s:" \
  "root $root_how, bundle ${bundle_s} s ($mib MiB), tests run ${tests_s:-?} s, CPU peer+plan run ${cpu_s:-?} s"
[ "$failures" = 0 ]
