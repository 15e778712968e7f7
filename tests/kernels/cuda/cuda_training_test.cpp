// GPU training checks (label gpu; skip without a GPU; docs/gpu.md):
//  - fp32 on the GPU tracks the CPU backend's loss curve for 50 steps (the tiny config with
//    Adafactor, and AdamW), and every variant (BST's SH/MH/MF with both SSM kernels included)
//    for 10 steps: the per-step difference is printed as a measurement; step 1 is held to 1e-5
//    and every step to a divergence bound (expect_tracks);
//  - two GPU runs are bit-identical (losses and final weights);
//  - bf16 matrix products: the tiny config's loss after 200 steps within 1% of fp32; the bf16
//    weight shadow equal to rounding each weight per product, bit for bit.
// Each run is the trainer's step loop (launch/train/trainer.cpp) without MPI: zero_grads, forward
// with the 1/count loss scale (model.md §10b), backward, one optimizer step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/optim/optimizer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/optim/cuda_optimizer_kernels.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"
#include "tests/kernels/cuda/gpu_required.h"

namespace {

namespace kc = brt::kernels::cuda;
using brt::core::Model;

struct RunResult {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;  // every parameter after the last step
};

brt::launch::RunConfig tiny_config(const std::vector<std::string>& overrides = {}) {
  std::vector<std::string> o = {"data.source=synthetic"};
  o.insert(o.end(), overrides.begin(), overrides.end());
  // The device tool runs from the repository root, as ctest does (WORKING_DIRECTORY).
  return brt::launch::load_run_config("configs/tiny.toml", o);
}

// `steps` training steps of cfg on `backend` from the seed's initialisation.
RunResult train(const brt::launch::RunConfig& cfg, brt::kernels::Backend<float>& backend,
                int steps) {
  Model<float> model(cfg.model, cfg.train.batch, backend);
  model.params().initialize(uint64_t(cfg.train.seed));
  // The CUDA optimizer kernels for the GPU backend; null: the CPU ones.
  std::unique_ptr<brt::kernels::OptimizerKernels<float>> kernels;
  if (std::string(backend.name()) == "cuda") kernels = kc::make_cuda_optimizer_kernels(backend);
  auto optimizer = brt::core::make_optimizer(cfg.optim, model.params(), {}, kernels.get());
  brt::launch::SyntheticMarkovSource source(cfg.model.vocab, cfg.train.batch, cfg.model.seq_len,
                                            uint64_t(cfg.train.seed));
  brt::data::Batch batch;
  RunResult r;
  for (int step = 0; step < steps; ++step) {
    source.next(batch);
    int64_t count = 0;
    for (uint8_t m : batch.mask) count += m;
    model.params().zero_grads();
    const brt::core::ModelInput in{batch.inputs.data(), batch.targets.data(), batch.mask.data(),
                                   batch.doc_start.data()};
    const brt::core::LossSums sums = model.forward(in, count ? 1.0f / float(count) : 0.0f);
    model.backward();
    optimizer->step();
    r.losses.push_back(count ? sums.nats / double(count) : 0.0);
  }
  for (int i = 0; i < model.params().size(); ++i) r.weights.push_back(model.params().value_to_host(i));
  return r;
}

RunResult train_on_gpu(const brt::launch::RunConfig& cfg, kc::Precision precision, int steps,
                       bool weight_shadow = true) {
  kc::CudaOptions options;
  options.precision = precision;
  options.bf16_weight_shadow = weight_shadow;
  auto backend = kc::make_cuda_backend(options);
  return train(cfg, *backend, steps);
}

RunResult train_on_cpu(const brt::launch::RunConfig& cfg, int steps) {
  auto backend = brt::kernels::make_cpu_backend<float>();
  return train(cfg, *backend, steps);
}

class CudaTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    BRT_REQUIRE_CUDA_DEVICE();
  }
};

// The GPU's loss curve against the CPU's. Two fp32 runs that sum in different orders drift
// apart over training however correct both are (each step's rounding feeds the next), so the
// per-step difference is a MEASUREMENT, printed for every run (first, 10th, last, worst step);
// it gates only what a bug would show: the first step (one forward pass: fp32 rounding alone)
// within first_tol, and no step beyond a divergence bound of 2e-2. docs/gpu.md says when the
// measured curve should become a tighter gate.
void expect_tracks(const RunResult& gpu, const RunResult& cpu, double first_tol,
                   const std::string& what) {
  constexpr double kDivergence = 2e-2;
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  std::vector<double> rel(cpu.losses.size());
  size_t worst = 0;
  for (size_t i = 0; i < cpu.losses.size(); ++i) {
    rel[i] = std::fabs(gpu.losses[i] - cpu.losses[i]) / std::fabs(cpu.losses[i]);
    if (!(rel[i] <= rel[worst])) worst = i;  // NaN counts as worst
  }
  const size_t tenth = std::min<size_t>(9, rel.size() - 1);
  std::printf("%s: %zu steps, relative loss difference GPU vs CPU: step 1 %.3g, step %zu %.3g, "
              "step %zu %.3g, worst %.3g at step %zu (cpu loss %.6f -> %.6f)\n", what.c_str(),
              rel.size(), rel[0], tenth + 1, rel[tenth], rel.size(), rel.back(), rel[worst],
              worst + 1, cpu.losses.front(), cpu.losses.back());
  EXPECT_LE(rel[0], first_tol) << what << " step 1: gpu " << gpu.losses[0] << " cpu " << cpu.losses[0];
  EXPECT_LE(rel[worst], kDivergence) << what << " diverged at step " << worst + 1 << ": gpu "
                                     << gpu.losses[worst] << " cpu " << cpu.losses[worst];
}

TEST_F(CudaTraining, Fp32AdafactorTracksCpuFor50Steps) {
  const auto cfg = tiny_config();
  expect_tracks(train_on_gpu(cfg, kc::Precision::kFp32, 50), train_on_cpu(cfg, 50), 1e-5,
                "tiny rec:fixed:skip adafactor");
}

TEST_F(CudaTraining, Fp32AdamWTracksCpuFor50Steps) {
  const auto cfg = tiny_config({"optim.kind=adamw", "optim.lr=0.003"});
  expect_tracks(train_on_gpu(cfg, kc::Precision::kFp32, 50), train_on_cpu(cfg, 50), 1e-5,
                "tiny rec:fixed:skip adamw");
}

TEST_F(CudaTraining, EveryVariantTracksCpu) {
  for (const std::string variant :
       {"slide", "xl", "rec:lstm:dual", "rec:fixed:dual", "bst:sh:s4d", "bst:sh:unstructured",
        "bst:mh:s4d", "bst:mh:unstructured", "bst:mf:s4d", "bst:mf:unstructured"}) {
    std::vector<std::string> o = {"model.variant=" + variant};
    if (variant == "xl") o.push_back("model.window=256");
    const auto cfg = tiny_config(o);
    expect_tracks(train_on_gpu(cfg, kc::Precision::kFp32, 10), train_on_cpu(cfg, 10), 1e-5,
                  "tiny " + variant);
  }
}

TEST_F(CudaTraining, RepeatedRunsAreBitIdentical) {
  const auto cfg = tiny_config();
  const RunResult a = train_on_gpu(cfg, kc::Precision::kFp32, 20);
  const RunResult b = train_on_gpu(cfg, kc::Precision::kFp32, 20);
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i)
    EXPECT_EQ(std::memcmp(&a.losses[i], &b.losses[i], sizeof(double)), 0) << "step " << i + 1;
  ASSERT_EQ(a.weights.size(), b.weights.size());
  for (size_t p = 0; p < a.weights.size(); ++p)
    EXPECT_EQ(std::memcmp(a.weights[p].data(), b.weights[p].data(), a.weights[p].size() * 4), 0)
        << "parameter " << p;
  const RunResult c = train_on_gpu(tiny_config(), kc::Precision::kBf16, 5);
  const RunResult d = train_on_gpu(tiny_config(), kc::Precision::kBf16, 5);
  for (size_t i = 0; i < c.losses.size(); ++i) EXPECT_EQ(c.losses[i], d.losses[i]) << "bf16 step " << i + 1;
}

// bf16 with the weights rounded once per forward into a shadow (CudaOptions::bf16_weight_shadow)
// is bf16 with each weight operand rounded per product, bit for bit: the same operands, shapes and
// alignment reach cuBLAS (kernels/cuda/weight_shadow.h); the optimizer's steps in between
// show that each forward rounds the weights it reads.
TEST_F(CudaTraining, Bf16WeightShadowEqualsRoundingPerProductBitForBit) {
  const auto cfg = tiny_config({"model.seq_len=64", "model.window=16", "model.vocab=512", "train.batch=2"});
  const RunResult shadow = train_on_gpu(cfg, kc::Precision::kBf16, 3, true);
  const RunResult per_product = train_on_gpu(cfg, kc::Precision::kBf16, 3, false);
  for (size_t i = 0; i < shadow.losses.size(); ++i)
    EXPECT_EQ(std::memcmp(&shadow.losses[i], &per_product.losses[i], sizeof(double)), 0)
        << "step " << i + 1 << ": " << shadow.losses[i] << " vs " << per_product.losses[i];
  ASSERT_EQ(shadow.weights.size(), per_product.weights.size());
  for (size_t p = 0; p < shadow.weights.size(); ++p)
    EXPECT_EQ(std::memcmp(shadow.weights[p].data(), per_product.weights[p].data(), shadow.weights[p].size() * 4), 0)
        << "parameter " << p;
}

TEST_F(CudaTraining, Bf16LossWithinOnePercentOfFp32After200Steps) {
  const auto cfg = tiny_config();
  const RunResult fp32 = train_on_gpu(cfg, kc::Precision::kFp32, 200);
  const RunResult bf16 = train_on_gpu(cfg, kc::Precision::kBf16, 200);
  // The last 10 steps' mean: one step's loss depends on its batch, the comparison should not.
  double a = 0, b = 0;
  for (int i = 190; i < 200; ++i) a += fp32.losses[size_t(i)], b += bf16.losses[size_t(i)];
  a /= 10, b /= 10;
  std::printf("tiny after 200 steps (mean of steps 191-200): fp32 %.5f bf16 %.5f (%.3f%%), "
              "start %.5f\n", a, b, 100 * (b - a) / a, fp32.losses.front());
  EXPECT_LE(std::fabs(b - a) / a, 0.01);
  EXPECT_LT(a, fp32.losses.front() - 0.5) << "fp32 did not learn";
}

}  // namespace
