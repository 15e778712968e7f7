// What tensor parallelism splits (docs/parallelism.md, "Tensor parallelism"), decided once from
// the resolved model: the train and eval commands' layout checks, the planner's layouts and its
// memory prediction all ask here. Each size is named by the config key a user would change:
//  - every variant: the heads (and with them the attention width), the MLP's hidden units and
//    the vocabulary (embedding rows, vocabulary-parallel cross-entropy);
//  - recurrent families (rec:*, feedback:*): the recurrent state's rows (sequence parallelism,
//    core/sharding/sequence_parallel.h);
//  - BST (docs/bst.md, "Tensor parallelism"): the SSM's features Ds = D/4.
#pragma once

#include <string>
#include <vector>

#include "core/model_config.h"
#include "parallel/layout.h"

namespace brt::core {

// The sizes TP ranks divide among them, in the order the layout check reports them. `model`
// must be resolve()d (its family decides).
std::vector<parallel::SplitByTp> tensor_parallel_splits(const ModelConfig& model);

// "" when every size of tensor_parallel_splits(model) divides by `tp`; otherwise the first that
// does not, "model.heads = 6 does not divide by tp = 4".
std::string tensor_parallel_split_problem(const ModelConfig& model, int tp);

}  // namespace brt::core
