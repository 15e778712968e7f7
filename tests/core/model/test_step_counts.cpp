// One training step counted, not run (kernels/counting_backend.h): the model built at its real
// shapes on meta memory, its step's device work (core::Model::device_work) issued to a backend
// that counts each call's FLOPs, bytes and launch. Checked against model.md §10
// (core/flops.h): the dense GEMMs are exactly §10's matrix products × 3 (forward, and the two
// products of each backward); window attention is twice §10's attention term, because the
// kernel scores the whole band of 2W keys per query where §10 counts the W a query sees on
// average — the known excess; and a 1.3B step is counted in well under a second.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/flops.h"
#include "core/model.h"
#include "kernels/backend.h"
#include "kernels/counting_backend.h"
#include "kernels/meta_memory.h"
#include "tests/common/micro_model.h"

namespace brt::core {
namespace {

using kernels::KernelClass;

struct Counted {
  kernels::KernelCounts gemm, window, total;
  double tokens = 0;
};

Counted count_step(const ModelConfig& cfg, int streams) {
  kernels::MetaMemory meta;
  kernels::CountingBackend<float> backend(meta);
  Model<float> model(cfg, streams, backend);
  const size_t rows = size_t(streams) * size_t(cfg.seq_len);
  std::vector<int32_t> tokens(rows, 1), targets(rows, 2);
  std::vector<uint8_t> mask(rows, 1), doc_start(size_t(streams), 1);
  model.stage_step({tokens.data(), targets.data(), mask.data(), doc_start.data()});
  backend.reset();  // the staging's copies are not the step
  model.device_work();
  return {backend.counts(KernelClass::kGemm), backend.counts(KernelClass::kWindowAttention), backend.total(),
          double(rows)};
}

// §10 for a standard model: per token 3 × (matrix products + attention), attention = 4WA per
// layer; here the GEMMs must be the products exactly and the band twice the attention.
TEST(StepCounts, DenseGemmsAreModel10sProductsAndTheBandIsTwiceItsAttention) {
  for (const char* variant : {"slide", "xl"}) {
    ModelConfig cfg = brt::testing::micro_model(
        variant, {.layers = 2, .d_model = 64, .heads = 4, .head_dim = 16, .d_ff = 128, .vocab = 96, .seq_len = 64,
                  .window = std::string(variant) == "xl" ? 64 : 16});
    cfg.resolve();
    const FlopBreakdown f = flops_per_token(cfg);
    const Counted c = count_step(cfg, 2);
    const double products = 3.0 * (f.forward() - f.attention) * c.tokens;
    const double attention = 3.0 * f.attention * c.tokens;
    std::printf("%s: GEMM %.4g FLOPs (model.md §10 products x3: %.4g), window attention %.4g (§10 attention x3: %.4g)\n",
                variant, c.gemm.flops, products, c.window.flops, attention);
    EXPECT_DOUBLE_EQ(c.gemm.flops, products) << variant;
    // The band's products (8·2W·A per query over forward and backward, 4·2W·A forward) are
    // exactly twice §10's; the softmax's few FLOPs per score come on top.
    const double band_products = 2.0 * attention;
    EXPECT_GE(c.window.flops, band_products) << variant;
    EXPECT_LE(c.window.flops, 1.1 * band_products) << variant;
    EXPECT_GT(c.total.bytes(), 0);
  }
}

// Every variant's step is counted, with §10's FLOPs within the band's excess and the classes
// §10 leaves out (norms, loss, SSM) small beside the products.
TEST(StepCounts, EveryVariantIsCountedNearModel10) {
  const std::vector<std::string> variants = {"rec:fixed:skip", "rec:lstm:dual", "feedback:fixed:skip",
                                             "bst:sh:s4d", "bst:mf:unstructured"};
  for (const std::string& variant : variants) {
    ModelConfig cfg = brt::testing::micro_model(
        variant, {.layers = 3, .d_model = 64, .heads = 4, .head_dim = 16, .d_ff = 128, .vocab = 96, .seq_len = 64,
                  .window = 16, .state_size = 16, .recurrent_layers = {1}, .bst_layers = {0, 2}, .ssm_state = 16,
                  .ctx_states = 8});
    cfg.resolve();
    const FlopBreakdown f = flops_per_token(cfg);
    const Counted c = count_step(cfg, 2);
    const double model10 = f.training() * c.tokens;
    std::printf("%-22s counted %.4g FLOPs (GEMM %.4g), model.md §10 %.4g: ratio %.3f; %lld launches, %.3g MB\n",
                variant.c_str(), c.total.flops, c.gemm.flops, model10, c.total.flops / model10,
                static_cast<long long>(c.total.launches), c.total.bytes() / 1e6);
    EXPECT_GE(c.total.flops, 0.9 * model10) << variant;
    EXPECT_LE(c.total.flops, 2.0 * model10) << variant;
  }
}

// Around another backend the counting backend runs every call there and times it per class:
// the step is the wrapped backend's, bit for bit (loss and every gradient), the counts are the
// counting-alone counts, and the classes that did work took time.
TEST(StepCounts, AroundARealBackendTheStepIsUnchangedAndEachClassTimed) {
  ModelConfig cfg = brt::testing::micro_model(
      "rec:fixed:skip", {.layers = 2, .d_model = 32, .heads = 2, .head_dim = 16, .d_ff = 64, .vocab = 64,
                         .seq_len = 32, .window = 8, .state_size = 8, .recurrent_layers = {1}});
  cfg.resolve();
  const int B = 2;
  const size_t rows = size_t(B) * size_t(cfg.seq_len);
  std::vector<int32_t> tokens(rows), targets(rows);
  for (size_t i = 0; i < rows; ++i) {
    tokens[i] = int32_t((i * 7 + 3) % 64);
    targets[i] = int32_t((i * 5 + 1) % 64);
  }
  std::vector<uint8_t> mask(rows, 1), doc_start(size_t(B), 1);
  const ModelInput in{tokens.data(), targets.data(), mask.data(), doc_start.data()};
  auto plain_backend = kernels::make_cpu_backend<float>();
  auto inner = kernels::make_cpu_backend<float>();
  kernels::SynchronizedCallTimer timer(inner->memory());
  kernels::CountingBackend<float> timed(*inner, timer);
  Model<float> plain(cfg, B, *plain_backend), wrapped(cfg, B, timed);
  plain.params().initialize(7);
  wrapped.params().initialize(7);
  timed.reset();
  std::vector<double> seconds;
  timer.collect(seconds);  // the initialisation's calls
  seconds.clear();
  const LossSums a = plain.forward(in, 1.0f / float(rows));
  plain.backward();
  const LossSums b = wrapped.forward(in, 1.0f / float(rows));
  wrapped.backward();
  EXPECT_EQ(a.nats, b.nats);
  std::vector<float> ga(size_t(plain.params().total_numel())), gb(ga.size());
  plain.memory().to_host(ga.data(), plain.params().grads(), ga.size() * sizeof(float));
  wrapped.memory().to_host(gb.data(), wrapped.params().grads(), gb.size() * sizeof(float));
  EXPECT_EQ(ga, gb) << "the wrapped step's gradients are the plain step's";
  const Counted alone = count_step(cfg, B);
  EXPECT_DOUBLE_EQ(timed.counts(KernelClass::kGemm).flops, alone.gemm.flops);
  EXPECT_DOUBLE_EQ(timed.total().flops, alone.total.flops);
  EXPECT_EQ(timed.total().launches, alone.total.launches);
  timer.collect(seconds);
  seconds.resize(kernels::kKernelClasses, 0.0);
  for (KernelClass c : {KernelClass::kGemm, KernelClass::kWindowAttention, KernelClass::kCrossAttention,
                        KernelClass::kElementwise, KernelClass::kCrossEntropy})
    EXPECT_GT(seconds[size_t(c)], 0.0) << kernels::kernel_class_name(c);
  EXPECT_EQ(seconds[size_t(KernelClass::kSsm)], 0.0);  // no SSM in this variant
}

TEST(StepCounts, ALargeModelIsCountedWithoutRunningIt) {
  ModelConfig cfg = brt::testing::micro_model(
      "rec:fixed:skip", {.layers = 24, .d_model = 2048, .heads = 16, .head_dim = 128, .d_ff = 8192, .vocab = 32000,
                         .seq_len = 4096, .window = 512, .state_size = 512, .recurrent_layers = {10}});
  cfg.resolve();
  const auto t0 = std::chrono::steady_clock::now();
  const Counted c = count_step(cfg, 4);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double model10 = flops_per_token(cfg).training() * c.tokens;
  std::printf("1.3B-sized rec:fixed:skip, B 4 x N 4096: %.4g FLOPs counted (model.md §10 %.4g, ratio %.3f), "
              "%.3g GB moved, %lld launches, counted in %.3f s\n",
              c.total.flops, model10, c.total.flops / model10, c.total.bytes() / 1e9,
              static_cast<long long>(c.total.launches), s);
  EXPECT_GE(c.total.flops, 0.9 * model10);
  EXPECT_LE(c.total.flops, 1.5 * model10);
  EXPECT_LT(s, 5.0);
}

}  // namespace
}  // namespace brt::core
