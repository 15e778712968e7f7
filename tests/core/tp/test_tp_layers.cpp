// Each tensor-parallel layer on its own, TP = world size, against the same layer in one
// process (TP = 1), fp32:
//  - the sharded initialisation is exactly the slice of the TP = 1 initialisation (bitwise);
//  - standard layer, recurrent layer (fixed:skip and lstm:dual): the output, the input gradient
//    and every parameter gradient (gathered over TP) after two segments (the second reading the
//    carried caches and state of the first) agree to <= 1e-5 relative; replicated parameters'
//    gradients are identical on every TP rank;
//  - BST layer (bst:{sh,mh,mf}:s4d, bst:{sh,mf}:unstructured; segment 2 continues stream 0's
//    document, so the SSM carry is active): the same, the unstructured filter network's
//    gradient included (all-reduced over TP); every layer's carried state after segment 2,
//    gathered over TP, against one process, and the sharded carried tensors are 1/TP per rank;
//  - the vocabulary-parallel lookup, its backward and the vocabulary-parallel cross-entropy
//    against the backend's whole-vocabulary kernels.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/layers/bst_layer.h"
#include "core/model.h"
#include "core/layers/recurrent_layer.h"
#include "core/standard_layer.h"
#include "core/sharding/vocab_parallel.h"
#include "kernels/backend.h"
#include "parallel/process_groups.h"
#include "tests/core/tp/tp_test_util.h"

namespace brt::testing {
namespace {

using core::TensorParallel;

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (char& c : n) if (c == ':') c = '_';
  return n;
}

class TpInit : public ::testing::TestWithParam<std::string> {};

TEST_P(TpInit, ShardedInitialisationIsTheSliceOfTheWhole) {
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, world_size());
  const TensorParallel tp(groups.tp());
  auto cfg = tp_run(GetParam(), 2, 1).model;
  auto backend = kernels::make_cpu_backend<float>();
  core::Model<float> whole(cfg, 1, *backend);
  core::Model<float> sharded(cfg, 1, *backend, tp);
  whole.params().initialize(7);
  sharded.params().initialize(7);
  ASSERT_EQ(whole.params().size(), sharded.params().size());
  const auto full = gather_all(sharded.params(), tp, false);
  int64_t local_total = 0;
  for (int p = 0; p < whole.params().size(); ++p) {
    const auto& w = whole.params()[p];
    const auto& s = sharded.params()[p];
    EXPECT_EQ(w.spec.name, s.spec.name);
    EXPECT_EQ(w.spec.shape, s.spec.shape) << "the spec keeps the full logical shape";
    local_total += s.numel();
    EXPECT_TRUE(bit_identical(full[size_t(p)], std::vector<float>(w.value, w.value + w.numel())))
        << s.spec.name;
  }
  // Every matrix of the layers is split: this rank stores well under the whole.
  EXPECT_LT(local_total, whole.params().total_numel() * 2 / world_size() + 4096);
}

INSTANTIATE_TEST_SUITE_P(Variants, TpInit,
                         ::testing::Values("slide", "rec:fixed:skip", "rec:lstm:dual", "bst:sh:s4d",
                                           "bst:mh:s4d", "bst:mf:s4d", "bst:sh:unstructured",
                                           "bst:mf:unstructured"),
                         test_name);

// One layer, two segments: returns out, dx of segment 2 and the gathered gradients.
struct LayerRun {
  std::vector<float> out, dx;
  std::vector<std::vector<float>> grads;
  std::vector<std::string> names;
  std::vector<std::vector<float>> replicated_grads;  // local copies of unsharded parameters
  std::vector<core::TensorRef<float>> carried_refs;   // this rank's (data not kept)
  std::vector<std::vector<float>> carried;            // gathered over TP into full tensors
};

// The carried tensors of `layer`, each gathered over tp into its full shape.
std::vector<std::vector<float>> gather_carried(core::Layer<float>& layer, const TensorParallel& tp) {
  std::vector<std::vector<float>> out;
  std::vector<float> staging;
  for (const auto& ref : layer.carried_state()) {
    core::ParamSpec spec{ref.name, ref.shape, {}, ref.shard};
    if (ref.shard.sharded()) spec.shape[size_t(ref.shard.dim)] *= ref.shard.size;
    std::vector<float> full(size_t(spec.global_numel()));
    core::gather_shards(tp, spec, ref.data, full.data(), staging);
    out.push_back(std::move(full));
  }
  return out;
}

LayerRun run_layer(const core::ModelConfig& cfg, const TensorParallel& tp) {
  constexpr int B = 2;
  const int rows = B * cfg.seq_len, D = cfg.d_model;
  auto backend = kernels::make_cpu_backend<float>();
  core::ParamStore<float> store;
  std::unique_ptr<core::Layer<float>> layer;
  // Layer 1: recurrent in the recurrent variants (tp_run's recurrent_layers = [1]); BST
  // variants: the BST layer 0.
  if (cfg.is_bst_layer(0))
    layer = std::make_unique<core::BstLayer<float>>(store, cfg, 0, B, *backend, tp);
  else if (cfg.is_recurrent_layer(1))
    layer = std::make_unique<core::RecurrentLayer<float>>(store, cfg, 1, B, backend->memory(), tp);
  else
    layer = std::make_unique<core::StandardLayer<float>>(store, cfg, 1, B, backend->memory(), tp);
  store.finalize();
  store.initialize(11);
  core::BackwardScratch<float> scratch;  // the local widths F/TP and A/TP would do; full is safe
  scratch.allocate(backend->memory(), rows, D, cfg.d_ff, cfg.attn_width());
  const std::vector<uint8_t> first = {1, 1}, second = {0, 1};  // stream 0 carries over
  LayerRun r;
  r.out.assign(size_t(rows) * D, 0.f);
  r.dx.assign(size_t(rows) * D, 0.f);
  const auto x1 = random_vector(size_t(rows) * D, 1), x2 = random_vector(size_t(rows) * D, 2);
  const auto dout = random_vector(size_t(rows) * D, 3);
  layer->forward({*backend, B, cfg.seq_len, first.data()}, x1.data(), r.out.data());
  layer->forward({*backend, B, cfg.seq_len, second.data()}, x2.data(), r.out.data());
  store.zero_grads();
  layer->backward({*backend, B, cfg.seq_len, second.data()}, dout.data(), r.dx.data(), scratch);
  r.grads = gather_all(store, tp, true);
  for (const auto& p : store.params()) r.names.push_back(p.spec.name);
  for (const auto& p : store.params())
    if (!p.spec.shard.sharded()) r.replicated_grads.emplace_back(p.grad, p.grad + p.numel());
  r.carried_refs = layer->carried_state();
  r.carried = gather_carried(*layer, tp);
  return r;
}

class TpLayer : public ::testing::TestWithParam<std::string> {};

TEST_P(TpLayer, OutputAndEveryGradientMatchOneProcess) {
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, world_size());
  const TensorParallel tp(groups.tp());
  auto cfg = tp_run(GetParam(), 2, 1).model;
  cfg.resolve();
  const LayerRun ref = run_layer(cfg, TensorParallel());
  const LayerRun got = run_layer(cfg, tp);
  EXPECT_LE(relative_error(got.out.data(), ref.out.data(), int64_t(ref.out.size())), 1e-5);
  EXPECT_LE(relative_error(got.dx.data(), ref.dx.data(), int64_t(ref.dx.size())), 1e-5);
  ASSERT_EQ(got.grads.size(), ref.grads.size());
  for (size_t p = 0; p < ref.grads.size(); ++p)
    EXPECT_LE(relative_error(got.grads[p].data(), ref.grads[p].data(), int64_t(ref.grads[p].size())), 1e-5)
        << GetParam() << " gradient of " << ref.names[p];
  // Replicated parameters: the same gradient on every TP rank, bit for bit (no reduction needed).
  for (auto grad : got.replicated_grads) {
    std::vector<float> rank0 = grad;
    groups.tp().broadcast(std::span<float>(rank0), 0);
    EXPECT_TRUE(bit_identical(rank0, grad));
  }
  // The carried state after segment 2, gathered: the same tensors as one process holds. The
  // S4D carry holds doubles' bits in floats: compared as the doubles.
  ASSERT_EQ(got.carried.size(), ref.carried.size());
  for (size_t i = 0; i < ref.carried.size(); ++i) {
    const auto& name = ref.carried_refs[i].name;
    ASSERT_EQ(got.carried[i].size(), ref.carried[i].size()) << name;
    const bool bits = name.size() >= 9 && name.compare(name.size() - 9, 9, "ssm.carry") == 0;
    const int64_t n = int64_t(ref.carried[i].size());
    const double rel =
        bits ? relative_error(reinterpret_cast<const double*>(got.carried[i].data()),
                              reinterpret_cast<const double*>(ref.carried[i].data()), n / 2)
             : relative_error(got.carried[i].data(), ref.carried[i].data(), n);
    EXPECT_LE(rel, 1e-5) << GetParam() << " carried " << name;
    // Sharded carried tensors (caches by heads, SSM carry by features) are 1/TP per rank.
    if (got.carried_refs[i].shard.sharded()) {
      int64_t local = 1;
      for (auto d : got.carried_refs[i].shape) local *= d;
      EXPECT_EQ(local * world_size(), n) << name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, TpLayer,
                         ::testing::Values("slide", "rec:fixed:skip", "rec:lstm:dual"), test_name);
INSTANTIATE_TEST_SUITE_P(Bst, TpLayer,
                         ::testing::Values("bst:sh:s4d", "bst:mh:s4d", "bst:mf:s4d",
                                           "bst:sh:unstructured", "bst:mf:unstructured"),
                         test_name);

TEST(TpVocab, EmbeddingAndCrossEntropyMatchTheWholeVocabulary) {
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, world_size());
  const TensorParallel tp(groups.tp());
  constexpr int V = 64, D = 16, n = 40;
  auto backend = kernels::make_cpu_backend<float>();
  const core::VocabRange range = core::vocab_range(tp, V);
  ASSERT_EQ(range.size(), V / world_size());
  std::vector<int32_t> tokens(n), targets(n);
  std::vector<uint8_t> mask(n);
  for (int i = 0; i < n; ++i) {
    tokens[size_t(i)] = (i * 37 + 5) % V;
    targets[size_t(i)] = (i * 11 + 3) % V;
    mask[size_t(i)] = i % 7 != 3;
  }
  // Lookup and its backward.
  const auto table = random_vector(size_t(V) * D, 4);
  std::vector<float> want(size_t(n) * D), got(size_t(n) * D);
  backend->embedding_forward(tokens.data(), n, table.data(), D, want.data());
  // Other ranks' tokens map to -1 (local_token_ids), which the backend's lookup skips.
  std::vector<int32_t> local_tokens(n), local_targets(n);
  core::local_token_ids(range, tokens.data(), n, local_tokens.data());
  core::local_token_ids(range, targets.data(), n, local_targets.data());
  core::vocab_parallel_embedding_forward(*backend, tp, local_tokens.data(), n,
                                         table.data() + int64_t(range.begin) * D, D, got.data());
  EXPECT_TRUE(bit_identical(got, want));
  const auto dout = random_vector(size_t(n) * D, 5);
  std::vector<float> dtable(size_t(V) * D, 0.f), dlocal(size_t(range.size()) * D, 0.f);
  backend->embedding_backward(tokens.data(), n, dout.data(), D, dtable.data());
  core::vocab_parallel_embedding_backward(*backend, local_tokens.data(), n, dout.data(), D,
                                          dlocal.data());
  EXPECT_LE(relative_error(dlocal.data(), dtable.data() + int64_t(range.begin) * D, int64_t(dlocal.size())), 1e-6);
  // Cross-entropy: losses on every rank, this rank's columns of the gradient.
  const auto logits = random_vector(size_t(n) * V, 6, 3.0f);
  std::vector<float> dfull(size_t(n) * V), loss_full(n);
  const double total_full = backend->softmax_xent_forward_backward(
      logits.data(), targets.data(), mask.data(), n, V, 0.25f, dfull.data(), loss_full.data());
  std::vector<float> local(size_t(n) * range.size()), loss_tp(n);
  for (int r = 0; r < n; ++r)
    for (int v = 0; v < range.size(); ++v)
      local[size_t(r) * range.size() + v] = logits[size_t(r) * V + range.begin + v];
  core::VocabParallelCrossEntropy<float> xent;
  xent.allocate(backend->memory(), n);
  const double total_tp =
      xent.forward_backward(*backend, tp, local.data(), local_targets.data(), mask.data(), n,
                            range.size(), 0.25f, local.data(), loss_tp.data());
  EXPECT_NEAR(total_tp, total_full, 1e-5 * total_full);
  EXPECT_LE(relative_error(loss_tp.data(), loss_full.data(), n), 1e-6);
  double diff = 0, ref = 0;
  for (int r = 0; r < n; ++r)
    for (int v = 0; v < range.size(); ++v) {
      const double d = local[size_t(r) * range.size() + v] - dfull[size_t(r) * V + range.begin + v];
      diff += d * d;
      ref += double(dfull[size_t(r) * V + range.begin + v]) * dfull[size_t(r) * V + range.begin + v];
    }
  EXPECT_LE(std::sqrt(diff / ref), 1e-5);
}

}  // namespace
}  // namespace brt::testing
