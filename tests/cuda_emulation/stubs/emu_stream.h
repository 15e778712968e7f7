// Streams, events and stream capture in the strict emulator (docs/gpu.md "The host emulator").
// Every stream, the legacy default stream included, is a FIFO of work that runs only when the
// host waits for it (a synchronisation, a blocking copy, or the second query of an unfinished
// event or stream): lazily, so a kernel whose input was never ordered before it reads what
// the memory held, not what the host meant. Cross-stream order exists only through events and
// the legacy stream's implicit barrier with blocking (not cudaStreamNonBlocking) streams, as
// the CUDA programming guide defines it. Where several streams must run, the order is seeded.
// While a stream captures, its work is recorded as graph nodes instead; calls CUDA forbids
// during a capture fail with cudaErrorStreamCaptureUnsupported and invalidate it.
#pragma once
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "emu_core.h"

struct CUstream_st;
using cudaStream_t = CUstream_st*;
#define cudaStreamLegacy (reinterpret_cast<cudaStream_t>(0x1))
#define cudaStreamPerThread (reinterpret_cast<cudaStream_t>(0x2))

namespace emu {

enum class NodeKind { kKernel, kCopy, kFill };
struct Node { NodeKind kind; const char* name; std::function<void()> run; };
struct Dep { CUstream_st* stream; uint64_t seq; };
// run may be empty (a marker). A stalled item never runs: what waits for it waits forever, as
// behind an NCCL kernel whose peer died (the NCCL emulation's EMU_NCCL_STALL_AT).
struct Item { std::vector<Dep> deps; std::function<void()> run; bool stalled = false; };
enum class CaptureMode { kGlobal = 0, kThreadLocal = 1, kRelaxed = 2 };
struct Capture {
  CaptureMode mode;
  std::thread::id thread;
  bool invalidated = false;
  std::vector<Node> nodes;
};

}  // namespace emu

struct CUstream_st {
  bool legacy = false, blocking = true, destroyed = false;
  std::deque<emu::Item> queue;
  uint64_t enqueued = 0, done = 0;
  uint64_t queried_at = 0;  // enqueued count when cudaStreamQuery last said "not ready"
  std::unique_ptr<emu::Capture> capture;
};

namespace emu {

inline CUstream_st& legacy_stream() { static CUstream_st s{true, true}; return s; }
inline CUstream_st& per_thread_stream() { static CUstream_st s{false, true}; return s; }
inline std::vector<CUstream_st*>& streams() {  // every stream ever made (destroyed ones drain)
  static std::vector<CUstream_st*> v{&legacy_stream(), &per_thread_stream()};
  return v;
}
// The stream a handle names; nullptr for a destroyed or unknown handle.
inline CUstream_st* resolve(cudaStream_t s) {
  if (s == nullptr || s == cudaStreamLegacy) return &legacy_stream();
  if (s == cudaStreamPerThread) return &per_thread_stream();
  for (CUstream_st* t : streams()) if (t == s) return t->destroyed ? nullptr : t;
  return nullptr;
}

// Kernels run (not recorded) by name, for launch profiles (tests/cuda_emulation/graph.cpp).
struct LaunchCount { const char* name; long count; };
inline std::vector<LaunchCount>& launch_counts() { static std::vector<LaunchCount> v; return v; }
inline void count_launch(const char* name) {
  for (auto& c : launch_counts()) if (std::strcmp(c.name, name) == 0) { ++c.count; return; }
  launch_counts().push_back({name, 1});
}

// ---- running queued work ------------------------------------------------------------------
inline void run_item(Item& it) {
  if (it.run && sticky_error() == cudaSuccess) it.run();  // after a fault nothing runs
}
// Runs stream s up to (and including) its item number `upto`, first running whatever each
// item waits for (in a seeded order when it waits for several).
// Whether running stream s up to item `upto` meets a stalled item (it can never finish).
inline bool stalled_before(CUstream_st* s, uint64_t upto) {
  std::vector<Dep> goals{{s, upto}};
  std::vector<std::pair<CUstream_st*, uint64_t>> seen;
  while (!goals.empty()) {
    const Dep g = goals.back();
    goals.pop_back();
    for (uint64_t i = g.stream->done; i < g.seq && i - g.stream->done < g.stream->queue.size(); ++i) {
      const Item& it = g.stream->queue[size_t(i - g.stream->done)];
      if (it.stalled) return true;
      for (const Dep& d : it.deps)
        if (d.stream->done < d.seq && std::find(seen.begin(), seen.end(), std::make_pair(d.stream, d.seq)) == seen.end()) {
          seen.emplace_back(d.stream, d.seq);
          goals.push_back(d);
        }
    }
  }
  return false;
}
inline void advance(CUstream_st* s, uint64_t upto) {
  std::vector<Dep> goals{{s, upto}};
  while (!goals.empty()) {
    const Dep g = goals.back();
    if (g.stream->done >= g.seq) { goals.pop_back(); continue; }
    Item& head = g.stream->queue.front();
    if (head.stalled) {  // a real GPU would wait here forever: say so instead of hanging
      std::fprintf(stderr, "emulator: a blocking wait reached a stalled collective; on a GPU it "
                           "would never return (use a polled wait)\n");
      std::abort();
    }
    std::vector<Dep> unmet;
    for (const Dep& d : head.deps) if (d.stream->done < d.seq) unmet.push_back(d);
    if (!unmet.empty()) { goals.push_back(unmet[rng().below(unsigned(unmet.size()))]); continue; }
    Item it = std::move(head);
    g.stream->queue.pop_front();
    run_item(it);
    ++g.stream->done;
  }
}
inline void drain(CUstream_st* s) { advance(s, s->enqueued); }
inline void drain_all() {  // cudaDeviceSynchronize: every stream, in a seeded order
  std::vector<CUstream_st*> order = streams();
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng().below(unsigned(i))]);
  for (CUstream_st* s : order) drain(s);
}

// ---- capture ------------------------------------------------------------------------------
inline Capture* capture_of(CUstream_st* s) { return s == nullptr ? nullptr : s->capture.get(); }
inline bool is_capturing(cudaStream_t h) { return capture_of(resolve(h)) != nullptr; }
// A call CUDA forbids while this thread captures (cudaStreamCaptureModeGlobal or ThreadLocal
// on this thread; Global captures of other threads too): cudaMalloc/cudaFree, synchronous
// copies and fills, synchronisations and queries. It fails and invalidates the capture.
inline cudaError_t unsafe_call(const char* what) {
  cudaError_t result = cudaSuccess;
  for (CUstream_st* s : streams()) {
    Capture* c = capture_of(s);
    if (c == nullptr || c->mode == CaptureMode::kRelaxed) continue;
    if (c->mode == CaptureMode::kThreadLocal && c->thread != std::this_thread::get_id()) continue;
    if (!c->invalidated) fail(cudaErrorStreamCaptureUnsupported, std::string(what) + " while a stream captures: the capture is invalidated");
    c->invalidated = true;
    result = cudaErrorStreamCaptureUnsupported;
  }
  return result;
}
inline bool capturing_blocking_stream() {
  for (CUstream_st* s : streams()) if (s->capture && s->blocking && !s->legacy) return true;
  return false;
}

// ---- enqueueing ---------------------------------------------------------------------------
// Puts work on stream `h` (or records it, while the stream captures). Work on the legacy
// stream waits for everything already on blocking streams; work on a blocking stream waits
// for everything already on the legacy stream.
inline cudaError_t enqueue_on(cudaStream_t h, NodeKind kind, const char* name, std::function<void()> work,
                              std::vector<Dep> deps = {}, bool counted = true, bool stalled = false) {
  if (sticky_error() != cudaSuccess) return sticky_error();
  CUstream_st* s = resolve(h);
  if (s == nullptr) return fail(cudaErrorInvalidResourceHandle, std::string(name) + " on a destroyed or unknown stream");
  if (Capture* c = capture_of(s)) {
    if (c->invalidated) return cudaErrorStreamCaptureInvalidated;
    c->nodes.push_back({kind, name, std::move(work)});
    return cudaSuccess;
  }
  if (s->legacy && capturing_blocking_stream()) {
    for (CUstream_st* t : streams()) if (t->capture && t->blocking) t->capture->invalidated = true;
    return fail(cudaErrorStreamCaptureImplicit, std::string(name) + " on the legacy stream while a blocking stream captures");
  }
  if (s->legacy) {
    for (CUstream_st* t : streams())
      if (!t->legacy && t->blocking && t->enqueued > t->done) deps.push_back({t, t->enqueued});
  } else if (s->blocking) {
    CUstream_st* l = &legacy_stream();
    if (l->enqueued > l->done) deps.push_back({l, l->enqueued});
  }
  if (counted && work) count_launch(name);
  s->queue.push_back({std::move(deps), std::move(work), stalled});
  ++s->enqueued;
  return cudaSuccess;
}
inline cudaError_t enqueue(cudaStream_t h, NodeKind kind, const char* name, std::function<void()> work) {
  return enqueue_on(h, kind, name, std::move(work));
}

}  // namespace emu
