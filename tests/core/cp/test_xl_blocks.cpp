// xl with N = k·W (model.md §6): every block is one Transformer-XL segment attending to the
// previous block's keys and values, detached. One step over k blocks is k consecutive xl steps of
// N = W with the parameters held fixed: the same losses, the summed gradients and the same
// carried cache (float64, ≤ 1e-12), over two calls with a document start in the first.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/model.h"
#include "kernels/backend.h"
#include "tests/core/cp/cp_test_util.h"

namespace brt::testing {
namespace {

TEST(XlBlocks, OneStepOfKBlocksIsKConsecutiveXlSegments) {
  core::ModelConfig blocks = cp_model_config("xl", true);  // N 32, W 4: 8 segments per step
  core::ModelConfig one = blocks;
  one.seq_len = blocks.window;
  const int B = 2, N = blocks.seq_len, W = blocks.window, k = N / W;
  auto backend = kernels::make_cpu_backend<double>();
  core::Model<double> big(blocks, B, *backend), small(one, B, *backend);
  big.params().initialize(5);
  small.params().initialize(5);
  std::vector<double> summed(size_t(small.params().total_numel()), 0.0);
  for (int step = 0; step < 2; ++step) {
    const SegmentData d = segment_data(blocks, B, step);  // step 0: every stream starts a document
    big.params().zero_grads();
    const double big_nats = big.forward({d.inputs.data(), d.targets.data(), d.mask.data(), d.doc_start.data()}, 1.0).nats;
    big.backward();
    double small_nats = 0;
    std::fill(summed.begin(), summed.end(), 0.0);
    for (int t = 0; t < k; ++t) {
      std::vector<int32_t> in, tg;
      std::vector<uint8_t> mask, starts(size_t(B), 0);
      for (int b = 0; b < B; ++b) {
        for (int i = 0; i < W; ++i) {
          const size_t at = size_t(b) * N + size_t(t) * W + i;
          in.push_back(d.inputs[at]);
          tg.push_back(d.targets[at]);
          mask.push_back(d.mask[at]);
        }
        starts[size_t(b)] = t == 0 ? d.doc_start[size_t(b)] : 0;
      }
      small.params().zero_grads();
      small_nats += small.forward({in.data(), tg.data(), mask.data(), starts.data()}, 1.0).nats;
      small.backward();
      const double* g = small.params().grads();
      for (size_t i = 0; i < summed.size(); ++i) summed[i] += g[i];
    }
    EXPECT_NEAR(big_nats, small_nats, 1e-12 * small_nats) << "step " << step;
    const double* g = big.params().grads();
    EXPECT_LE(relative_error(g, summed.data(), int64_t(summed.size())), 1e-12) << "step " << step;
    const auto a = big.snapshot_carried_state(), b = small.snapshot_carried_state();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i], b[i]) << "carried tensor " << i;
  }
}

}  // namespace
}  // namespace brt::testing
