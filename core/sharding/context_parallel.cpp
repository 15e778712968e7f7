#include "core/sharding/context_parallel.h"

#include <stdexcept>

namespace brt::core {

ContextParallel ContextParallel::bound_to(kernels::Memory& memory) const {
  return ContextParallel(link_.bound_to(memory));
}

std::string context_parallel_problem(const ModelConfig& cfg, int cp) {
  if (cp < 1) return "train.cp = " + std::to_string(cp) + " must be at least 1";
  if (cp == 1) return {};
  const std::string head = "train.cp = " + std::to_string(cp) + " with model.variant = " + cfg.variant + ": ";
  if (cfg.family == ModelFamily::kRecurrent)
    return head + "the recurrent state is updated block after block (model.md §5), so a chunk "
                  "cannot start before the previous chunk's last block has run; use data or "
                  "tensor parallelism (train.tp) for this variant";
  if (cfg.family == ModelFamily::kBST && cfg.ssm_kernel == SsmKernel::kUnstructured)
    return head + "the unstructured (implicit) kernel has no finite state to pass: each chunk "
                  "would need every earlier chunk's input (an O(N) exchange), which is not "
                  "implemented; use an s4d variant";
  if (cfg.seq_len % (cp * cfg.window) != 0)
    return head + "model.seq_len = " + std::to_string(cfg.seq_len) + " is not a multiple of cp × "
           "model.window = " + std::to_string(cp * cfg.window) + " (each rank holds whole blocks)";
  return {};
}

ModelConfig chunk_config(const ModelConfig& cfg, int cp) {
  const std::string problem = context_parallel_problem(cfg, cp);
  if (!problem.empty()) throw std::invalid_argument(problem);
  ModelConfig local = cfg;
  local.seq_len = cfg.seq_len / cp;
  return local;
}

}  // namespace brt::core
