#!/usr/bin/env bash
# Installs the Debian packages brt-dist needs. Idempotent and non-interactive: packages already
# present are left alone, so a second run is quick.
#   scripts/install-deps.sh run   what building and running brt-dist needs (scripts/main-job.sh)
#   scripts/install-deps.sh       everything: that, plus what the test suite and the benchmarks
#                                 need (scripts/run-tests.sh, CI)
set -euo pipefail
profile=${1:-all}
case "$profile" in run | all) ;; *) echo "usage: $0 [run|all]" >&2; exit 2 ;; esac

# Building and running brt-dist (train, eval, generate, prepare, plot).
run_packages=(
  build-essential cmake ninja-build pkg-config git
  libopenblas-openmp-dev            # BLAS threaded with OpenMP, so BLAS and our loops share one pool
  libtomlplusplus-dev               # config files
  libsentencepiece-dev              # the tokenizer library
  libhdf5-openmpi-dev               # checkpoints (parallel HDF5 over MPI-IO)
  libfftw3-dev                      # FFT convolutions for the SSM layers
  libopenmpi-dev openmpi-bin        # MPI
  nlohmann-json3-dev                # JSON written and read by a kept library (metrics, eval --json, flight records)
  zlib1g-dev                        # gzip-compressed corpora (prepare --input x.jsonl.gz)
  libboost-dev                      # Boost.Stacktrace (header-only): the crash report's file:line
  bible-kjv                         # the bundled default corpus
  python3 python3-matplotlib        # tools/plot_run.py (the main job's last suggestion)
)
# The test suite, the benchmarks and the GPU bundle.
test_packages=(
  sentencepiece                     # the spm_* tools (tokenizer benchmark baseline)
  hdf5-tools                        # h5dump/h5ls in checkpoint tests
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-h5py python3-numpy        # checkpoint readability test
  python3-torch                     # python/brt_dist.torch and its agreement test (tests/python)
  python3-sentencepiece             # the Hugging Face export test: the exported tokenizer.model encodes as brt-dist
  slurm-wlm munge                   # a real Slurm for tests/slurm and tests/cluster (slurmctld, slurmd, sbatch)
  openssh-server                    # tests/cluster: an sshd per namespaced host, for mpirun's ssh launch
                                    # (the tests start their own on private addresses; the package's
                                    # own service, where the system starts it, is Debian's default)
  debootstrap                       # the bare Debian root of the GPU bundle's rehearsal (tests/bundle)
  patchelf xz-utils                 # the GPU bundle (scripts/gpu-check.sh): RUNPATHs dropped, libevent
                                    # made to load on glibc < 2.36; packed with xz
)
packages=("${run_packages[@]}")
[ "$profile" = all ] && packages+=("${test_packages[@]}")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages ($profile) already installed"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
