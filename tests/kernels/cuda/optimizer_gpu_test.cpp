// The optimizers on the GPU (label gpu; skipped without a CUDA device): AdamW and Adafactor
// (factored, unfactored, rank-3, r > c tensors) with parameters and state in device memory and
// the CUDA optimizer kernels, against the same optimizers on the CPU kernels over several
// steps on fresh random inputs, and bit-identical on a rerun (kernels/optimizer_kernels.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/optim/grad_clip.h"
#include "core/optim/optimizer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/optim/cuda_optimizer_kernels.h"
#include "tests/kernels/cuda/cuda_test_util.h"

namespace brt::core {
// gtest's name for a parameter (else "4-byte object <...>").
void PrintTo(OptimKind kind, std::ostream* os) { *os << (kind == OptimKind::kAdamW ? "adamw" : "adafactor"); }
}  // namespace brt::core

namespace brt::kernels::cuda {
namespace {

constexpr double kTolerance = 1e-5;  // ||gpu - cpu|| / ||cpu||

using test::relative_error;  // ||gpu - cpu|| / ||cpu|| (cuda_test_util.h)

void declare(core::ParamStore<float>& store, Memory& memory) {
  const std::vector<std::vector<int64_t>> shapes = {{300, 520}, {520, 200}, {3, 130, 150},
                                                    {140, 3, 300}, {50}, {300, 7}, {70000}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    core::ParamSpec spec;
    char name[16];  // (snprintf: g++ 12 -O3 warns falsely on "p" + std::to_string, -Wrestrict)
    std::snprintf(name, sizeof name, "p%d", static_cast<int>(i));
    spec.name = name;
    spec.shape = shapes[i];
    spec.init = {core::InitKind::kNormal, 0.5, 1.0, 0};
    store.declare(spec);
  }
  store.finalize(memory);
  store.initialize(9);
}

struct RunResult {
  std::vector<float> values;
  std::vector<std::vector<float>> state;
  std::vector<double> norms;
};

// `steps` optimizer steps with gradients from `seed` on a store in `backend`'s memory (null:
// host memory and the CPU kernels).
RunResult run(core::OptimKind kind, Backend<float>* backend, uint32_t seed, int steps) {
  Memory& memory = backend ? backend->memory() : host_memory();
  core::ParamStore<float> store;
  declare(store, memory);
  core::OptimConfig config;
  config.kind = kind;
  config.lr = 0.02;
  config.warmup = 2;
  config.total_steps = 10;
  config.clip_norm = 150.0;  // active for unit gradients (sqrt(numel) ~ 690)
  if (kind == core::OptimKind::kAdamW) config.weight_decay = 0.1;
  std::unique_ptr<OptimizerKernels<float>> kernels;
  if (backend) kernels = make_cuda_optimizer_kernels(*backend);
  auto optimizer = core::make_optimizer(config, store, {}, kernels.get());
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  RunResult out;
  std::vector<float> grads(size_t(store.total_numel()));
  for (int t = 0; t < steps; ++t) {
    for (float& g : grads) g = normal(gen);
    memory.from_host(store.grads(), grads.data(), grads.size() * sizeof(float));
    out.norms.push_back(optimizer->step().grad_norm);
  }
  out.values.resize(size_t(store.total_numel()));
  memory.to_host(out.values.data(), store.values(), out.values.size() * sizeof(float));
  for (const auto& s : optimizer->state()) {
    std::vector<float> host(size_t(s.numel()));
    memory.to_host(host.data(), s.data, host.size() * sizeof(float));
    out.state.push_back(std::move(host));
  }
  return out;
}

class CudaOptimizer : public ::testing::TestWithParam<core::OptimKind> {
 protected:
  void SetUp() override {
    BRT_REQUIRE_CUDA_DEVICE();
    gpu_ = make_cuda_backend();
  }
  std::unique_ptr<Backend<float>> gpu_;
};

TEST_P(CudaOptimizer, MatchesTheCpuKernelsAndRerunsBitIdentically) {
  const uint32_t seed = test::test_seed();
  SCOPED_TRACE("random seed " + std::to_string(seed));
  const RunResult cpu = run(GetParam(), nullptr, seed, 4);
  const RunResult gpu = run(GetParam(), gpu_.get(), seed, 4);
  for (size_t t = 0; t < cpu.norms.size(); ++t)
    EXPECT_NEAR(gpu.norms[t], cpu.norms[t], 1e-12 * cpu.norms[t]) << "step " << t;
  EXPECT_LE(relative_error(gpu.values, cpu.values), kTolerance) << "values";
  ASSERT_EQ(gpu.state.size(), cpu.state.size());
  for (size_t k = 0; k < cpu.state.size(); ++k)
    EXPECT_LE(relative_error(gpu.state[k], cpu.state[k]), kTolerance) << "state tensor " << k;
  const RunResult again = run(GetParam(), gpu_.get(), seed, 4);
  EXPECT_EQ(std::memcmp(again.values.data(), gpu.values.data(), gpu.values.size() * sizeof(float)), 0);
  EXPECT_EQ(again.norms, gpu.norms);
  for (size_t k = 0; k < gpu.state.size(); ++k)
    EXPECT_EQ(std::memcmp(again.state[k].data(), gpu.state[k].data(), gpu.state[k].size() * sizeof(float)), 0)
        << "state tensor " << k;
}

INSTANTIATE_TEST_SUITE_P(Rules, CudaOptimizer,
                         ::testing::Values(core::OptimKind::kAdamW, core::OptimKind::kAdafactor),
                         [](const auto& info) {
                           return std::string(info.param == core::OptimKind::kAdamW ? "AdamW" : "Adafactor");
                         });

TEST(CudaOptimizerKernels, ClipGradientsOnTheDevice) {
  BRT_REQUIRE_CUDA_DEVICE();
  auto gpu = make_cuda_backend();
  auto kernels = make_cuda_optimizer_kernels(*gpu);
  core::ParamStore<float> store;
  declare(store, gpu->memory());
  std::vector<float> grads(size_t(store.total_numel()));
  const uint32_t seed = test::test_seed();
  SCOPED_TRACE("random seed " + std::to_string(seed));
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  double expected = 0;
  for (float& g : grads) {
    g = normal(gen);
    expected += double(g) * g;
  }
  expected = std::sqrt(expected);
  gpu->memory().from_host(store.grads(), grads.data(), grads.size() * sizeof(float));
  EXPECT_THROW(core::GradNorm<float>{store}, std::runtime_error);  // device memory needs kernels
  core::ParamStore<float> host_store;
  declare(host_store, host_memory());
  EXPECT_THROW((core::GradNorm<float>{host_store, nullptr, kernels.get()}), std::runtime_error);
  core::GradNorm<float> norm(store, nullptr, kernels.get());
  EXPECT_NEAR(core::clip_gradients(store, norm, 10.0), expected, 1e-9 * expected);
  EXPECT_NEAR(norm.compute(store), 10.0, 1e-5);
}

TEST(CudaOptimizerKernels, RefusesABackendThatIsNotCuda) {
  auto cpu = make_cpu_backend<float>();
  EXPECT_THROW(make_cuda_optimizer_kernels(*cpu), std::runtime_error);
}

}  // namespace
}  // namespace brt::kernels::cuda
