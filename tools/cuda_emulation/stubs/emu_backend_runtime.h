// Host emulation of the CUDA runtime calls the CudaBackend class and DeviceMemory make
// (included by the emulated cuda_runtime.h). Work runs when it is enqueued, so every stream
// is trivially in order and synchronisation is a no-op. One device.
#pragma once
#include <cstring>
enum cudaStreamFlags { cudaStreamDefault = 0, cudaStreamNonBlocking = 1 };
struct cudaDeviceProp {
  char name[256];
  int major, minor, multiProcessorCount;
  size_t totalGlobalMem;
};
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::strcpy(p->name, "host CUDA emulator");
  p->major = 9; p->minor = 0; p->multiProcessorCount = 1; p->totalGlobalMem = size_t(1) << 34;
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  static char token;
  *s = reinterpret_cast<cudaStream_t>(&token);
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) { std::memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { std::memmove(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) { *free_bytes = *total = size_t(1) << 34; return cudaSuccess; }
inline cudaError_t cudaMemset(void* p, int v, size_t n) { std::memset(p, v, n); return cudaSuccess; }
// Events (parallel/nccl_communicator.cpp's completion and ordering): the work before a record
// has already run when it is enqueued, so every event has completed and waits return at once.
enum cudaEventFlags { cudaEventDefault = 0, cudaEventBlockingSync = 1, cudaEventDisableTiming = 2 };
struct CUevent_st;
using cudaEvent_t = CUevent_st*;
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
  static char token;
  *e = reinterpret_cast<cudaEvent_t>(&token);
  return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
inline cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = nullptr) { return cudaSuccess; }
inline cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) { return cudaSuccess; }
// The runtime header's typed overload (cuda_runtime.h: template cudaMalloc(T**, size_t)).
template <typename T>
cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
