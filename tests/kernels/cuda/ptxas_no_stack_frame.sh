#!/usr/bin/env bash
# Every attention kernel keeps its state in registers and shared memory: ptxas reports no stack
# frame (a frame means local memory, e.g. an array indexed at run time, or spills). Compiles
# the attention sources' device code for sm_90 with `-Xptxas -v` and fails naming any kernel with a frame.
# Usage: ptxas_no_stack_frame.sh NVCC REPO_ROOT
set -euo pipefail
nvcc=$1 repo=$2
sources=(window_attention cross_attention attention_tc cross_attention_tc attention_reduce)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
kernels=0 bad=0
for src in "${sources[@]}"; do
  # --cubin: the device code alone, which is all ptxas sees (the host pass took half the time).
  "$nvcc" -std=c++17 -arch=sm_90 -O3 -I"$repo" -Xptxas -v --cubin "$repo/kernels/cuda/attention/$src.cu" \
    -o "$work/$src.cubin" >"$work/$src.log" 2>&1 || { cat "$work/$src.log"; exit 1; }
  # "Function properties for NAME" is followed by "N bytes stack frame, ..." for each kernel.
  while read -r name frame; do
    kernels=$((kernels + 1))
    if [ "$frame" != 0 ]; then
      echo "FAIL $src.cu: $(echo "$name" | c++filt) has a $frame-byte stack frame"
      bad=$((bad + 1))
    fi
  done < <(awk '/Function properties for/ {name = $NF} /bytes stack frame/ {print name, $1}' "$work/$src.log")
done
echo "ptxas: $kernels attention kernels in ${#sources[@]} files, $bad with a stack frame"
[ "$kernels" -gt 0 ] && [ "$bad" -eq 0 ]
