# shellcheck shell=bash
# `gpu-check.sh run ARCHIVE [PARTS]` on the GPU machine (docs/gpu.md, "Running the GPU checks"):
# unpack, describe the machine, preflight, then each part's steps under one deadline.
#   PARTS: a comma list of bench, unit, plan, sanitize, peer; `tests` = bench,unit,plan,sanitize
#          (the figures first), `all` = every part in ONE call, the headline figures first:
#          bench, the peer's first spec (150m), unit, plan, python (transformers), sanitize,
#          then the peer's --verify and other specs. Default: tests.
#   BRT_GPU_CHECK_BUDGET  seconds from the start to the deadline (400; 540 for all, which with
#                         the packing ends within the device tool's 570 s; 300 for peer alone).
#                         Each step runs when twice its expected time (expected.sh) still fits.
#   BRT_GPU_CHECK_WORK    the work folder (/tmp/brt-gpu-check; emptied first)
#   BRT_GPU_CHECK_CPU=1   the rehearsal's dry run: peer and plan on the CPU with tiny configs,
#                         PEER_* and PLAN_* defaults as below (nothing runs on a GPU)
#   OUT                   where summary.txt, device.txt and logs.tar.gz go, and nothing else
#                         (the device tool sets it; else /tmp/brt-gpu-check-out)
# Exit status: 0 every step ran and passed; 1 something failed (a binary that does not load,
# an unusable device, a failed step); 3 nothing failed but steps were skipped; 2 usage.

# The carried Open MPI (bundle.sh stage_mpi_runtime) for a singleton: no daemon, shared memory
# only, Debian's /etc/openmpi defaults (absent there) as variables.
mpi_env() {
  export OMPI_MCA_mca_base_component_path=$1/mpi/ompi PMIX_MCA_mca_base_component_path=$1/mpi/pmix
  export OPAL_PKGDATADIR=$1/mpi/share/openmpi OMPI_MCA_ess_singleton_isolated=1
  export OMPI_MCA_mca_base_component_show_load_errors=0 PMIX_MCA_mca_base_component_show_load_errors=0
  export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_mtl=^ofi OMPI_MCA_osc=^ucx,pt2pt
  export OMPI_MCA_btl_base_warn_component_unused=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

# The rehearsal's CPU stand-ins (BRT_GPU_CHECK_CPU=1), as the old dry run had them.
cpu_defaults() {
  export PEER_VERIFY=${PEER_VERIFY:-rec:fixed:skip} PEER_ARGS=${PEER_ARGS:-"--device cpu --threads 1 --no-peak"}
  local tiny="120|configs/tiny.toml train.batch=1 --steps 2 --warmup 1"
  local bst="120|configs/bench-small.toml model.variant=bst:sh:s4d train.batch=1 --steps 2 --warmup 1"
  export PEER_SPECS=${PEER_SPECS:-"$tiny;$bst"}
  export PLAN_CONFIG=${PLAN_CONFIG:-configs/tiny.toml} PLAN_DEVICE=${PLAN_DEVICE:-cpu} PLAN_PRECISION=${PLAN_PRECISION:-fp32}
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
}

# The machine, for device.txt.
describe_device() {
  local cxx
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -srm); $(nproc) cores; $(head -1 /proc/meminfo 2>/dev/null | tr -s ' ')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2-)"
  echo "glibc: $(ldd --version 2>&1 | head -1)"
  cxx=$(ldconfig -p 2>/dev/null | awk '$1 == "libstdc++.so.6" && /x86-64/ {print $NF; exit}')
  echo "libstdc++: ${cxx:-not in the ldconfig cache} ($([ -n "$cxx" ] && grep -ao 'GLIBCXX_3\.4\.[0-9]*' "$cxx" | sort -uV | tail -1))"
  echo "python3: $(command -v python3 || echo none)"
  echo "--- nvidia-smi"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1
    nvidia-smi -L 2>&1
  else
    echo "nvidia-smi: not found"
  fi
  echo "--- nvcc: $(nvcc --version 2>/dev/null | tail -1 || true)"
  echo "--- CUDA folders: $(for d in /usr/local/cuda* /usr/local/nvidia; do [ -e "$d" ] && printf '%s ' "$d"; done)"
}

finish() {
  local word code
  if [ "$FAILED" -gt 0 ]; then
    word="FAILED ($FAILED failed, $SKIPPED not run)"
    code=1
  elif [ "$SKIPPED" -gt 0 ]; then
    word="INCOMPLETE (nothing failed; $SKIPPED not run: see the lines above)"
    code=3
  else
    word="PASSED"
    code=0
  fi
  [ "${BRT_GPU_CHECK_CPU:-0}" = 1 ] && [ "$code" = 0 ] && word="PASSED on the CPU (a dry run: nothing ran on a GPU)"
  say "RESULT: $word after $(elapsed) s (budget $BUDGET s)"
  pack_logs
  exit "$code"
}

run_check() {
  local archive=${1:-$REPO/build-gpu-bundle/gpu-bundle.tar.xz} parts_arg=${2:-tests} p
  for p in ${parts_arg//,/ }; do
    case "$p" in unit | bench | plan | sanitize | peer | python | tests | all) ;; *)
      echo "run: part $p is not bench, unit, plan, sanitize, peer, python, tests or all" >&2
      exit 2
      ;;
    esac
  done
  PARTS=$(echo "$parts_arg" | sed 's/\ball\b/bench,peer_first,unit,plan,python,sanitize,peer_rest/; s/\btests\b/bench,unit,plan,sanitize/')
  [ -f "$archive" ] && archive=$(cd "$(dirname "$archive")" && pwd)/$(basename "$archive")
  T0=$(now)
  BUDGET=${BRT_GPU_CHECK_BUDGET:-$(case "$parts_arg" in peer) echo 300 ;; all) echo 540 ;; *) echo 400 ;; esac)}
  DEADLINE=$((T0 + BUDGET))
  FAILED=0
  SKIPPED=0
  OUT_DIR=${OUT:-/tmp/brt-gpu-check-out}
  WORK=${BRT_GPU_CHECK_WORK:-/tmp/brt-gpu-check}
  LOGS=$WORK/logs
  HOST_LDP=${LD_LIBRARY_PATH:-} # python3 keeps the machine's own libraries
  mkdir -p "$OUT_DIR"
  rm -f "$OUT_DIR/summary.txt" "$OUT_DIR/device.txt" "$OUT_DIR/logs.tar.gz"
  rm -rf "$WORK" && mkdir -p "$LOGS"
  export PATH=$PATH:/usr/local/nvidia/bin:/usr/local/cuda/bin
  [ "${BRT_GPU_CHECK_CPU:-0}" = 1 ] && cpu_defaults
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
  trap 'say "run: stopped by a signal at +$(elapsed) s"; pack_logs; exit 143' TERM INT
  say "== brt gpu-check $(date -u +%FT%TZ): parts $PARTS, budget $BUDGET s$([ "${BRT_GPU_CHECK_CPU:-0}" = 1 ] && echo ', CPU dry run')"
  describe_device >"$OUT_DIR/device.txt" 2>&1
  # xz through tar where xz exists, else Python's tarfile (a bare image has no xz).
  if command -v xz >/dev/null; then
    step "unpack" "$(expected unpack)" 120 "$LOGS/unpack.log" tar -C "$WORK" -xJf "$archive"
  else
    step "unpack" "$(expected unpack)" 120 "$LOGS/unpack.log" "${PEER_PYTHON:-python3}" -c 'import sys, tarfile
t = tarfile.open(sys.argv[1])
t.extractall(sys.argv[2], **({"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}))' \
      "$archive" "$WORK"
  fi
  B=$WORK/gpu-bundle
  if [ "$STEP_RC" != 0 ] || [ ! -d "$B/bin" ]; then
    say "unpack: FAILED: $archive ($(rc_words "$STEP_RC")): $(tail -2 "$LOGS/unpack.log" | tr '\n' ' ')"
    FAILED=$((FAILED + 1))
    finish
  fi
  say "bundle: unpacked in $STEP_S s; built from $(sed -n 's/^source: //p' "$B/MANIFEST" 2>/dev/null); needs $(sed -n 's/^needs: //p' "$B/MANIFEST" 2>/dev/null | cut -d, -f1-2)"
  { echo "--- bundle MANIFEST"; cat "$B/MANIFEST"; } >>"$OUT_DIR/device.txt" 2>&1
  local listed=0
  if nvidia-smi -L 2>/dev/null | grep -c '^GPU ' >/dev/null; then # (grep -q could break the pipe)
    listed=1
    export BRT_REQUIRE_GPU=1 # a GPU test that skips while nvidia-smi lists a GPU is a failure
    say "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
  else
    say "gpu: nvidia-smi lists none ($(command -v nvidia-smi >/dev/null && echo 'no GPU' || echo 'no nvidia-smi'))"
  fi
  mpi_env "$B"
  preflight "$listed"
  { echo "--- libraries (preflight)"; cat "$LOGS/libraries.txt"; } >>"$OUT_DIR/device.txt"
  [ "$DEVICE_OK" != 1 ] && [ "${BRT_GPU_CHECK_CPU:-0}" != 1 ] && FAILED=$((FAILED + 1))
  say_budget
  for p in ${PARTS//,/ }; do
    "part_$p"
  done
  finish
}
