# shellcheck shell=bash
# `gpu-check.sh bundle [--from BUILD] [--out FILE]`: the binaries, the Debian libraries they
# need, Open MPI's runtime and bench/peer, packed as one .tar.xz for the GPU machine, which has
# CUDA and glibc/libstdc++ but none of our Debian libraries (docs/gpu.md, "Running the GPU
# checks"). Without --from it configures and builds build-gpu-bundle/ for any x86-64
# (-DBRT_MARCH_NATIVE=OFF); with --from it stages an existing build (the rehearsal does).

# The binaries carried, by path in the build dir; the first two are required.
BUNDLE_BINARIES="launch/brt-dist tests/kernels/cuda/test_cuda_kernels tests/kernels/cuda/test_cuda_optimizer
tests/kernels/cuda/test_cuda_training bench/cuda/bench_cuda_attention bench/cuda/bench_cuda_train"

# Libraries the GPU machine provides and the bundle must never carry: glibc's own (a copy
# would not match the machine's loader), the C++ runtime (the machine's is as new or newer),
# and CUDA's (the machine's driver decides which runtime pieces fit it).
not_bundled() {
  case "$1" in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | libresolv.so* | libutil.so* | \
      libnsl.so* | libanl.so* | libcrypt.so* | libmvec.so* | libBrokenLocale.so* | \
      libthread_db.so* | libc_malloc_debug.so* | ld-linux*.so* | linux-vdso.so*) return 0 ;;
    libstdc++.so* | libgcc_s.so*) return 0 ;;
    libcuda.so* | libcudart.so* | libcublas.so* | libcublasLt.so* | libcufft.so* | libcufftw.so* | \
      libnccl.so* | libnvrtc*.so* | libnvJitLink.so* | libcurand.so* | libcusolver*.so* | \
      libcusparse*.so* | libcudnn*.so* | libnvidia-*.so* | libcupti.so* | libnvToolsExt.so*) return 0 ;;
  esac
  return 1
}

# The Debian shared libraries FILE needs (ldd: its whole closure) into DEST, each under its
# soname; never those of not_bundled nor anything from /usr/local/cuda*.
copy_libs() {
  local soname path
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r soname path; do
    not_bundled "$soname" && continue
    case "$path" in /usr/local/cuda*) continue ;; esac
    [ -e "$2/$soname" ] || cp -L "$path" "$2/$soname"
  done
}

# Debian 12's libevent (Open MPI's event loop) needs glibc 2.36 only for arc4random; the GPU
# machine's glibc may be older. Its copy in the bundle gets that need made weak and loads
# lib/libbrt_glibc_compat.so.1 (glibc_compat.c), so it loads on glibc >= 2.34 (our own
# binaries' floor) and still uses glibc's arc4random where glibc has it.
patch_libevent() {
  local lib=$1/libevent_core-2.1.so.7 here
  here=$(dirname "${BASH_SOURCE[0]}")
  [ -f "$lib" ] || return 0
  objdump -T "$lib" | grep 'GLIBC_2\.36' >/dev/null || return 0 # (grep -q would break the pipe)
  cc -shared -fPIC -O2 -Wall -Wextra -Wl,-soname,libbrt_glibc_compat.so.1 \
    -o "$1/libbrt_glibc_compat.so.1" "$here/glibc_compat.c" || return 1
  chmod u+w "$lib"
  patchelf --add-needed libbrt_glibc_compat.so.1 "$lib" || return 1
  python3 "$here/elf_weak_version.py" "$lib" GLIBC_2.36 || return 1
}

# The Open MPI components that mpi_env (run.sh) turns off, and OpenSHMEM's: not carried (they
# would bring InfiniBand, UCX and libfabric libraries for nothing).
unused_mpi_component() {
  case "$(basename "$1")" in
    *ucx* | *ofi* | *psm* | *openib* | *_uct* | *verbs* | *hcoll* | *portals4* | *usnic* | \
      mca_spml_* | mca_sshmem_* | mca_scoll_* | mca_atomic_* | mca_memheap_*) return 0 ;;
  esac
  return 1
}

# Open MPI's runtime for brt-dist's MPI_Init as a singleton (no mpirun there): the MCA
# components, PMIx's, their libraries and the help texts, under STAGE/mpi and STAGE/lib.
stage_mpi_runtime() {
  local stage=$1 ompi pmix data f
  ompi=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
  [ -d "$ompi" ] || { echo "bundle: no Open MPI components (ompi_info --path pkglibdir)" >&2; return 1; }
  pmix=$(dirname "$(realpath "$(ldd "$ompi/mca_pmix_ext3x.so" | awk '/libpmix/ {print $3}')")")/pmix
  mkdir -p "$stage/mpi/ompi" "$stage/mpi/pmix" "$stage/mpi/share"
  for f in "$ompi"/*.so; do unused_mpi_component "$f" || cp "$f" "$stage/mpi/ompi/"; done
  [ -d "$pmix" ] && cp "$pmix"/*.so "$stage/mpi/pmix/"
  for f in "$stage"/mpi/ompi/*.so "$stage"/mpi/pmix/*.so; do copy_libs "$f" "$stage/lib"; done
  data=$(ompi_info --path pkgdatadir --parsable 2>/dev/null | sed -n 's/^path:pkgdatadir://p')
  [ -d "$data" ] && cp -r "$data" "$stage/mpi/share/openmpi"
  return 0
}

# bench/peer and the Python package (checkpoint reading) ride in the bundle beside brt-dist.
stage_peer() {
  mkdir -p "$1/bench/peer" "$1/python"
  cp "$REPO"/bench/peer/*.py "$1/bench/peer/"
  cp -r "$REPO/python/brt_dist" "$1/python/"
  find "$1" -name __pycache__ -prune -exec rm -rf {} +
}

# The newest glibc symbol version FILE needs (its undefined symbols'; weak needs excluded).
glibc_floor() {
  objdump -T "$1" 2>/dev/null | awk '/\*UND\*/' | grep -oE '\(GLIBC_[0-9.]+\)' | tr -d '()' |
    sort -V | tail -1
}

# MANIFEST: what was built from what, and what the bundle asks of the machine.
write_manifest() {
  local build=$1 stage=$2 f native floor cxx
  native=$(sed -n 's/^BRT_MARCH_NATIVE:BOOL=//p' "$build/CMakeCache.txt" 2>/dev/null)
  {
    echo "brt-dist gpu bundle"
    echo "source: $(git -C "$REPO" describe --always --dirty 2>/dev/null || echo unknown) ($(date -u +%FT%TZ))"
    echo "build: $build (BRT_MARCH_NATIVE=${native:-?}$([ "$native" = ON ] && echo ': runs only on CPUs like the build machine'))"
    floor=$(for f in "$stage"/bin/* "$stage"/lib/* "$stage"/mpi/*/*.so; do glibc_floor "$f"; done | sort -V | tail -1)
    cxx=$(for f in "$stage"/bin/*; do objdump -T "$f" | grep -oE 'GLIBCXX_[0-9.]+'; done | sort -V | tail -1)
    echo "needs: ${floor:-GLIBC_?} or newer, libstdc++ with ${cxx:-GLIBCXX_?}, a CUDA 13 driver, libcublas.so.13, libcufft.so.12, libnccl.so.2"
    for f in "$stage"/bin/*; do
      echo "bin/$(basename "$f"): $(objdump -p "$f" | awk '/NEEDED/ {print $2}' | tr '\n' ' ')"
    done
    echo "lib/: $(find "$stage/lib" -maxdepth 1 -type f -printf '%f ' | tr ' ' '\n' | sort | tr '\n' ' ')"
  } >"$stage/MANIFEST"
}

# STAGE the bundle from BUILD: bin/, lib/, mpi/, bench/peer, python/brt_dist, MANIFEST.
# REQUIRED=1: every binary must exist (a bundle build); else only the first two.
stage_bundle() {
  local build=$1 stage=$2 required=$3 rel n=0
  command -v patchelf >/dev/null || { echo "bundle: patchelf is needed (scripts/install-deps.sh)" >&2; return 1; }
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib"
  for rel in $BUNDLE_BINARIES; do
    n=$((n + 1))
    if [ ! -x "$build/$rel" ]; then
      if [ "$required" = 1 ] || [ "$n" -le 2 ]; then
        echo "bundle: $build/$rel is missing" >&2
        return 1
      fi
      echo "bundle: warning: $build/$rel is missing (not built); left out" >&2
      continue
    fi
    cp "$build/$rel" "$stage/bin/"
    # The Release build's line tables (-g1, for the crash report's file:line) would triple the
    # bundle; the GPU machine's crash reports name functions from the symbol table, as before.
    strip --strip-debug "$stage/bin/$(basename "$rel")" || return 1
    copy_libs "$build/$rel" "$stage/lib" || return 1
    # The build's RUNPATH names this machine's folders: there only LD_LIBRARY_PATH decides.
    patchelf --remove-rpath "$stage/bin/$(basename "$rel")" || return 1
  done
  stage_mpi_runtime "$stage" || return 1 # brt-dist (bench_peer --brt-dist) calls MPI_Init
  patch_libevent "$stage/lib" || return 1
  stage_peer "$stage"
  write_manifest "$build" "$stage"
}

# STAGE packed into FILE (xz -6, or BRT_BUNDLE_XZ_LEVEL: the rehearsal packs at 1, 4x faster
# and larger); prints the size and fails above BRT_BUNDLE_MAX_MIB (48: the device tool carries
# at most 64 MiB of working tree, and the repository needs a few).
pack_bundle() {
  local stage=$1 file=$2 bytes max=${BRT_BUNDLE_MAX_MIB:-48} level=${BRT_BUNDLE_XZ_LEVEL:-6}
  tar -C "$(dirname "$stage")" -cf - "$(basename "$stage")" | xz -T0 -"$level" -c >"$file.part" || return 1
  mv -f "$file.part" "$file"
  bytes=$(stat -c %s "$file")
  echo "bundle: $file $bytes bytes ($(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}') MiB at xz -$level;" \
    "limit $max MiB; unpacked $(du -sm "$stage" | cut -f1) MiB)"
  sed -n '2,3p' "$stage/MANIFEST" | sed 's/^/bundle: /'
  if [ "$bytes" -gt $((max * 1048576)) ]; then
    echo "bundle: FAILED: larger than $max MiB (BRT_BUNDLE_MAX_MIB)" >&2
    return 1
  fi
}

bundle_cmd() {
  local from="" out="" build
  while [ $# -gt 0 ]; do
    case "$1" in
      --from) from=$2; shift 2 ;;
      --out) out=$2; shift 2 ;;
      *) echo "bundle: unknown argument $1 (bundle [--from BUILD] [--out FILE])" >&2; return 2 ;;
    esac
  done
  if [ -n "$from" ]; then
    build=$(cd "$from" && pwd) || return 1
    out=${out:-$build/gpu-bundle.tar.xz}
  else
    build=$REPO/build-gpu-bundle
    out=${out:-$build/gpu-bundle.tar.xz}
    mkdir -p "$build"
    cmake -S "$REPO" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRT_CUDA=ON \
      -DBRT_MARCH_NATIVE=OFF -DBRT_BUILD_BENCH=ON >"$build/configure.log" 2>&1 ||
      { cat "$build/configure.log"; return 1; }
    # bninja (where present) serialises ninja runs of engineers sharing one machine.
    local ninja=ninja
    command -v bninja >/dev/null && ninja=bninja
    local targets="" rel
    for rel in $BUNDLE_BINARIES; do targets="$targets $(basename "$rel")"; done
    # shellcheck disable=SC2086  # the target list is meant to split
    "$ninja" -C "$build" -j"${JOBS:-2}" $targets || return 1
  fi
  mkdir -p "$(dirname "$out")"
  local stage
  stage=$(dirname "$out")/gpu-bundle
  stage_bundle "$build" "$stage" "$([ -z "$from" ] && echo 1 || echo 0)" || return 1
  pack_bundle "$stage" "$out" || return 1
  [ "${BRT_KEEP_STAGE:-0}" = 1 ] || rm -rf "$stage"
  echo "bundle: carry [\"${out#"$REPO"/}\"]; run: scripts/gpu-check.sh run ${out#"$REPO"/} tests (then peer)"
}
