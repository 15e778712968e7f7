// Shared pieces of the tensor-parallel tests (tests/tp): a small model whose heads, hidden
// units and vocabulary divide by 4, gathering a rank's shards back into full tensors, and
// comparisons. Reuses tests/dp's helpers.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/param_store.h"
#include "core/sharding/tensor_parallel.h"
#include "tests/dp/dp_test_util.h"

namespace brt::testing {

// L 2, D 32, H 4 x 8, F 64, V 64, N 32, W 8, S 8: every split quantity divides by 4 (BST:
// Ds = D/4 = 8 features, N_s 8 (4 modes), S_ctx 4, the BST layer is layer 0).
inline launch::RunConfig tp_run(const std::string& variant, int streams, int64_t steps,
                                std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), {"model.heads=4", "model.head_dim=8"});
  if (variant.rfind("bst", 0) == 0)
    extra.insert(extra.begin(), {"model.ssm_state=8", "model.ctx_states=4"});
  return small_run(variant, streams, steps, extra);
}

// Every parameter (value or gradient) of `store`, gathered over tp into its full shape, in
// store order.
template <typename T>
std::vector<std::vector<T>> gather_all(const core::ParamStore<T>& store,
                                       const core::TensorParallel& tp, bool grads) {
  std::vector<std::vector<T>> out;
  std::vector<T> staging;
  for (const auto& p : store.params()) {
    std::vector<T> full(size_t(p.spec.global_numel()));
    core::gather_shards(tp, p.spec, grads ? p.grad : p.value, full.data(), staging);
    out.push_back(std::move(full));
  }
  return out;
}

}  // namespace brt::testing
