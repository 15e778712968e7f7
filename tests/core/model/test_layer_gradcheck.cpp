// Per-layer gradient checks in float64: the standard layer (§4, sliding window and XL) and the
// recurrent layer (§5, every gate/config), for the layer input x and every parameter, over a
// segment of several blocks, with one stream continuing from a carried cache/state.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "core/layers/recurrent_layer.h"
#include "core/standard_layer.h"
#include "kernels/backend.h"
#include "model_test_util.h"
#include "tests/common/test_seed.h"

namespace brt::testing {
namespace {

class LayerGradCheck : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerGradCheck, InputAndParameterGradientsMatchFiniteDifferences) {
  auto backend = kernels::make_cpu_backend<double>();
  core::ModelConfig cfg = tiny_config(GetParam());
  cfg.seq_len = 12;
  cfg.window = GetParam() == "xl" ? 12 : 4;  // three blocks, or one (XL)
  cfg.resolve();
  const int B = 2, rows = B * cfg.seq_len, D = cfg.d_model;
  core::ParamStore<double> store;
  std::unique_ptr<core::Layer<double>> layer;
  if (cfg.family == core::ModelFamily::kRecurrent)
    layer = std::make_unique<core::RecurrentLayer<double>>(store, cfg, 0, B, backend->memory());
  else
    layer = std::make_unique<core::StandardLayer<double>>(store, cfg, 0, B, backend->memory());
  store.finalize();
  store.initialize(99);
  core::BackwardScratch<double> scratch;
  scratch.allocate(backend->memory(), rows, D, cfg.d_ff, cfg.attn_width());

  const uint64_t seed = brt::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> x(rows * D), probe(rows * D), out(rows * D);
  for (auto& v : x) v = normal(rng);
  for (auto& v : probe) v = normal(rng);
  // Warm-up segment fills the carried state; the checked one continues stream 1.
  const uint8_t warm_start[2] = {1, 1}, doc_start[2] = {1, 0};
  layer->forward({*backend, B, cfg.seq_len, warm_start}, x.data(), out.data());
  for (auto& v : x) v = normal(rng);
  std::vector<std::vector<double>> carried;
  for (auto& ref : layer->carried_state()) {
    int64_t n = 1;
    for (auto s : ref.shape) n *= s;
    carried.emplace_back(ref.data, ref.data + n);
  }
  const core::StepContext<double> ctx{*backend, B, cfg.seq_len, doc_start};
  auto restore = [&]() {
    auto refs = layer->carried_state();
    for (size_t i = 0; i < refs.size(); ++i) std::copy(carried[i].begin(), carried[i].end(), refs[i].data);
  };
  // f = <probe, layer(x)>
  auto f = [&]() {
    restore();
    layer->forward(ctx, x.data(), out.data());
    double s = 0;
    for (int i = 0; i < rows * D; ++i) s += probe[i] * out[i];
    return s;
  };
  f();
  store.zero_grads();
  std::vector<double> dx(rows * D, 7.0);  // written by backward (core/layer.h), whatever it held
  layer->backward(ctx, probe.data(), dx.data(), scratch);

  GradCheckVars vars;
  vars.add_input(x, dx);
  for (auto& p : store.params()) vars.add_param(p);
  const GradError err = report_gradient_check(f, vars, GetParam() + " layer");
  EXPECT_LE(err.norm_rel, 1e-6) << err.where;
  EXPECT_LE(err.max_rel, 1e-4) << err.where;
}

INSTANTIATE_TEST_SUITE_P(AllLayers, LayerGradCheck,
                         ::testing::Values("slide", "xl", "rec:fixed:skip", "rec:lstm:skip",
                                           "rec:fixed:dual", "rec:lstm:dual"), variant_name);

}  // namespace
}  // namespace brt::testing
