// Host emulation of the part of CUDA that kernels/cuda uses (tests/cuda_emulation, docs/gpu.md
// "The host emulator"), strict where CUDA leaves room: blocks in a shuffled order, threads as
// fibers interleaved at random between barriers (emu_block.h), every launch checked against
// the device's limits (emu_launch.h), streams that run only when waited for, with the legacy
// stream's rules, pageable copies that land late, and the capture rules (emu_stream.h,
// emu_runtime_*.h). Device memory is host memory. Every choice is seeded (EMU_SEED).
// Development tool only; never linked into the project.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "emu_core.h"
#include "emu_block.h"
#include "emu_stream.h"
#include "emu_launch.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // transform.py rewrites the declarations it recognises (emu_block.h)
using std::min; using std::max;
constexpr unsigned kEmuFull = 0xffffffffu;

template <typename V> V __shfl_sync(unsigned mask, V v, int src) { return emu::shfl(mask, v, src); }
template <typename V> V __shfl_xor_sync(unsigned mask, V v, int off) {
  return emu::shfl(mask, v, int(emu::thread_rank() % 32) ^ off);
}
inline void __syncwarp(unsigned mask = kEmuFull) { emu::warp_barrier(mask); }
inline void __syncthreads() { emu::block_barrier(); }
// Fibers of one block never run at once, so a read-modify-write is atomic by construction.
inline int atomicMin(int* p, int v) { const int o = *p; *p = std::min(o, v); return o; }
inline int atomicAdd(int* p, int v) { const int o = *p; *p = o + v; return o; }
struct float2 { float x, y; };
inline float2 make_float2(float a, float b) { return {a, b}; }

inline cudaError_t cudaGetLastError() {
  if (emu::sticky_error() != cudaSuccess) return emu::sticky_error();
  const cudaError_t e = emu::last_error();
  emu::last_error() = cudaSuccess;
  return e;
}
inline cudaError_t cudaPeekAtLastError() {
  return emu::sticky_error() != cudaSuccess ? emu::sticky_error() : emu::last_error();
}
template <typename F>
cudaError_t cudaFuncSetAttribute(F*, cudaFuncAttribute, int) {
  return emu::fail(cudaErrorInvalidValue, "cudaFuncSetAttribute not rewritten by transform.py (called outside kernels/cuda?)");
}

// The runtime calls of the backend class and its users: memory and copies, streams and
// events, device queries, graphs.
#include "emu_runtime_memory.h"
#include "emu_runtime_streams.h"
#include "emu_runtime_graphs.h"
