// The training step's device work replayed from CUDA graphs (train.cuda_graph; docs/gpu.md,
// "CUDA graphs"): forward, loss and backward — every kernel, cuBLAS and cuFFT call and copy of
// the step — become one cudaGraphLaunch, so a small model is no longer bound by launches.
//
// A step's work depends on one host decision that changes between steps: which streams start a
// document (cache and state resets, model.md §8). A graph freezes it, so there is one graph per
// signature (the doc_start bytes). The loss gradient's scale (1 / unmasked targets, different
// whenever the masks are) is a device scalar staged before the graph (Model::stage_loss_scale),
// so it does not split the graphs. A signature's first step runs eagerly (cuBLAS and cuFFT choose and load
// their kernels), its second is captured and launched, later ones replay. At most max_graphs
// signatures get graphs; steps with other signatures run eagerly. A replay is bit-identical to
// the eager step: the same kernels with the same arguments in the same order.
//
// What stays outside the graph: the step's uploads (Model::stage_step, Optimizer::stage_step),
// zeroing the gradients, the loss read-back and the step guard. The optimizer's update is
// captured behind backward when StepGraphs is given the optimizer (one data-parallel rank, no
// TP: nothing is summed on the host or across ranks between them): it reads the gradient norm's
// scalars and the step's loss sum on the device and writes nothing when either is not finite
// (Optimizer::enqueue_step); the caller reads the outcome with Optimizer::finish_step.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/optim/optimizer.h"
#include "kernels/backend.h"
#include "launch/config/config.h"

namespace brt::launch {

// Why a run's step cannot be captured on this configuration, or "" when it can.
// dp_cp_size, tp_size: the run's data- and tensor-parallel group sizes. DP > 1 is capturable with
// train.overlap=false: its hooks do nothing, and the buckets are all-reduced after the graph.
// train.grad_accum > 1 is not captured: such steps run eagerly.
std::string step_capture_obstacle(const TrainConfig& train, int dp_cp_size, int tp_size);

struct StepGraphStats {
  int64_t eager_steps = 0;     // run without a graph (first sight, cache full, or off)
  int64_t captured_steps = 0;  // captured, then launched
  int64_t replayed_steps = 0;
  int graphs = 0;
  // Of the last graph captured: what one eager step launches that the graph replays.
  int graph_kernels = 0, graph_copies = 0, graph_fills = 0, graph_other = 0;
  int graph_nodes() const { return graph_kernels + graph_copies + graph_fills + graph_other; }
};

class StepGraphs {
 public:
  // The CUDA backend only (throws std::invalid_argument for another); max_graphs >= 1.
  // `update` (may be null; must outlive this, device_steps()): its update is enqueued behind
  // every step's backward, inside the graph (see above).
  StepGraphs(core::Model<float>& model, kernels::Backend<float>& backend, int max_graphs = 8,
             core::Optimizer<float>* update = nullptr);
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // The device work of the step model.stage_step() staged: stages grad_scale, then
  // Model::device_work() and the optimizer's update when there is one (updates()), from this
  // signature's graph when there is one. A capture that fails (a bug: some call
  // waited on the device) turns graphs off for the rest of the run — the step then runs
  // eagerly, so nothing is lost — and failure() says why.
  void run(float grad_scale);
  bool updates() const { return update_ != nullptr; }
  const StepGraphStats& stats() const { return stats_; }
  const std::string& failure() const { return failure_; }
  // "graph: 1 launch replaces 812 kernels, 40 copies, 12 fills" (after a capture).
  std::string describe() const;

 private:
  struct Entry;
  core::Model<float>& model_;
  kernels::Backend<float>& backend_;
  int max_graphs_;
  core::Optimizer<float>* update_;
  void device_work();
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // by signature bytes
  StepGraphStats stats_;
  std::string failure_;
};

}  // namespace brt::launch
