# shellcheck shell=bash
# The preflight of `gpu-check.sh run` (docs/gpu.md, "Running the GPU checks"): before any test,
#  1. every shared library the bundle's files need is found on THIS machine (the bundle's lib/
#     first, then the system's ldconfig cache, the driver's and CUDA's folders and the
#     nvidia/*/lib folders of Python wheels), building LD_LIBRARY_PATH from where they were;
#  2. each binary is checked by the loader (ldd -r) and started once (--gtest_list_tests,
#     --help): a binary with a missing library, symbol or symbol version is reported and only
#     the steps that need it are skipped;
#  3. one tiny GPU test (CudaDeviceCheck.*, BRT_REQUIRE_GPU=1) says whether the device is
#     usable, with the CUDA error's name when it is not;
#  4. compute-sanitizer is found and tried once (it refuses the device on some runtimes).
# Sets: LDP (LD_LIBRARY_PATH for the bundle's binaries), LOADS[bin] (ok or why not),
# DEVICE_OK (1/0), DEVICE_WHY (DEVICE_SHORT: the CUDA error's name), SANITIZER (its path, or
# empty), SANITIZER_WHY.

declare -A LOADS=()
LDP=""
DEVICE_OK=0
DEVICE_WHY="not checked"
DEVICE_SHORT="not checked"
SANITIZER=""
SANITIZER_WHY="not checked"

# The folders this machine's CUDA, driver and wheel libraries may live in, most likely first.
candidate_lib_dirs() {
  local d c s sp
  # The machine's own LD_LIBRARY_PATH first: its image says where its libraries are.
  for d in ${HOST_LDP//:/ }; do [ -d "$d" ] && echo "$d"; done
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/wsl/lib; do [ -d "$d" ] && echo "$d"; done
  for c in /usr/local/cuda /usr/local/cuda-*; do
    for s in lib64 targets/x86_64-linux/lib lib; do [ -d "$c/$s" ] && echo "$c/$s"; done
  done
  {
    for d in /opt/torch/.venv/lib/python3*/site-packages; do echo "$d"; done
    timeout 30 "${PEER_PYTHON:-python3}" -c \
      'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null
    find /opt /root /home /usr/local /workspace -maxdepth 4 -name pyvenv.cfg 2>/dev/null |
      while read -r c; do for s in "$(dirname "$c")"/lib/python3*/site-packages; do echo "$s"; done; done
  } | awk '!seen[$0]++' | while read -r sp; do
    [ -d "$sp/nvidia" ] && find "$sp/nvidia" -maxdepth 4 -name 'lib*.so*' -not -path '*/stubs/*' -printf '%h\n' 2>/dev/null | sort -u
  done
  for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /lib64; do [ -d "$d" ] && echo "$d"; done
}

# Adds DIR to LDP unless it is there.
ldp_add() {
  case ":$LDP:" in *":$1:"*) ;; *) LDP="$LDP:$1" ;; esac
}

# The sonames that no file of the bundle can find with LDP (ldd over all of them at once).
missing_sonames() {
  LD_LIBRARY_PATH=$LDP ldd "$B"/bin/* "$B"/lib/* "$B"/mpi/*/*.so 2>/dev/null |
    awk '$2 == "=>" && $3 == "not" {print $1}' | sort -u
}

# Step 1: LDP from the bundle's lib/ and the folders that supply what it lacks.
resolve_libraries() {
  local log=$LOGS/libraries.txt round soname d found=" " notfound=""
  LDP=$B/lib
  local dirs
  dirs=$(candidate_lib_dirs | awk '!seen[$0]++')
  {
    echo "candidate folders, in order of preference:"
    sed 's/^/  /' <<<"$dirs"
  } >"$log"
  for round in 1 2 3 4 5; do
    local added=0
    for soname in $(missing_sonames); do
      case "$found" in *" $soname "*) continue ;; esac
      for d in $dirs; do
        if [ -e "$d/$soname" ]; then
          ldp_add "$d"
          found="$found$soname "
          added=1
          echo "round $round: $soname <- $d/$soname" >>"$log"
          break
        fi
      done
    done
    [ "$added" = 0 ] && break
  done
  notfound=$(missing_sonames | tr '\n' ' ')
  # The driver library is not a link-time need (the CUDA runtime opens it): look for it too.
  local cuda_driver
  cuda_driver=$(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" && /x86-64/ {print $NF; exit}')
  if [ -z "$cuda_driver" ]; then
    for d in $dirs; do
      if [ -e "$d/libcuda.so.1" ]; then
        cuda_driver=$d/libcuda.so.1
        ldp_add "$d"
        break
      fi
    done
  fi
  # Last, the machine's own LD_LIBRARY_PATH, for what the CUDA runtime opens later.
  for d in ${HOST_LDP//:/ }; do ldp_add "$d"; done
  {
    echo "LD_LIBRARY_PATH for the bundle's binaries: $LDP"
    echo "libcuda.so.1 (the driver, opened by the CUDA runtime): ${cuda_driver:-not found}"
    echo "--- what each binary loads from outside the bundle"
    local f
    for f in "$B"/bin/*; do
      echo "$(basename "$f"):"
      LD_LIBRARY_PATH=$LDP ldd "$f" 2>&1 | grep -v "$B/lib/" | sed 's/^\s*/  /'
    done
  } >>"$log"
  local cuda_from
  cuda_from=$(LD_LIBRARY_PATH=$LDP ldd "$B"/bin/* 2>/dev/null |
    awk '$2 == "=>" && $3 ~ /^\// && $1 ~ /^lib(cublas|cublasLt|cufft|cudart|nccl)\.so/ {print $1 "=" $3}' | sort -u | tr '\n' ' ')
  if [ -z "$notfound" ]; then
    say "preflight: libraries: ok; CUDA's from the image: ${cuda_from:-none}; libcuda.so.1: ${cuda_driver:-NOT FOUND}"
  else
    say "preflight: libraries: MISSING $notfound(in neither the bundle, the ldconfig cache nor a" \
      "candidate folder: libraries.txt); CUDA's found: ${cuda_from:-none}; libcuda.so.1: ${cuda_driver:-NOT FOUND}"
  fi
}

# Step 2 for one binary: the loader's verdict (ldd -r) and one start. Sets LOADS[name].
smoke_load() {
  local f=$1 name
  name=$(basename "$f")
  local log=$LOGS/load-$name.log errors
  LD_LIBRARY_PATH=$LDP ldd -r "$f" >"$log" 2>&1
  errors=$(loader_errors "$log")
  if [ -n "$errors" ]; then
    # A missing library's undefined symbols follow from it: name the library only.
    grep -q 'not found' <<<"$errors" && errors=$(grep 'not found' <<<"$errors")
    LOADS[$name]="the loader refuses it: $(head -3 <<<"$errors" | sed 's/^\s*//; s/\s\+/ /g' | paste -sd';' | sed 's/;/; /g')"
    say "preflight: load $name: FAILED: ${LOADS[$name]} (its steps are skipped)"
    FAILED=$((FAILED + 1))
    return
  fi
  local cmd=() what
  case "$name" in
    test_*) cmd=("$f" --gtest_list_tests) ;;
    brt-dist) cmd=("$f" --help) what="--help" ;;
    # No device visible, and allowed to say so (a benchmark fails on no device under
    # BRT_REQUIRE_GPU=1, which run exports when nvidia-smi lists a GPU).
    bench_cuda_train) cmd=(env BRT_REQUIRE_GPU=0 CUDA_VISIBLE_DEVICES= "$f" --steps 1 configs/tiny.toml) ;;
    *) cmd=(env BRT_REQUIRE_GPU=0 CUDA_VISIBLE_DEVICES= "$f") ;;
  esac
  what=${what:-"started with no device visible: says skipped"}
  local run_log=$LOGS/start-$name.log
  if ! step "preflight: start $name" "$(expected "preflight: start")" 30 "$run_log" env LD_LIBRARY_PATH="$LDP" "${cmd[@]}"; then
    [ "$STEP_RC" = 200 ] && { LOADS[$name]="not started (deadline)"; return; }
    errors=$(loader_errors "$run_log")
    LOADS[$name]="$(rc_words "$STEP_RC") at start: $(echo "${errors:-$(tail -2 "$run_log")}" | head -2 | tr '\n' ';')"
    say "preflight: load $name: FAILED: ${LOADS[$name]} (its steps are skipped)"
    FAILED=$((FAILED + 1))
    return
  fi
  LOADS[$name]=ok
  case "$name" in
    test_*)
      sed -n 's/^\([^ #][^ ]*\.\)\( .*\)\{0,1\}$/\1/p' "$run_log" | sed 's/\.$//' >"$WORK/$name.suites"
      what="$(wc -l <"$WORK/$name.suites") suites, $(grep -c '^  ' "$run_log") tests"
      ;;
  esac
  say "preflight: load $name: ok ($what)"
}

# The CUDA error named in LOG, if any.
cuda_error_name() {
  grep -oE 'cudaError[A-Za-z]+|CUDA_ERROR_[A-Z_]+|CUBLAS_STATUS_[A-Z_]+|CUFFT_[A-Z_]+|ncclError[A-Za-z]*' "$1" | head -1
}

# gtest's totals in LOG: "PASSED FAILED SKIPPED".
gtest_counts() {
  local p f s
  p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$1" | tail -1)
  f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$1" | tail -1)
  s=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$1" | tail -1)
  echo "${p:-0} ${f:-0} ${s:-0}"
}

# Step 3: the device check.
device_check() {
  local listed=$1 log=$LOGS/device-check.log name=""
  if [ "${LOADS[test_cuda_kernels]:-}" != ok ]; then
    DEVICE_WHY="not checked: test_cuda_kernels does not load"
  elif step "preflight: device" "$(expected "preflight: device")" 60 "$log" env LD_LIBRARY_PATH="$LDP" BRT_REQUIRE_GPU=1 \
    "$B/bin/test_cuda_kernels" --gtest_filter='CudaDeviceCheck.*' --gtest_output="xml:$LOGS/device-check.xml"; then
    local p f s
    read -r p f s <<<"$(gtest_counts "$log")"
    if [ "$p" -ge 1 ] && [ "$f" = 0 ] && [ "$s" = 0 ]; then
      DEVICE_OK=1
      DEVICE_WHY="CudaDeviceCheck passed: $(sed -n 's/^device 0: //p' "$log" | head -1)"
    else
      DEVICE_WHY="CudaDeviceCheck.* is not in this build (passed $p, failed $f, skipped $s)"
      # An older bundle: trust nvidia-smi, and BRT_REQUIRE_GPU=1 turns every skip into a failure.
      [ "$listed" = 1 ] && DEVICE_OK=1 && DEVICE_WHY="$DEVICE_WHY; nvidia-smi lists a GPU: trying it"
    fi
  elif [ "$STEP_RC" = 200 ]; then
    DEVICE_WHY="not checked (deadline)"
  else
    name=$(cuda_error_name "$log")
    DEVICE_WHY="${name:-no CUDA error named}: $(grep -v '^#' "$log" | grep -m1 -E 'cudaError|CUDA_ERROR|BRT_REQUIRE_GPU|exception|rror' | cut -c1-200) ($(rc_words "$STEP_RC"))"
  fi
  DEVICE_SHORT=${name:-${DEVICE_WHY:0:80}}
  if [ "$DEVICE_OK" = 1 ]; then
    say "preflight: device: ok: $DEVICE_WHY"
  else
    say "preflight: device: UNUSABLE: $DEVICE_WHY"
  fi
}

# Step 4: compute-sanitizer, found and tried once on the device check.
sanitizer_check() {
  local s log=$LOGS/sanitizer-check.log
  s=$(command -v compute-sanitizer 2>/dev/null)
  for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer \
    /usr/local/cuda-*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer; do
    [ -n "$s" ] && break
    [ -x "$c" ] && s=$c
  done
  if [ -z "$s" ]; then
    SANITIZER_WHY="compute-sanitizer not found"
  elif [ "$DEVICE_OK" != 1 ]; then
    SANITIZER_WHY="compute-sanitizer not tried: the device is unusable"
  elif step "preflight: compute-sanitizer" "$(expected "preflight: compute-sanitizer")" 120 "$log" env LD_LIBRARY_PATH="$LDP" BRT_REQUIRE_GPU=1 \
    "$s" --tool memcheck --error-exitcode 99 "$B/bin/test_cuda_kernels" --gtest_filter='CudaDeviceCheck.*' &&
    ! grep -v '^# ' "$log" | grep -iE 'not supported|error 999|unable to|failed to' >/dev/null; then
    SANITIZER=$s
    SANITIZER_WHY="compute-sanitizer works: $("$s" --version 2>&1 | grep -m1 -iE 'version' | cut -c1-80)"
  elif [ "$STEP_RC" = 200 ]; then
    SANITIZER_WHY="compute-sanitizer not tried (deadline)"
  else
    local why
    why=$(grep -v '^# ' "$log" | grep -m2 -iE 'not supported|error|fail' | sed 's/^=* *//' | paste -sd' ')
    SANITIZER_WHY="compute-sanitizer refuses this device: ${why:0:200} ($(rc_words "$STEP_RC"))"
  fi
  say "preflight: $SANITIZER_WHY"
}

preflight() {
  local listed=$1 f
  resolve_libraries
  for f in "$B"/bin/*; do smoke_load "$f"; done
  device_check "$listed"
  case ",$PARTS," in *,sanitize,*) sanitizer_check ;; esac
  pack_logs
}
