// Device work captured once and replayed as a CUDA graph (docs/gpu.md, "CUDA graphs"): the
// training step's thousands of small launches become one cudaGraphLaunch (launch/train/step_graphs.h
// decides when). This header needs no CUDA headers, so launch/ can include it.
//
// What a graph holds is what the host enqueued while capturing: the kernels with their
// arguments, cuBLAS and cuFFT calls with their scalars, copies and fills. Replaying it does
// not run the host code again, so a captured piece must enqueue the same work every time it
// runs — host decisions baked in stay baked in — and must not read anything back: a wait on
// the stream while capturing (Memory::to_host, synchronize) makes the capture fail.
#pragma once

#include <functional>
#include <memory>

#include "kernels/backend.h"

namespace brt::kernels::cuda {

// A graph's nodes by kind: what one replay would launch one by one without the graph.
struct GraphNodeCounts {
  int kernels = 0;  // our kernels and the ones cuBLAS and cuFFT launch
  int copies = 0;
  int fills = 0;
  int other = 0;
  int total() const { return kernels + copies + fills + other; }
};

class StreamGraph {
 public:
  // Captures what `enqueue` puts on the CUDA backend's stream (nothing runs on the device) and
  // instantiates it. Throws std::runtime_error with the reason when the work cannot be captured
  // (enqueue waited on the stream, or threw); the stream is then no longer capturing and
  // usable, and nothing of the work has run. std::invalid_argument for another backend.
  StreamGraph(Backend<float>& backend, const std::function<void()>& enqueue);
  ~StreamGraph();
  StreamGraph(const StreamGraph&) = delete;
  StreamGraph& operator=(const StreamGraph&) = delete;

  // Enqueues one replay on the backend's stream (returns at once, like a kernel launch).
  void launch();
  const GraphNodeCounts& nodes() const { return nodes_; }

 private:
  struct Handles;
  std::unique_ptr<Handles> handles_;
  GraphNodeCounts nodes_;
};

}  // namespace brt::kernels::cuda
