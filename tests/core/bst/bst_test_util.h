// Shared helpers of the BST tests: the variants, a tiny BST configuration, a layer with its own
// parameter store and backward scratch, and copying parameters between stores by name (model.md §9).
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/layers/bst_layer.h"
#include "core/param_store.h"
#include "model_test_util.h"

namespace brt::testing {

// Every BST variant, {SH, MH, MF} x {S4D, unstructured}, in the order the suites list them.
inline std::vector<std::string> all_bst_variants() {
  return {"bst:sh:s4d", "bst:mh:s4d", "bst:mf:s4d", "bst:sh:unstructured", "bst:mh:unstructured",
          "bst:mf:unstructured"};
}

inline core::ModelConfig tiny_bst_config(const std::string& variant, int seq = 12) {
  core::ModelConfig c = tiny_config(variant);
  c.seq_len = seq;
  c.window = 4;
  c.ssm_state = 4;   // M = 2 complex modes
  c.ctx_states = 3;  // S_ctx (MF)
  c.bst_layers = {0};
  c.resolve();
  return c;
}

template <typename T>
struct LayerRig {
  core::ModelConfig cfg;
  core::ParamStore<T> store;
  // The layer's buffers and convolver (the tests' forward calls may bring their own CPU backend).
  std::unique_ptr<kernels::Backend<T>> backend = kernels::make_cpu_backend<T>();
  std::unique_ptr<core::BstLayer<T>> layer;
  core::BackwardScratch<T> scratch;
  int streams;

  LayerRig(const core::ModelConfig& c, int B, uint64_t seed = 99) : cfg(c), streams(B) {
    layer = std::make_unique<core::BstLayer<T>>(store, cfg, 0, B, *backend);
    store.finalize();
    store.initialize(seed);
    const int64_t rows = int64_t(B) * cfg.seq_len;
    scratch.allocate(kernels::host_memory(), rows, cfg.d_model, cfg.d_ff, cfg.attn_width());
  }
  std::vector<std::vector<T>> snapshot() {
    std::vector<std::vector<T>> out;
    for (auto& ref : layer->carried_state()) {
      int64_t n = 1;
      for (auto s : ref.shape) n *= s;
      out.emplace_back(ref.data, ref.data + n);
    }
    return out;
  }
  void restore(const std::vector<std::vector<T>>& saved) {
    auto refs = layer->carried_state();
    for (size_t i = 0; i < refs.size(); ++i) std::copy(saved[i].begin(), saved[i].end(), refs[i].data);
  }
};

// Copies every parameter of `from` into the same-named parameter of `to` (shapes must agree).
template <typename A, typename B>
void copy_params(const core::ParamStore<A>& from, core::ParamStore<B>& to) {
  for (auto& p : to.params()) {
    const int i = from.find(p.spec.name);
    ASSERT_GE(i, 0) << p.spec.name;
    ASSERT_EQ(from[i].numel(), p.numel()) << p.spec.name;
    for (int64_t j = 0; j < p.numel(); ++j) p.value[j] = static_cast<B>(from[i].value[j]);
  }
}

template <typename T>
std::vector<T> random_vector(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(normal(rng));
  return v;
}

}  // namespace brt::testing
