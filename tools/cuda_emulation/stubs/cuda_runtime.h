// Host emulation of the small part of CUDA that kernels/cuda uses (tools/cuda_emulation,
// docs/gpu.md): every block runs as blockDim real threads (one block at a time), warps
// exchange shuffles through a slot array and a 32-thread barrier, __syncthreads is a block
// barrier, __shared__ becomes a function-static array (safe because blocks run one at a
// time), device memory is host memory. It checks the kernels' indexing and arithmetic, not
// CUDA's memory model or performance. Development tool only; never linked into the project.
#pragma once
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static
using std::min; using std::max;
struct dim3 { unsigned x = 1, y = 1, z = 1; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
enum cudaError_t { cudaSuccess = 0, cudaErrorNotReady = 600, cudaErrorStreamCaptureUnsupported = 900,
                   cudaErrorStreamCaptureInvalidated = 901 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
struct CUstream_st;
using cudaStream_t = CUstream_st*;
inline const char* cudaGetErrorName(cudaError_t) { return "err"; }
inline const char* cudaGetErrorString(cudaError_t) { return "err"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaMalloc(void** p, size_t n) { *p = std::aligned_alloc(256, (n + 255) / 256 * 256); return cudaSuccess; }
inline cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
constexpr unsigned kEmuFull = 0xffffffffu;

namespace emu {
struct Warp {
  std::barrier<> bar{32};
  double slot[32];
};
struct Block {
  std::unique_ptr<std::barrier<>> bar;
  std::vector<std::unique_ptr<Warp>> warps;
  std::vector<char> smem;
};
inline thread_local Block* block = nullptr;
inline std::mutex atomic_mutex;
inline Warp& warp() { return *block->warps[threadIdx.x / 32]; }
template <typename V> V shfl(V v, int src) {
  Warp& w = warp();
  const int lane = threadIdx.x % 32;
  std::memcpy(&w.slot[lane], &v, sizeof(V));
  w.bar.arrive_and_wait();
  V r; std::memcpy(&r, &w.slot[src], sizeof(V));
  w.bar.arrive_and_wait();
  return r;
}
// Stream capture (CUDA graphs, kernels/cuda/stream_graph.cpp): while the one emulated stream
// captures, work is recorded instead of run, with its kind and name, and a graph launch runs
// the records in order. A wait while capturing invalidates the capture, as on a GPU.
enum class NodeKind { kKernel, kCopy, kFill };
struct Node { NodeKind kind; const char* name; std::function<void()> run; };
struct Capture { bool active = false, invalidated = false; std::vector<Node> nodes; };
inline Capture& capture() { static Capture c; return c; }
// Kernels run (not recorded) by name, for launch profiles (tools/cuda_emulation/graph.cpp).
struct LaunchCount { const char* name; long count; };
inline std::vector<LaunchCount>& launch_counts() { static std::vector<LaunchCount> v; return v; }
inline void count_launch(const char* name) {
  for (auto& c : launch_counts()) if (std::strcmp(c.name, name) == 0) { ++c.count; return; }
  launch_counts().push_back({name, 1});
}
// Runs `work` now, or records it while capturing.
inline void enqueue(NodeKind kind, const char* name, std::function<void()> work) {
  if (capture().active) { capture().nodes.push_back({kind, name, std::move(work)}); return; }
  count_launch(name);
  work();
}
inline cudaError_t wait_point() {  // a stream or device wait
  if (!capture().active) return cudaSuccess;
  capture().invalidated = true;
  return cudaErrorStreamCaptureUnsupported;
}
inline void launch_now(dim3 grid, dim3 blk, size_t smem, const std::function<void()>& body) {
  gridDim = grid; blockDim = blk;
  const unsigned threads = blk.x * blk.y;
  for (unsigned bx = 0; bx < grid.x; ++bx) for (unsigned by = 0; by < grid.y; ++by) {
    Block b;
    b.bar = std::make_unique<std::barrier<>>(threads);
    for (unsigned w = 0; w < (threads + 31) / 32; ++w) b.warps.push_back(std::make_unique<Warp>());
    b.smem.assign(smem + 16, 0);
    std::vector<std::thread> ts;
    for (unsigned ty = 0; ty < blk.y; ++ty) for (unsigned tx = 0; tx < blk.x; ++tx) {
      ts.emplace_back([&, tx, ty] { block = &b; blockIdx = dim3(bx, by); threadIdx = dim3(tx, ty); body(); });
    }
    for (auto& t : ts) t.join();
  }
}
inline void launch(dim3 grid, dim3 blk, size_t smem, cudaStream_t, const std::function<void()>& body,
                   const char* name = "kernel") {
  enqueue(NodeKind::kKernel, name, [grid, blk, smem, body] { launch_now(grid, blk, smem, body); });
}
inline void launch(int grid, int blk, size_t smem, cudaStream_t s, const std::function<void()>& body, const char* name = "kernel") { launch(dim3(grid), dim3(blk), smem, s, body, name); }
inline void launch(dim3 grid, dim3 blk, int smem, cudaStream_t s, const std::function<void()>& body, const char* name = "kernel") { launch(grid, blk, size_t(smem), s, body, name); }
inline void launch(int grid, int blk, int smem, cudaStream_t s, const std::function<void()>& body, const char* name = "kernel") { launch(dim3(grid), dim3(blk), size_t(smem), s, body, name); }
}  // namespace emu
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) {
  emu::enqueue(emu::NodeKind::kCopy, "cudaMemcpyAsync", [d, s, n] { std::memcpy(d, s, n); });
  return cudaSuccess;
}
template <typename V> V __shfl_sync(unsigned, V v, int src) { return emu::shfl(v, src); }
template <typename V> V __shfl_xor_sync(unsigned, V v, int off) { return emu::shfl(v, int(threadIdx.x % 32) ^ off); }
inline void __syncwarp() { emu::warp().bar.arrive_and_wait(); }
inline void __syncthreads() { emu::block->bar->arrive_and_wait(); }
inline int atomicMin(int* p, int v) { std::lock_guard<std::mutex> l(emu::atomic_mutex); int o = *p; *p = std::min(o, v); return o; }
struct float2 { float x, y; };
inline float2 make_float2(float a, float b) { return {a, b}; }
// The runtime calls of the backend class itself (cuda_backend.cpp, device_memory.cpp), for
// tools/cuda_emulation/training.cpp: one emulated device; streams are in-order = immediate.
#include "emu_backend_runtime.h"
