// Context parallelism (core/sharding/context_parallel.h) of the whole model against one process holding
// every stream and the whole segment, under (DP, CP, TP) layouts of 2 and 4 ranks:
// three carried segments (all streams starting a document, then half of them, then none),
// random masks; per segment the loss, every parameter gradient (summed over DP × CP, gathered
// over TP) and every carried tensor (chunk 0's, which checkpoints write) — slide, xl (8 XL
// segments per step, each block's cache the previous block, detached), bst:sh:s4d,
// bst:mh:s4d, bst:mf:s4d, with the S4D carry on and off. float64 shows the scheme is exact (≤ 1e-10); a
// float32 run shows it stays at fp32 rounding (≤ 1e-5).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/sharding/context_parallel.h"
#include "core/model.h"
#include "kernels/backend.h"
#include "parallel/mpi/mpi_communicator.h"
#include "tests/core/cp/cp_test_util.h"

namespace brt::testing {
namespace {

using core::Model;

constexpr int kStreams = 4;  // global
constexpr int kSegments = 3;

template <typename T>
struct SegmentResult {
  double nats = 0;
  std::vector<std::vector<double>> grads;    // full tensors, store order
  std::vector<std::vector<double>> carried;  // this rank's streams, full (TP-gathered) tensors
};

template <typename T>
std::vector<SegmentResult<T>> run(const core::ModelConfig& cfg, const CpLayout* layout) {
  const int dp = layout ? layout->data_size : 1, d = layout ? layout->data_rank : 0;
  const int B = kStreams / dp;
  auto backend = kernels::make_cpu_backend<T>();
  const core::TensorParallel tp = layout ? core::TensorParallel(*layout->tp) : core::TensorParallel();
  const core::ContextParallel cp = layout ? core::ContextParallel(*layout->cp) : core::ContextParallel();
  Model<T> model(cfg, B, *backend, tp, cp);
  model.params().initialize(11);
  const int N = cfg.seq_len, L = model.chunk_len(), c = cp.rank();
  std::vector<SegmentResult<T>> out;
  for (int s = 0; s < kSegments; ++s) {
    const SegmentData data = segment_data(cfg, kStreams, s);
    std::vector<int32_t> in(size_t(B) * L), tg(size_t(B) * L);
    std::vector<uint8_t> mask(size_t(B) * L), starts(static_cast<size_t>(B), 0);
    for (int b = 0; b < B; ++b) {
      const int g = d * B + b;
      starts[size_t(b)] = data.doc_start[size_t(g)];
      for (int t = 0; t < L; ++t) {
        const size_t from = size_t(g) * N + size_t(c) * L + t, to = size_t(b) * L + t;
        in[to] = data.inputs[from];
        tg[to] = data.targets[from];
        mask[to] = data.mask[from];
      }
    }
    model.params().zero_grads();
    const core::LossSums sums =
        model.forward({in.data(), tg.data(), mask.data(), starts.data()}, T(1) / T(data.count));
    model.backward();
    SegmentResult<T> r;
    r.nats = layout ? sum_over(*layout->grad_group, sums.nats) : sums.nats;
    r.grads = gradients(model.params(), layout);
    r.carried = carried(model, tp);
    out.push_back(std::move(r));
  }
  return out;
}

void expect_close(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want,
                  double tolerance, const std::string& what, double& worst) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << what << " " << i;
    const double rel = relative_error(got[i].data(), want[i].data(), int64_t(want[i].size()));
    worst = std::max(worst, rel);
    EXPECT_LE(rel, tolerance) << what << " tensor " << i;
  }
}

struct Case {
  std::string variant;
  bool carry;
};

class CpModel : public ::testing::TestWithParam<Case> {};

template <typename T>
void check_layouts(const Case& c, double tolerance) {
  const core::ModelConfig cfg = cp_model_config(c.variant, c.carry);
  const auto ref = run<T>(cfg, nullptr);
  for (const auto& shape : cp_layouts(world_size())) {
    const CpLayout layout = make_layout(shape);
    const auto got = run<T>(cfg, &layout);
    double worst_grad = 0, worst_carry = 0, worst_loss = 0;
    const std::string name = c.variant + (c.carry ? "" : " (carry off)");
    for (int s = 0; s < kSegments; ++s) {
      const std::string at = name + " " + shape.name() + " segment " + std::to_string(s);
      const double loss_rel = std::abs(got[s].nats - ref[s].nats) / ref[s].nats;
      worst_loss = std::max(worst_loss, loss_rel);
      EXPECT_LE(loss_rel, tolerance) << at << " loss";
      expect_close(got[s].grads, ref[s].grads, tolerance, at + " gradient", worst_grad);
      // The segment's carried state is chunk 0's (what a checkpoint writes).
      const auto want = streams_of(ref[s].carried, kStreams, layout.data_rank * kStreams / layout.data_size, kStreams / layout.data_size);
      if (layout.cp->rank() == 0) expect_close(got[s].carried, want, tolerance, at + " carried state", worst_carry);
    }
    if (world_rank() == 0)
      std::printf("  %-22s %s %s: loss %.1e, gradients %.1e, carried state %.1e (relative)\n",
                  name.c_str(), shape.name().c_str(), sizeof(T) == 8 ? "float64" : "float32",
                  worst_loss, worst_grad, worst_carry);
  }
}

TEST_P(CpModel, Float64LossGradientsAndCarriedStateEqualOneProcess) {
  check_layouts<double>(GetParam(), 1e-10);
}

TEST_P(CpModel, Float32StaysAtRounding) { check_layouts<float>(GetParam(), 2e-5); }

INSTANTIATE_TEST_SUITE_P(Variants, CpModel,
                         ::testing::Values(Case{"slide", true}, Case{"xl", true}, Case{"bst:sh:s4d", true},
                                           Case{"bst:mh:s4d", true}, Case{"bst:mf:s4d", true},
                                           Case{"bst:sh:s4d", false}, Case{"bst:mf:s4d", false}),
                         [](const auto& info) {
                           std::string n = info.param.variant + (info.param.carry ? "" : "_nocarry");
                           for (char& ch : n) if (ch == ':') ch = '_';
                           return n;
                         });

TEST(CpRefusals, EachUnsupportedVariantNamesItsReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"rec:fixed:skip", "recurrent state"}, {"feedback:lstm:dual", "recurrent state"},
      {"bst:sh:unstructured", "no finite state"}};
  for (const auto& [variant, why] : cases) {
    core::ModelConfig cfg = cp_model_config(variant, true);
    cfg.resolve();
    const std::string problem = core::context_parallel_problem(cfg, 2);
    EXPECT_NE(problem.find(why), std::string::npos) << variant << ": " << problem;
    EXPECT_NE(problem.find("train.cp = 2"), std::string::npos) << problem;
    auto backend = kernels::make_cpu_backend<float>();
    EXPECT_THROW(Model<float>(cfg, 1, *backend, {}, make_layout({1, world_size(), 1}).context()),
                 std::invalid_argument)
        << variant;
  }
  core::ModelConfig cfg = cp_model_config("slide", true);
  cfg.resolve();
  const std::string blocks = core::context_parallel_problem(cfg, 16);
  EXPECT_NE(blocks.find("not a multiple of cp × model.window"), std::string::npos) << blocks;
}

}  // namespace
}  // namespace brt::testing
