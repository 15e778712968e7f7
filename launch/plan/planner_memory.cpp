// Memory side of the planner (launch/plan/planner.h). The model is not described here a second
// time: it is built, as rank 0 of its TP and CP groups, on meta memory (kernels/meta_memory.h),
// so its parameters (model.md §9, declared by the layers), gradients and every buffer its layers
// allocate are counted from their own declarations, and Model::memory_report() sorts them. Only
// the optimizer's state is derived here, from those parameters' specs (model.md §10c,
// core::expected_optimizer_state_elems), because the optimizer allocates it per ZeRO-1 run.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/data_parallel.h"
#include "core/model.h"
#include "core/sharding/context_parallel.h"
#include "core/sharding/tensor_parallel.h"
#include "core/tp_split.h"
#include "kernels/counting_backend.h"
#include "kernels/meta_memory.h"
#include "launch/plan/planner.h"
#include "parallel/unconnected_communicator.h"

namespace brt::launch {

namespace {

template <typename T>
CountedModel count_on_meta_memory(const core::ModelConfig& whole, int streams, int tp, int cp) {
  kernels::MetaMemory meta;
  kernels::CountingBackend<T> backend(meta);  // runs nothing: constructors only allocate
  parallel::UnconnectedCommunicator tp_group("tp", 0, tp), cp_group("cp", 0, cp);
  const core::TensorParallel tensor_parallel = tp > 1 ? core::TensorParallel(tp_group) : core::TensorParallel();
  const core::ContextParallel context_parallel = cp > 1 ? core::ContextParallel(cp_group) : core::ContextParallel();
  core::Model<T> model(whole, streams, backend, tensor_parallel, context_parallel);
  const core::MemoryReport report = model.memory_report();
  CountedModel counted;
  counted.memory.parameters = report.parameters;
  counted.memory.gradients = report.gradients;
  counted.memory.activations = report.activations;
  counted.memory.backward_scratch = report.backward_scratch;
  counted.memory.carried_state = report.carried_state;
  counted.elem_bytes = int(sizeof(T));
  counted.backend_bytes = meta.live_bytes();
  for (const core::Param<T>& p : model.params().params()) counted.specs.push_back(p.spec);
  return counted;
}

CountedModel count_built(const core::ModelConfig& whole, int streams, int elem_bytes, int tp, int cp) {
  if (elem_bytes == 4) return count_on_meta_memory<float>(whole, streams, tp, cp);
  if (elem_bytes == 8) return count_on_meta_memory<double>(whole, streams, tp, cp);
  throw std::invalid_argument("count_model_memory: elements of " + std::to_string(elem_bytes) +
                              " bytes (the model is built in float or double: 4 or 8)");
}

// The count at `blocks` on the line through a (at `half` blocks) and b (at 2·half): every block
// adds the same whole number of bytes, (b - a) / half.
int64_t extrapolate(int64_t a, int64_t b, int64_t half, int64_t blocks, const char* what) {
  if ((b - a) % half != 0)
    throw std::logic_error(std::string("count_model_memory: the ") + what + " grow by " + std::to_string(b - a) +
                           " bytes over " + std::to_string(half) + " blocks, not a whole number per block");
  return b + (b - a) / half * (blocks - 2 * half);
}

// Past max_counted_blocks the layers' per-block objects (a buffer set per block and layer) make
// the build itself slow (minutes at 8M blocks), so the model is built at two lengths, max/2 and
// max blocks per rank, and the count carried on along the line through them: every buffer is
// a fixed size or a multiple of the blocks (rows B·N, blocks T, the extended keys B·(W + N)),
// which tests/launch/plan checks against a whole build for every variant.
CountedModel count_by_blocks(const core::ModelConfig& whole, int streams, int elem_bytes, int tp, int cp,
                             int max_counted_blocks) {
  const int half = max_counted_blocks / 2;
  core::ModelConfig at = whole;
  at.seq_len = half * whole.window * cp;
  const CountedModel a = count_built(at, streams, elem_bytes, tp, cp);
  at.seq_len = 2 * half * whole.window * cp;
  CountedModel b = count_built(at, streams, elem_bytes, tp, cp);
  const int64_t blocks = core::chunk_config(whole, cp).blocks();
  MemoryPrediction& m = b.memory;
  m.activations = extrapolate(a.memory.activations, m.activations, half, blocks, "activations");
  m.backward_scratch = extrapolate(a.memory.backward_scratch, m.backward_scratch, half, blocks, "backward scratch");
  m.carried_state = extrapolate(a.memory.carried_state, m.carried_state, half, blocks, "carried state");
  b.backend_bytes = extrapolate(a.backend_bytes, b.backend_bytes, half, blocks, "backend bytes");
  return b;  // parameters and gradients do not depend on the length
}

}  // namespace

CountedModel count_model_memory(const core::ModelConfig& cfg, int streams, int elem_bytes, int tp, int cp,
                                int max_counted_blocks) {
  core::ModelConfig whole = cfg;
  whole.resolve();
  // Named refusals before the layers' own checks: the CP split (throws naming why a variant or
  // length does not split) and the keys TP does not divide.
  const core::ModelConfig chunk = core::chunk_config(whole, cp);
  if (tp > 1)
    if (const std::string problem = core::tensor_parallel_split_problem(chunk, tp); !problem.empty())
      throw std::invalid_argument(problem);
  if (chunk.blocks() > std::max(2, max_counted_blocks))
    return count_by_blocks(whole, streams, elem_bytes, tp, cp, std::max(2, max_counted_blocks));
  return count_built(whole, streams, elem_bytes, tp, cp);
}

std::vector<std::vector<int64_t>> model_param_shapes(const core::ModelConfig& cfg) {
  std::vector<std::vector<int64_t>> shapes;
  for (const core::ParamSpec& spec : count_model_memory(cfg, 1).specs) shapes.push_back(spec.shape);
  return shapes;
}

MemoryPrediction with_optimizer_state(const CountedModel& model, const core::OptimConfig& optim, int dp_cp,
                                      bool zero, int dp_cp_rank) {
  std::vector<bool> owned;
  if (zero && dp_cp > 1) {  // the ZeRO-1 partition of core/data_parallel.h over this rank's slices
    std::vector<int64_t> numels;
    for (const core::ParamSpec& spec : model.specs) numels.push_back(spec.numel());
    const core::ParamPartition part = core::partition_parameters(numels, dp_cp);
    owned.assign(numels.size(), false);
    for (size_t p = 0; p < numels.size(); ++p) owned[p] = part.owner[p] == dp_cp_rank;
  }
  MemoryPrediction m = model.memory;
  m.optimizer = core::expected_optimizer_state_elems(optim, model.specs, owned) * model.elem_bytes;
  return m;
}

MemoryPrediction predict_rank_memory(const core::ModelConfig& cfg, const core::OptimConfig& optim,
                                     int streams, int dp_cp, bool zero, int dp_cp_rank, int elem_bytes,
                                     int tp, int cp) {
  return with_optimizer_state(count_model_memory(cfg, streams, elem_bytes, tp, cp), optim, dp_cp, zero, dp_cp_rank);
}

}  // namespace brt::launch
