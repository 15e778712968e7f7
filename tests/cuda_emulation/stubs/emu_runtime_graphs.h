// Stream capture and graphs in the strict emulator (included by cuda_runtime.h): while a
// stream captures, its work becomes nodes (host scalars read at the call, as cuBLAS does);
// cudaGraphLaunch queues one item on its stream that runs the nodes in capture order. The
// calls CUDA forbids during a capture fail and invalidate it (emu_stream.h, unsafe_call).
#pragma once
#include <memory>
#include <thread>
#include <vector>

#include "emu_stream.h"

enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
                             cudaStreamCaptureModeRelaxed = 2 };
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1,
                               cudaStreamCaptureStatusInvalidated = 2 };
enum cudaGraphNodeType { cudaGraphNodeTypeKernel = 0, cudaGraphNodeTypeMemcpy = 1, cudaGraphNodeTypeMemset = 2 };
struct CUgraphNode_st { cudaGraphNodeType type; };
using cudaGraphNode_t = CUgraphNode_st*;
struct CUgraph_st { std::vector<emu::Node> nodes; std::vector<CUgraphNode_st> types; };
using cudaGraph_t = CUgraph_st*;
struct CUgraphExec_st { std::shared_ptr<const std::vector<emu::Node>> nodes; };  // shared with queued launches
using cudaGraphExec_t = CUgraphExec_st*;

inline cudaError_t cudaStreamBeginCapture(cudaStream_t h, cudaStreamCaptureMode mode) {
  CUstream_st* s = emu::resolve(h);
  if (s == nullptr) return emu::fail(cudaErrorInvalidResourceHandle, "cudaStreamBeginCapture");
  if (s->legacy) return emu::fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture on the legacy default stream");
  if (s->capture) return emu::fail(cudaErrorStreamCaptureUnsupported, "cudaStreamBeginCapture on a capturing stream");
  s->capture = std::make_unique<emu::Capture>();
  s->capture->mode = static_cast<emu::CaptureMode>(mode);
  s->capture->thread = std::this_thread::get_id();
  return cudaSuccess;
}
inline cudaError_t cudaStreamEndCapture(cudaStream_t h, cudaGraph_t* graph) {
  *graph = nullptr;
  CUstream_st* s = emu::resolve(h);
  if (s == nullptr || !s->capture) return emu::fail(cudaErrorStreamCaptureUnmatched, "cudaStreamEndCapture without a capture");
  std::unique_ptr<emu::Capture> done = std::move(s->capture);
  if (done->thread != std::this_thread::get_id() && done->mode != emu::CaptureMode::kRelaxed)
    return emu::fail(cudaErrorStreamCaptureUnmatched, "cudaStreamEndCapture from another thread");
  if (done->invalidated) return cudaErrorStreamCaptureInvalidated;
  auto* g = new CUgraph_st{std::move(done->nodes), {}};
  for (const auto& n : g->nodes)
    g->types.push_back({n.kind == emu::NodeKind::kKernel ? cudaGraphNodeTypeKernel
                        : n.kind == emu::NodeKind::kCopy ? cudaGraphNodeTypeMemcpy
                                                         : cudaGraphNodeTypeMemset});
  *graph = g;
  return cudaSuccess;
}
inline cudaError_t cudaStreamIsCapturing(cudaStream_t h, cudaStreamCaptureStatus* status) {
  CUstream_st* s = emu::resolve(h);
  if (s == nullptr) return emu::fail(cudaErrorInvalidResourceHandle, "cudaStreamIsCapturing");
  if (s->legacy && emu::capturing_blocking_stream()) return cudaErrorStreamCaptureImplicit;
  *status = !s->capture ? cudaStreamCaptureStatusNone
            : s->capture->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}
inline cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t* nodes, size_t* n) {
  if (nodes != nullptr) for (size_t i = 0; i < *n && i < g->types.size(); ++i) nodes[i] = &g->types[i];
  *n = g->types.size();
  return cudaSuccess;
}
inline cudaError_t cudaGraphNodeGetType(cudaGraphNode_t node, cudaGraphNodeType* type) { *type = node->type; return cudaSuccess; }
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t g, unsigned long long = 0) {
  *exec = new CUgraphExec_st{std::make_shared<const std::vector<emu::Node>>(g->nodes)};
  return cudaSuccess;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t h) {
  if (emu::is_capturing(h)) return emu::fail(cudaErrorStreamCaptureUnsupported, "cudaGraphLaunch into a capture is not emulated");
  // One host launch; its nodes run in capture order, without a count, until one faults.
  return emu::enqueue(h, emu::NodeKind::kKernel, "cudaGraphLaunch", [nodes = exec->nodes] {
    for (const auto& n : *nodes)
      if (emu::sticky_error() == cudaSuccess) n.run();
  });
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;  // a launch still queued keeps the nodes
  return cudaSuccess;
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }
