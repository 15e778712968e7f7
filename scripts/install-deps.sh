#!/usr/bin/env bash
# Installs every Debian package brt-dist needs to build, test and run. Idempotent and
# non-interactive: packages already present are left alone, so a second run is quick.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-openmp-dev            # BLAS threaded with OpenMP, so BLAS and our loops share one pool
  libtomlplusplus-dev               # config files
  libsentencepiece-dev sentencepiece  # tokenizer library and the spm_* tools (benchmark baseline)
  libhdf5-openmpi-dev hdf5-tools    # checkpoints (parallel HDF5 over MPI-IO)
  libfftw3-dev                      # FFT convolutions for the SSM layers
  libopenmpi-dev openmpi-bin        # MPI
  nlohmann-json3-dev                # JSON written and read by a kept library (metrics, eval --json, flight records)
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-h5py python3-numpy  # checkpoint readability test
  python3-matplotlib                # tools/scaling_study.py plots (tests/scaling)
  python3-torch                     # python/brt_dist.torch and its agreement test (tests/python)
  bible-kjv                         # the bundled default corpus
  slurm-wlm munge                   # a real one-node Slurm for tests/slurm (slurmctld, slurmd, sbatch)
  openssh-server                    # tests/cluster: an sshd per namespaced host, for mpirun's ssh launch
                                    # (the tests start their own on private addresses; the package's
                                    # own service, where the system starts it, is Debian's default)
  debootstrap                       # the bare Debian root of the GPU bundle's rehearsal (tests/bundle)
  patchelf xz-utils                 # the GPU bundle (scripts/gpu-check.sh): RUNPATHs dropped, libevent
                                    # made to load on glibc < 2.36; packed with xz
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
