#include "launch/train/step_graphs.h"

#include "launch/run/context_parallel_refusal.h"

#include <cstring>
#include <stdexcept>

#ifdef BRT_WITH_CUDA
#include "kernels/cuda/stream_graph.h"
#endif

namespace brt::launch {

std::string step_capture_obstacle(const TrainConfig& train, int dp_cp_size, int tp_size) {
  if (train.device != "cuda") return "graphs are a CUDA feature (train.device=" + train.device + ")";
#ifndef BRT_WITH_CUDA
  (void)dp_cp_size;
  (void)tp_size;
  return "this binary has no CUDA backend";
#else
  if (tp_size > 1)
    return "tensor parallelism sums the loss statistics on the host inside the step";
  if (const std::string why = context_parallel_capture_obstacle(train); !why.empty()) return why;
  if (train.grad_accum > 1)
    return "train.grad_accum > 1 runs each step as several micro-steps, each swapping its streams' carried "
           "state in (launch/train/grad_accum.h); capturing them is not supported yet";
  if (dp_cp_size > 1 && train.overlap)
    return "data parallelism with train.overlap=true reduces gradient buckets from hooks during "
           "backward; train.overlap=false reduces them after the graph";
  return "";
#endif
}

#ifdef BRT_WITH_CUDA
struct StepGraphs::Entry {
  int64_t seen = 0;
  std::unique_ptr<kernels::cuda::StreamGraph> graph;
};
#else
struct StepGraphs::Entry {
  int64_t seen = 0;
};
#endif

StepGraphs::StepGraphs(core::Model<float>& model, kernels::Backend<float>& backend, int max_graphs,
                       core::Optimizer<float>* update)
    : model_(model), backend_(backend), max_graphs_(max_graphs), update_(update) {
  if (update != nullptr && !update->device_steps())
    throw std::invalid_argument("StepGraphs: an optimizer whose statistics are summed on the host cannot be captured");
  if (std::string(backend.name()) != "cuda")
    throw std::invalid_argument(std::string("StepGraphs: the '") + backend.name() +
                                "' backend cannot capture its work (CUDA only)");
  if (max_graphs < 1) throw std::invalid_argument("StepGraphs: max_graphs must be >= 1");
}

StepGraphs::~StepGraphs() = default;

void StepGraphs::device_work() {
  model_.device_work();
  if (update_ != nullptr) update_->enqueue_step(model_.step_nats_device());
}

void StepGraphs::run(float grad_scale) {
  // The signature: what the host decides for this step's device work (header).
  // The loss scale is a device scalar staged here, outside the graph: not part of the key, so
  // steps whose masks differ (another 1 / count) replay the same graph.
  model_.stage_loss_scale(grad_scale);
  const std::vector<uint8_t>& doc_start = model_.staged_doc_start();
  std::string key(doc_start.begin(), doc_start.end());
  key.push_back(char(model_.carry_ablation()));
  auto it = entries_.find(key);
  if (it == entries_.end() && int(entries_.size()) < max_graphs_)
    it = entries_.emplace(key, std::make_unique<Entry>()).first;
  Entry* entry = it == entries_.end() ? nullptr : it->second.get();
  if (entry == nullptr || entry->seen++ == 0 || !failure_.empty()) {  // full cache, warm-up, off
    device_work();
    ++stats_.eager_steps;
    return;
  }
#ifdef BRT_WITH_CUDA
  if (!entry->graph) {
    try {
      entry->graph = std::make_unique<kernels::cuda::StreamGraph>(
          backend_, [&] { device_work(); });
    } catch (const std::exception& e) {
      failure_ = std::string("the training step could not be captured in a CUDA graph (") +
                 e.what() + "); steps run without graphs from now on";
      entry->graph.reset();
      device_work();  // nothing of the captured work ran
      ++stats_.eager_steps;
      return;
    }
    const auto& n = entry->graph->nodes();
    stats_.graph_kernels = n.kernels;
    stats_.graph_copies = n.copies;
    stats_.graph_fills = n.fills;
    stats_.graph_other = n.other;
    ++stats_.graphs;
    ++stats_.captured_steps;
  } else {
    ++stats_.replayed_steps;
  }
  entry->graph->launch();
#else
  device_work();
  ++stats_.eager_steps;
#endif
}

std::string StepGraphs::describe() const {
  if (stats_.graphs == 0) return "no graph captured yet";
  return "1 graph launch replaces " + std::to_string(stats_.graph_kernels) + " kernels, " +
         std::to_string(stats_.graph_copies) + " copies and " +
         std::to_string(stats_.graph_fills) + " fills per step (" +
         std::to_string(stats_.graphs) + " graph" + (stats_.graphs == 1 ? "" : "s") + ")";
}

}  // namespace brt::launch
