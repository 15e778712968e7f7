// How the strict emulator runs a kernel (docs/gpu.md "The host emulator"): the blocks of the
// grid one at a time in a seeded shuffled order; the threads of a block as fibers that each run
// to their next barrier, picked in a seeded random order, so every barrier-free stretch of code
// is interleaved differently from lock-step; shuffles through per-warp slots between two warp
// barriers. Shared memory (static and dynamic) is filled with 0xFF bytes at each block's start.
// Faults (a barrier not every thread reaches, a shuffle naming an absent lane, static shared
// memory over 48 KiB) stop the launch and leave a sticky error, as a GPU does.
#pragma once
#include <functional>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "emu_core.h"
#include "emu_fiber.h"

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

namespace emu {

constexpr size_t kStaticSharedLimit = size_t(48) << 10;    // per block, without opt-in
constexpr size_t kSharedOptinLimit = size_t(227) << 10;    // sm_90: static + dynamic

enum class ThreadState { kReady, kBlocked, kDone };
struct EmuThread {
  Fiber fiber;
  dim3 idx;
  ThreadState state = ThreadState::kReady;
  int waiting_at = 0;  // -1: the block barrier; w >= 0: warp w's barrier
};
struct Warp {
  double slot[32];
  unsigned arrived = 0, mask = 0, lanes = 0;  // lanes: the threads this warp has
};
struct Block {
  const char* kernel = "kernel";
  const std::function<void()>* body = nullptr;
  std::vector<EmuThread> threads;
  std::vector<Warp> warps;
  std::vector<unsigned> runnable;
  unsigned current = 0, block_arrived = 0;
  bool faulted = false;
  std::vector<char> smem;              // dynamic shared memory
  std::set<const void*> shared_seen;   // static __shared__ arrays met in this block
  size_t static_shared = 0, dynamic_shared = 0;
};
inline thread_local Block* block = nullptr;

inline unsigned thread_rank() { return block->current; }
inline std::string where() {
  const dim3 t = block->threads[block->current].idx;
  return std::string(block->kernel) + " block (" + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," +
         std::to_string(blockIdx.z) + ") thread (" + std::to_string(t.x) + "," + std::to_string(t.y) + "," +
         std::to_string(t.z) + ")";
}
// A fault inside a kernel: recorded, and this emulated thread never runs again.
[[noreturn]] inline void thread_fault(const std::string& why) {
  fault(where() + ": " + why);
  block->faulted = true;
  block->threads[block->current].state = ThreadState::kDone;
  block->threads[block->current].fiber.yield_to_scheduler();
  std::abort();  // never resumed
}
inline void wait_here(int barrier) {
  EmuThread& t = block->threads[block->current];
  t.state = ThreadState::kBlocked;
  t.waiting_at = barrier;
}
inline void release(int barrier, unsigned first, unsigned count) {
  for (unsigned i = first; i < first + count; ++i) {
    EmuThread& t = block->threads[i];
    if (t.state == ThreadState::kBlocked && t.waiting_at == barrier) {
      t.state = ThreadState::kReady;
      block->runnable.push_back(i);
    }
  }
}
inline void block_barrier() {  // __syncthreads
  Block& b = *block;
  wait_here(-1);
  if (++b.block_arrived == b.threads.size()) {
    b.block_arrived = 0;
    release(-1, 0, unsigned(b.threads.size()));
  }
  b.threads[b.current].fiber.yield_to_scheduler();
}
inline void warp_barrier(unsigned mask) {  // __syncwarp(mask) and each half of a shuffle
  Block& b = *block;
  const unsigned w = b.current / 32, lane = b.current % 32;
  Warp& wp = b.warps[w];
  if ((mask >> lane & 1u) == 0) thread_fault("warp barrier with a mask that does not name the calling lane");
  if ((mask & ~wp.lanes) != 0) thread_fault("warp barrier mask names lanes that do not exist in this (partial) warp");
  if (wp.arrived != 0 && wp.mask != mask) thread_fault("lanes of one warp meet at barriers with different masks");
  wp.mask = mask;
  wp.arrived |= 1u << lane;
  wait_here(int(w));
  if (wp.arrived == mask) {
    wp.arrived = 0;
    release(int(w), w * 32, unsigned(__builtin_popcount(wp.lanes)));
  }
  b.threads[b.current].fiber.yield_to_scheduler();
}
template <typename V> V shfl(unsigned mask, V v, int src) {
  Warp& w = block->warps[block->current / 32];
  const unsigned lane = block->current % 32;
  static_assert(sizeof(V) <= sizeof(double));
  std::memcpy(&w.slot[lane], &v, sizeof(V));
  warp_barrier(mask);
  src &= 31;
  if ((mask >> src & 1u) == 0) thread_fault("shuffle reads lane " + std::to_string(src) + ", which is not in the mask");
  V r;
  std::memcpy(&r, &w.slot[src], sizeof(V));
  warp_barrier(mask);
  return r;
}
// Called (by transform.py's rewrite) where a kernel declares a __shared__ array: the first
// thread of the block to get there fills it with 0xFF and counts its size.
inline void shared_array(void* p, size_t bytes) {
  Block& b = *block;
  if (!b.shared_seen.insert(p).second) return;
  std::memset(p, 0xFF, bytes);
  b.static_shared += bytes;
  if (b.static_shared > kStaticSharedLimit)
    thread_fault("static __shared__ memory " + std::to_string(b.static_shared) + " bytes exceeds 48 KiB");
  if (b.static_shared + b.dynamic_shared > kSharedOptinLimit)
    thread_fault("static + dynamic shared memory exceeds the 227 KiB a block can have");
}

inline void thread_entry() {
  Block& b = *block;
  (*b.body)();
  b.threads[b.current].state = ThreadState::kDone;
  b.threads[b.current].fiber.yield_to_scheduler();
  std::abort();  // never resumed
}
inline std::string describe_deadlock(const Block& b) {
  unsigned at_block = 0, at_warp = 0, done = 0;
  for (const auto& t : b.threads) {
    if (t.state == ThreadState::kDone) ++done;
    else if (t.waiting_at < 0) ++at_block;
    else ++at_warp;
  }
  return std::string(b.kernel) + " block (" + std::to_string(blockIdx.x) + "," + std::to_string(blockIdx.y) + "," +
         std::to_string(blockIdx.z) + "): barrier deadlock: " + std::to_string(at_block) + " threads wait in __syncthreads, " +
         std::to_string(at_warp) + " at a warp barrier, " + std::to_string(done) + " have exited (of " +
         std::to_string(b.threads.size()) + ")";
}
// Runs one block to completion; false after a fault.
inline bool run_block(Block& b, Rng& r) {
  b.runnable.clear();
  b.block_arrived = 0;
  b.shared_seen.clear();
  b.static_shared = 0;
  for (auto& w : b.warps) w.arrived = 0;
  std::memset(b.smem.data(), 0xFF, b.smem.size());
  for (unsigned i = 0; i < b.threads.size(); ++i) {
    b.threads[i].state = ThreadState::kReady;
    b.threads[i].fiber.start(i, thread_entry);
    b.runnable.push_back(i);
  }
  while (!b.runnable.empty()) {
    const unsigned k = r.below(unsigned(b.runnable.size()));
    const unsigned i = b.runnable[k];
    b.runnable[k] = b.runnable.back();
    b.runnable.pop_back();
    b.current = i;
    threadIdx = b.threads[i].idx;
    b.threads[i].fiber.resume();
    if (b.faulted) return false;
  }
  for (const auto& t : b.threads)
    if (t.state != ThreadState::kDone) { fault(describe_deadlock(b)); return false; }
  return true;
}
// Every block of the grid, in a shuffled order.
inline void run_grid(dim3 grid, dim3 blk, size_t smem, const std::function<void()>& body, const char* name,
                     uint64_t launch_number) {
  gridDim = grid;
  blockDim = blk;
  Rng r(seed() ^ (launch_number * 0x9e3779b97f4a7c15ull));
  Block b;
  b.kernel = name;
  b.body = &body;
  const unsigned threads = blk.x * blk.y * blk.z;
  b.threads.resize(threads);
  for (unsigned i = 0; i < threads; ++i) b.threads[i].idx = dim3(i % blk.x, i / blk.x % blk.y, i / (blk.x * blk.y));
  b.warps.resize((threads + 31) / 32);
  for (unsigned w = 0; w < b.warps.size(); ++w) {
    const unsigned n = std::min(32u, threads - 32 * w);
    b.warps[w].lanes = n == 32 ? 0xffffffffu : (1u << n) - 1;
  }
  b.smem.resize(smem + 16);
  b.dynamic_shared = smem;
  const uint64_t total = uint64_t(grid.x) * grid.y * grid.z;
  std::vector<uint64_t> order(total);
  std::iota(order.begin(), order.end(), 0);
  for (uint64_t i = total; i > 1; --i) std::swap(order[i - 1], order[r.next() % i]);
  Block* saved = block;
  block = &b;
  for (const uint64_t id : order) {
    blockIdx = dim3(unsigned(id % grid.x), unsigned(id / grid.x % grid.y), unsigned(id / (uint64_t(grid.x) * grid.y)));
    if (!run_block(b, r)) break;
  }
  block = saved;
}

}  // namespace emu
