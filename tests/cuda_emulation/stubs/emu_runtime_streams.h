// Device queries, streams and events in the strict emulator (included by cuda_runtime.h; the
// scheduling rules are emu_stream.h's). Events: a record is a marker queued on its stream;
// cudaStreamWaitEvent queues a marker that waits for it. cudaEventQuery and cudaStreamQuery
// on unfinished work answer cudaErrorNotReady once, then run what is needed and answer (a
// polling loop terminates; a single query never sees the work done).
#pragma once
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "emu_stream.h"

enum cudaStreamFlags { cudaStreamDefault = 0, cudaStreamNonBlocking = 1 };
struct cudaDeviceProp {
  char name[256];
  int major, minor, multiProcessorCount;
  size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerBlockOptin;
  int maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], warpSize;
};
namespace emu {
// How many devices the emulator reports (EMU_DEVICES, default 1): all of them are this
// process's host memory, so a rank per "device" under mpirun works (run.sh nccltest).
inline int device_count() {
  static const int n = std::getenv("EMU_DEVICES") != nullptr ? std::max(1, std::atoi(std::getenv("EMU_DEVICES"))) : 1;
  return n;
}
inline int& current_device() { static int d = 0; return d; }
}  // namespace emu
inline cudaError_t cudaGetDeviceCount(int* n) { *n = emu::device_count(); return cudaSuccess; }
inline cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= emu::device_count()) return emu::fail(cudaErrorInvalidDevice, "cudaSetDevice: no such emulated device (EMU_DEVICES)");
  emu::current_device() = d;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* d) { *d = emu::current_device(); return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (d < 0 || d >= emu::device_count()) return emu::fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties: no such emulated device");
  *p = cudaDeviceProp{};
  std::strcpy(p->name, "host CUDA emulator (strict, H200 limits)");
  p->major = 9; p->minor = 0; p->multiProcessorCount = 132; p->totalGlobalMem = size_t(1) << 34;
  p->sharedMemPerBlock = emu::kDynamicSharedDefault; p->sharedMemPerBlockOptin = emu::kSharedOptinLimit;
  p->maxThreadsPerBlock = 1024; p->warpSize = 32;
  p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024; p->maxThreadsDim[2] = 64;
  p->maxGridSize[0] = 2147483647; p->maxGridSize[1] = p->maxGridSize[2] = 65535;
  return cudaSuccess;
}

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  auto* t = new CUstream_st();
  t->blocking = (flags & cudaStreamNonBlocking) == 0;
  emu::streams().push_back(t);
  *s = t;
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
// The stream's queued work still runs (at the next wait for it); the handle is dead at once.
inline cudaError_t cudaStreamDestroy(cudaStream_t h) {
  CUstream_st* s = emu::resolve(h);
  if (s == nullptr || s->legacy || h == cudaStreamPerThread) return emu::fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy");
  if (s->capture) return emu::fail(cudaErrorStreamCaptureUnsupported, "cudaStreamDestroy of a capturing stream");
  s->destroyed = true;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t h) {
  if (const cudaError_t e = emu::unsafe_call("cudaStreamSynchronize"); e != cudaSuccess) return e;
  CUstream_st* s = emu::resolve(h);
  if (s == nullptr) return emu::fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize");
  if (s->capture) { s->capture->invalidated = true; return emu::fail(cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize of a capturing stream"); }
  emu::drain(s);
  return emu::sticky_error();
}
inline cudaError_t cudaDeviceSynchronize() {
  if (const cudaError_t e = emu::unsafe_call("cudaDeviceSynchronize"); e != cudaSuccess) return e;
  emu::drain_all();
  return emu::sticky_error();
}
inline cudaError_t cudaStreamQuery(cudaStream_t h) {
  if (const cudaError_t e = emu::unsafe_call("cudaStreamQuery"); e != cudaSuccess) return e;
  CUstream_st* s = emu::resolve(h);
  if (s == nullptr) return emu::fail(cudaErrorInvalidResourceHandle, "cudaStreamQuery");
  if (s->capture) { s->capture->invalidated = true; return emu::fail(cudaErrorStreamCaptureUnsupported, "cudaStreamQuery of a capturing stream"); }
  if (emu::sticky_error() != cudaSuccess) return emu::sticky_error();
  if (s->done == s->enqueued) return cudaSuccess;
  if (emu::stalled_before(s, s->enqueued)) return cudaErrorNotReady;  // never finishes
  if (s->queried_at != s->enqueued) { s->queried_at = s->enqueued; return cudaErrorNotReady; }
  emu::drain(s);
  return emu::sticky_error();
}

enum cudaEventFlags { cudaEventDefault = 0, cudaEventBlockingSync = 1, cudaEventDisableTiming = 2 };
struct CUevent_st {
  unsigned flags = 0;
  CUstream_st* stream = nullptr;  // null: never recorded (complete)
  uint64_t seq = 0;
  bool captured = false, queried = false;
};
using cudaEvent_t = CUevent_st*;
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) { *e = new CUevent_st{flags}; return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
inline cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t h = nullptr) {
  CUstream_st* s = emu::resolve(h);
  if (s == nullptr || e == nullptr) return emu::fail(cudaErrorInvalidResourceHandle, "cudaEventRecord");
  if (s->capture) {  // an event inside a capture orders graph nodes; the emulator's graphs are chains
    if (s->capture->invalidated) return cudaErrorStreamCaptureInvalidated;
    e->captured = true;
    e->stream = nullptr;
    return cudaSuccess;
  }
  if (const cudaError_t r = emu::enqueue_on(h, emu::NodeKind::kKernel, "cudaEventRecord", {}, {}, false); r != cudaSuccess) return r;
  e->stream = s;
  e->seq = s->enqueued;
  e->captured = e->queried = false;
  return cudaSuccess;
}
inline bool emu_event_done(const CUevent_st* e) { return e->stream == nullptr || e->stream->done >= e->seq; }
inline cudaError_t cudaEventQuery(cudaEvent_t e) {
  if (const cudaError_t r = emu::unsafe_call("cudaEventQuery"); r != cudaSuccess) return r;
  if (e->captured) return emu::fail(cudaErrorCapturedEvent, "cudaEventQuery of an event recorded in a capture");
  if (emu::sticky_error() != cudaSuccess) return emu::sticky_error();
  if (emu_event_done(e)) return cudaSuccess;
  if (emu::stalled_before(e->stream, e->seq)) return cudaErrorNotReady;  // never finishes
  if (!e->queried) { e->queried = true; return cudaErrorNotReady; }
  emu::advance(e->stream, e->seq);
  return emu::sticky_error();
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  if (const cudaError_t r = emu::unsafe_call("cudaEventSynchronize"); r != cudaSuccess) return r;
  if (e->captured) return emu::fail(cudaErrorCapturedEvent, "cudaEventSynchronize of an event recorded in a capture");
  if (!emu_event_done(e)) emu::advance(e->stream, e->seq);
  return emu::sticky_error();
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  if ((a->flags | b->flags) & cudaEventDisableTiming) return emu::fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime of a timing-disabled event");
  if (!emu_event_done(a) || !emu_event_done(b)) return cudaErrorNotReady;
  *ms = 1.0f;  // the emulator keeps no time
  return cudaSuccess;
}
inline cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t e, unsigned = 0) {
  CUstream_st* s = emu::resolve(h);
  if (s == nullptr || e == nullptr) return emu::fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent");
  if (e->captured) {
    if (s->capture) return cudaSuccess;  // within the capture: its nodes run in order anyway
    return emu::fail(cudaErrorStreamCaptureUnsupported, "cudaStreamWaitEvent on a captured event: cross-stream capture is not emulated");
  }
  if (s->capture) {
    s->capture->invalidated = true;
    return emu::fail(cudaErrorStreamCaptureUnsupported, "cudaStreamWaitEvent inside a capture on an event recorded outside it");
  }
  if (emu_event_done(e)) return cudaSuccess;
  return emu::enqueue_on(h, emu::NodeKind::kKernel, "cudaStreamWaitEvent", {}, {{e->stream, e->seq}}, false);
}
// Clears the sticky error and drops all queued work and captures (the self-test's way back
// after a fault it provoked); memory, streams and events stay valid, unlike on a GPU.
inline cudaError_t cudaDeviceReset() {
  for (CUstream_st* s : emu::streams()) {
    s->queue.clear();
    s->done = s->enqueued;
    s->capture.reset();
  }
  emu::sticky_error() = emu::last_error() = cudaSuccess;
  return cudaSuccess;
}
