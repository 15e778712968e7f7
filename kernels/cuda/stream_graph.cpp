#include "kernels/cuda/stream_graph.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"

namespace brt::kernels::cuda {

struct StreamGraph::Handles {
  cudaStream_t stream = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Handles() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (graph != nullptr) cudaGraphDestroy(graph);
  }
};

namespace {

GraphNodeCounts count_nodes(cudaGraph_t graph) {
  std::size_t n = 0;
  BRT_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0) BRT_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &n));
  GraphNodeCounts counts;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    BRT_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel) ++counts.kernels;
    else if (type == cudaGraphNodeTypeMemcpy) ++counts.copies;
    else if (type == cudaGraphNodeTypeMemset) ++counts.fills;
    else ++counts.other;
  }
  return counts;
}

}  // namespace

StreamGraph::StreamGraph(Backend<float>& backend, const std::function<void()>& enqueue)
    : handles_(std::make_unique<Handles>()) {
  cudaStream_t stream = stream_handle(backend);  // throws std::invalid_argument otherwise
  handles_->stream = stream;
  // Thread-local mode: only this thread's unsafe calls (allocations, waits) break the capture;
  // another thread (an async checkpoint writer) may use the runtime meanwhile.
  BRT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  std::string failure;
  try {
    enqueue();
  } catch (const std::exception& e) {
    failure = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  (void)cudaGetLastError();  // a failed capture leaves a (non-sticky) error to clear
  handles_->graph = graph;
  if (failure.empty() && ended != cudaSuccess)
    failure = std::string("cudaStreamEndCapture: ") + cudaGetErrorName(ended);
  if (failure.empty() && graph == nullptr) failure = "the capture produced no graph";
  if (!failure.empty())
    throw std::runtime_error("kernels/cuda: the work could not be captured in a CUDA graph (" +
                             failure + ")");
  nodes_ = count_nodes(graph);
  BRT_CUDA_CHECK(cudaGraphInstantiate(&handles_->exec, graph, 0));
}

StreamGraph::~StreamGraph() = default;

void StreamGraph::launch() { BRT_CUDA_CHECK(cudaGraphLaunch(handles_->exec, handles_->stream)); }

}  // namespace brt::kernels::cuda
