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
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return emu::wait_point(); }
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) {
  emu::enqueue(emu::NodeKind::kFill, "cudaMemsetAsync", [p, v, n] { std::memset(p, v, n); });
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) {
  if (const cudaError_t e = emu::wait_point(); e != cudaSuccess) return e;
  std::memmove(d, s, n);
  return cudaSuccess;
}
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
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return emu::wait_point(); }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) { return cudaSuccess; }
// The runtime header's typed overload (cuda_runtime.h: template cudaMalloc(T**, size_t)).
template <typename T>
cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
// Graphs: a capture's records, replayed in order by cudaGraphLaunch.
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
                             cudaStreamCaptureModeRelaxed = 2 };
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1,
                               cudaStreamCaptureStatusInvalidated = 2 };
enum cudaGraphNodeType { cudaGraphNodeTypeKernel = 0, cudaGraphNodeTypeMemcpy = 1, cudaGraphNodeTypeMemset = 2 };
struct CUgraphNode_st { cudaGraphNodeType type; };
using cudaGraphNode_t = CUgraphNode_st*;
struct CUgraph_st { std::vector<emu::Node> nodes; std::vector<CUgraphNode_st> types; };
using cudaGraph_t = CUgraph_st*;
struct CUgraphExec_st { std::vector<emu::Node> nodes; };
using cudaGraphExec_t = CUgraphExec_st*;
inline cudaError_t cudaStreamBeginCapture(cudaStream_t, cudaStreamCaptureMode) {
  if (emu::capture().active) return cudaErrorStreamCaptureUnsupported;
  emu::capture() = emu::Capture{true, false, {}};
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* graph) {
  emu::Capture done = std::move(emu::capture());
  emu::capture() = emu::Capture{};
  *graph = nullptr;
  if (!done.active) return cudaErrorStreamCaptureUnsupported;
  if (done.invalidated) return cudaErrorStreamCaptureInvalidated;
  auto* g = new CUgraph_st{std::move(done.nodes), {}};
  for (const auto& n : g->nodes)
    g->types.push_back({n.kind == emu::NodeKind::kKernel ? cudaGraphNodeTypeKernel
                        : n.kind == emu::NodeKind::kCopy ? cudaGraphNodeTypeMemcpy
                                                         : cudaGraphNodeTypeMemset});
  *graph = g;
  return cudaSuccess;
}
inline cudaError_t cudaStreamIsCapturing(cudaStream_t, cudaStreamCaptureStatus* status) {
  *status = emu::capture().active ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
inline cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* n) {
  if (nodes != nullptr) for (size_t i = 0; i < *n && i < g->types.size(); ++i) nodes[i] = &g->types[i];
  *n = g->types.size();
  return cudaSuccess;
}
inline cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* type) { *type = node->type; return cudaSuccess; }
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long = 0) {
  *exec = new CUgraphExec_st{g->nodes};
  return cudaSuccess;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t) {
  if (emu::capture().active) return cudaErrorStreamCaptureUnsupported;
  emu::count_launch("cudaGraphLaunch");  // one host launch; its nodes run without a count
  for (const auto& n : exec->nodes) n.run();
  return cudaSuccess;
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) { delete exec; return cudaSuccess; }
inline cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }
