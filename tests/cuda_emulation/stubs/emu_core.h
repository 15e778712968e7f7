// The strict emulator's shared state (tests/cuda_emulation, docs/gpu.md "The host emulator"):
// error codes, the last and the sticky error, the seed that drives every adversarial choice,
// and the registry of device allocations and pinned host ranges. Included by cuda_runtime.h.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchFailure = 719,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureUnmatched = 903,
  cudaErrorStreamCaptureImplicit = 906,
  cudaErrorCapturedEvent = 907,
};

inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnmatched: return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorCapturedEvent: return "cudaErrorCapturedEvent";
  }
  return "cudaErrorUnknown";
}
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit: return "operation would make the legacy stream depend on a capturing blocking stream";
    default: return cudaGetErrorName(e);
  }
}

namespace emu {

// Every adversarial choice (block order, thread interleaving, stream drain order) comes from
// this seed: EMU_SEED overrides the default, and it is printed once per process.
inline uint64_t seed() {
  static const uint64_t s = [] {
    const char* env = std::getenv("EMU_SEED");
    const uint64_t v = env != nullptr ? std::strtoull(env, nullptr, 10) : 20240601ull;
    std::fprintf(stderr, "[cuda emulator] strict mode, seed %llu (EMU_SEED overrides)\n",
                 static_cast<unsigned long long>(v));
    return v;
  }();
  return s;
}
struct Rng {  // splitmix64: cheap, seedable, good enough to shuffle
  uint64_t state;
  explicit Rng(uint64_t s) : state(s) {}
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(next() % n); }
};
inline Rng& rng() { static Rng r(seed() * 7919 + 1); return r; }

// cudaGetLastError's error (set by a failed launch or call) and the sticky error of a fault
// inside a kernel (a barrier deadlock, an illegal shuffle): every later call returns it.
inline cudaError_t& last_error() { static cudaError_t e = cudaSuccess; return e; }
inline cudaError_t& sticky_error() { static cudaError_t e = cudaSuccess; return e; }
inline cudaError_t fail(cudaError_t e, const std::string& why) {
  std::fprintf(stderr, "[cuda emulator] %s: %s\n", cudaGetErrorName(e), why.c_str());
  last_error() = e;
  return e;
}
inline void fault(const std::string& why) {  // an asynchronous error: sticky, as on a GPU
  std::fprintf(stderr, "[cuda emulator] device fault: %s\n", why.c_str());
  sticky_error() = cudaErrorLaunchFailure;
  last_error() = cudaErrorLaunchFailure;
}

// Address ranges: device allocations (cudaMalloc) and pinned host memory (cudaMallocHost,
// cudaHostAlloc, cudaHostRegister). Anything else is pageable host memory.
struct Ranges {
  std::map<uintptr_t, size_t> by_start;
  void add(const void* p, size_t n) { by_start[reinterpret_cast<uintptr_t>(p)] = n; }
  bool erase(const void* p) { return by_start.erase(reinterpret_cast<uintptr_t>(p)) != 0; }
  bool contains(const void* p, size_t n = 1) const {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = by_start.upper_bound(a);
    if (it == by_start.begin()) return false;
    --it;
    return a + n <= it->first + it->second;
  }
};
inline Ranges& device_ranges() { static Ranges r; return r; }
inline Ranges& pinned_ranges() { static Ranges r; return r; }
inline bool is_pinned(const void* p, size_t n) { return pinned_ranges().contains(p, n == 0 ? 1 : n); }
inline bool is_device(const void* p, size_t n) { return device_ranges().contains(p, n == 0 ? 1 : n); }

// Fresh device memory is garbage on a GPU: fill it with 0xFF bytes (NaN floats, -1 ints) so a
// read before a write shows. Only the first 64 MiB of an allocation (arenas use the front).
constexpr size_t kPoisonLimit = size_t(64) << 20;
inline void poison(void* p, size_t n) { std::memset(p, 0xFF, n < kPoisonLimit ? n : kPoisonLimit); }

}  // namespace emu
