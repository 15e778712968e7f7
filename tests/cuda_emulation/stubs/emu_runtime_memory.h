// Device memory, pinned host memory and copies in the strict emulator (included by
// cuda_runtime.h). The copy rules are the CUDA runtime's "API synchronization behavior":
//   cudaMemcpy H2D from pageable memory: waits for the legacy stream, takes the bytes now (the
//     caller may reuse its buffer) and lands them when the legacy stream next runs: a kernel
//     on a non-blocking stream may run first. From pinned memory: complete on return.
//   cudaMemcpy D2H: on the legacy stream, complete on return (so it waits for the legacy stream
//     and blocking streams, not for cudaStreamNonBlocking streams).
//   cudaMemcpy D2D and cudaMemset: queued on the legacy stream, no host wait.
//   cudaMemcpyAsync / cudaMemsetAsync: queued on their stream; host memory is read or written
//     when the copy runs. While capturing, a copy to or from pageable memory is refused.
// cudaMalloc fills new memory with 0xFF bytes; cudaFree waits for the device first.
#pragma once
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "emu_stream.h"

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaHostAllocFlags { cudaHostAllocDefault = 0, cudaHostAllocPortable = 1, cudaHostAllocMapped = 2 };

namespace emu {
inline void* aligned(size_t n) { return std::aligned_alloc(256, (n + 255) / 256 * 256 + 256); }
inline cudaMemcpyKind resolve_kind(cudaMemcpyKind kind, const void* dst, const void* src, size_t n) {
  if (kind != cudaMemcpyDefault) return kind;
  const bool d = is_device(dst, n), s = is_device(src, n);
  return d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice) : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
}
// A copy whose kind contradicts what the emulator knows of the pointers (a device allocation
// named as the host side, pinned memory named as the device side).
inline bool kind_contradicts(cudaMemcpyKind kind, const void* dst, const void* src, size_t n) {
  const bool host_dst = kind == cudaMemcpyHostToHost || kind == cudaMemcpyDeviceToHost;
  const bool host_src = kind == cudaMemcpyHostToHost || kind == cudaMemcpyHostToDevice;
  return (host_dst ? is_device(dst, n) : is_pinned(dst, n)) || (host_src ? is_device(src, n) : is_pinned(src, n));
}
// The host side of a copy is pageable (neither pinned nor a device allocation).
inline bool pageable_host_side(cudaMemcpyKind kind, const void* dst, const void* src, size_t n) {
  if (kind == cudaMemcpyHostToDevice) return !is_pinned(src, n);
  if (kind == cudaMemcpyDeviceToHost) return !is_pinned(dst, n);
  if (kind == cudaMemcpyHostToHost) return !is_pinned(src, n) || !is_pinned(dst, n);
  return false;
}
// The destinations of the latest host-to-device copies, by host source: lets a check find
// the device buffer a library staged from its host array (graph.cpp --bad-target).
struct Upload { const void* host; void* device; size_t bytes; };
inline std::vector<Upload>& uploads() { static std::vector<Upload> v; return v; }
inline void note_upload(cudaMemcpyKind kind, void* d, const void* s, size_t n) {
  if (kind != cudaMemcpyHostToDevice) return;
  if (uploads().size() >= 256) uploads().erase(uploads().begin());
  uploads().push_back({s, d, n});
}
inline void* upload_destination(const void* host) {
  for (auto it = uploads().rbegin(); it != uploads().rend(); ++it) if (it->host == host) return it->device;
  return nullptr;
}
}  // namespace emu

inline cudaError_t cudaMalloc(void** p, size_t n) {
  *p = nullptr;
  if (const cudaError_t e = emu::unsafe_call("cudaMalloc"); e != cudaSuccess) return e;
  if (emu::sticky_error() != cudaSuccess) return emu::sticky_error();
  *p = emu::aligned(n == 0 ? 1 : n);
  if (*p == nullptr) return emu::fail(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(n) + " bytes");
  emu::poison(*p, n);
  emu::device_ranges().add(*p, n);
  return cudaSuccess;
}
template <typename T>
cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
inline cudaError_t cudaFree(void* p) {
  if (const cudaError_t e = emu::unsafe_call("cudaFree"); e != cudaSuccess) return e;
  if (p == nullptr) return cudaSuccess;
  emu::drain_all();  // cudaFree waits for the device: no queued work may still use p
  if (!emu::device_ranges().erase(p)) return emu::fail(cudaErrorInvalidValue, "cudaFree of a pointer cudaMalloc did not return");
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaHostAlloc(void** p, size_t n, unsigned) {
  *p = nullptr;
  if (const cudaError_t e = emu::unsafe_call("cudaHostAlloc"); e != cudaSuccess) return e;
  *p = emu::aligned(n == 0 ? 1 : n);
  emu::pinned_ranges().add(*p, n);
  return cudaSuccess;
}
inline cudaError_t cudaMallocHost(void** p, size_t n) { return cudaHostAlloc(p, n, cudaHostAllocDefault); }
template <typename T>
cudaError_t cudaMallocHost(T** p, size_t n) { return cudaMallocHost(reinterpret_cast<void**>(p), n); }
inline cudaError_t cudaFreeHost(void* p) {
  if (const cudaError_t e = emu::unsafe_call("cudaFreeHost"); e != cudaSuccess) return e;
  if (p == nullptr) return cudaSuccess;
  emu::drain_all();
  if (!emu::pinned_ranges().erase(p)) return emu::fail(cudaErrorInvalidValue, "cudaFreeHost of a pointer cudaMallocHost did not return");
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaHostRegister(void* p, size_t n, unsigned) { emu::pinned_ranges().add(p, n); return cudaSuccess; }
inline cudaError_t cudaHostUnregister(void* p) {
  emu::drain_all();
  return emu::pinned_ranges().erase(p) ? cudaSuccess : cudaErrorInvalidValue;
}
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) { *free_bytes = *total = size_t(1) << 34; return cudaSuccess; }

inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind kind, cudaStream_t stream) {
  kind = emu::resolve_kind(kind, d, s, n);
  if (emu::kind_contradicts(kind, d, s, n)) return emu::fail(cudaErrorInvalidValue, "cudaMemcpyAsync: the kind contradicts the pointers");
  if (emu::is_capturing(stream) && emu::pageable_host_side(kind, d, s, n)) {
    emu::capture_of(emu::resolve(stream))->invalidated = true;
    return emu::fail(cudaErrorStreamCaptureUnsupported, "cudaMemcpyAsync with pageable host memory while capturing");
  }
  emu::note_upload(kind, d, s, n);
  return emu::enqueue(stream, emu::NodeKind::kCopy, "cudaMemcpyAsync", [d, s, n] { std::memmove(d, s, n); });
}
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t stream) {
  return emu::enqueue(stream, emu::NodeKind::kFill, "cudaMemsetAsync", [p, v, n] { std::memset(p, v, n); });
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) {
  if (const cudaError_t e = emu::unsafe_call("cudaMemset"); e != cudaSuccess) return e;
  return emu::enqueue(nullptr, emu::NodeKind::kFill, "cudaMemset", [p, v, n] { std::memset(p, v, n); });
}
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind kind) {
  if (const cudaError_t e = emu::unsafe_call("cudaMemcpy"); e != cudaSuccess) return e;
  if (emu::sticky_error() != cudaSuccess) return emu::sticky_error();
  kind = emu::resolve_kind(kind, d, s, n);
  if (emu::kind_contradicts(kind, d, s, n)) return emu::fail(cudaErrorInvalidValue, "cudaMemcpy: the kind contradicts the pointers");
  CUstream_st* legacy = &emu::legacy_stream();
  emu::note_upload(kind, d, s, n);
  if (kind == cudaMemcpyDeviceToDevice)
    return emu::enqueue(nullptr, emu::NodeKind::kCopy, "cudaMemcpy", [d, s, n] { std::memmove(d, s, n); });
  if (kind == cudaMemcpyHostToDevice && emu::pageable_host_side(kind, d, s, n)) {
    emu::drain(legacy);  // "a stream sync is performed before the copy is initiated"
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(s), static_cast<const char*>(s) + n);
    return emu::enqueue(nullptr, emu::NodeKind::kCopy, "cudaMemcpy", [d, staged] { std::memcpy(d, staged->data(), staged->size()); });
  }
  // Pinned H2D, H2H and D2H: queued behind the legacy stream (and so the blocking streams),
  // then waited for.
  const cudaError_t e = emu::enqueue(nullptr, emu::NodeKind::kCopy, "cudaMemcpy", [d, s, n] { std::memmove(d, s, n); });
  if (e != cudaSuccess) return e;
  emu::drain(legacy);
  return emu::sticky_error();
}
