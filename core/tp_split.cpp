#include "core/tp_split.h"

namespace brt::core {

std::vector<parallel::SplitByTp> tensor_parallel_splits(const ModelConfig& m) {
  std::vector<parallel::SplitByTp> split = {{"model.heads", m.heads}, {"model.d_ff", m.d_ff}, {"model.vocab", m.vocab}};
  if (m.family == ModelFamily::kRecurrent) split.push_back({"model.state_size", m.state_size});
  if (m.family == ModelFamily::kBST) split.push_back({"model.d_model / 4 (the BST SSM features Ds)", m.ssm_features()});
  return split;
}

std::string tensor_parallel_split_problem(const ModelConfig& model, int tp) {
  if (tp < 1) return "tp must be >= 1";
  for (const parallel::SplitByTp& s : tensor_parallel_splits(model))
    if (s.value % tp != 0)
      return s.name + " = " + std::to_string(s.value) + " does not divide by tp = " + std::to_string(tp);
  return "";
}

}  // namespace brt::core
