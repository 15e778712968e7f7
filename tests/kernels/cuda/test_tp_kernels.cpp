// The GPU kernels tensor parallelism runs on device memory (docs/parallelism.md): the
// embedding with -1 (another rank's) tokens, copy_2d, and the vocabulary-split cross-entropy
// phases, against the CPU backend.
#include <vector>

#include "tests/kernels/cuda/cuda_test_util.h"

namespace brt::kernels::cuda::test {
namespace {

using CudaTpTest = CudaTest;

TEST_F(CudaTpTest, EmbeddingSkipsTokensOfOtherRanks) {
  SCOPED_TRACE(rng_.trace());
  const int rows = 50, D = 96, n = 700;
  const auto table = rng_.normal(std::size_t(rows) * D), dout = rng_.normal(std::size_t(n) * D);
  const auto tokens = rng_.ints(n, -1, rows - 1);
  auto dtable = rng_.normal(table.size());
  std::vector<float> out(std::size_t(n) * D);
  const int32_t* d_tokens = upload(tokens);
  float *d_out = poisoned(out.size()), *d_dtable = upload(dtable);
  gpu_->embedding_forward(d_tokens, n, upload(table), D, d_out);
  gpu_->embedding_backward(d_tokens, n, upload(dout), D, d_dtable);
  cpu_->embedding_forward(tokens.data(), n, table.data(), D, out.data());
  cpu_->embedding_backward(tokens.data(), n, dout.data(), D, dtable.data());
  EXPECT_TRUE(bit_identical(download(d_out, out.size()), out)) << "embedding forward";
  // Same per-row order of additions as the CPU (the sorted runs): bit-identical too.
  EXPECT_TRUE(bit_identical(download(d_dtable, dtable.size()), dtable)) << "embedding backward";
}

TEST_F(CudaTpTest, Copy2dMatchesCpu) {
  SCOPED_TRACE(rng_.trace());
  const int rows = 37;
  const int64_t cols = 300, ldx = 333, ldy = 1200;
  const auto x = rng_.normal(std::size_t(rows) * ldx);
  for (const bool accumulate : {false, true}) {
    auto y = rng_.normal(std::size_t(rows) * ldy);
    float* d_y = upload(y);
    gpu_->copy_2d(upload(x), ldx, rows, cols, d_y, ldy, accumulate);
    cpu_->copy_2d(x.data(), ldx, rows, cols, y.data(), ldy, accumulate);
    EXPECT_TRUE(bit_identical(download(d_y, y.size()), y)) << "accumulate " << accumulate;
  }
}

TEST_F(CudaTpTest, SplitCrossEntropyPhasesMatchCpu) {
  SCOPED_TRACE(rng_.trace());
  const int n = 130, V = 2003;
  const auto logits = rng_.normal(std::size_t(n) * V, 3.0f);
  const auto local_targets = rng_.ints(n, -1, V - 1);
  std::vector<uint8_t> mask(n);
  for (int r = 0; r < n; ++r) mask[r] = r % 5 != 2;
  const float* d_logits = upload(logits);
  const int32_t* d_targets = upload(local_targets);
  const uint8_t* d_mask = upload(mask);
  // Phase 1 alone, then phases 2 and 3 from the same (CPU) statistics, as after all-reduces.
  std::vector<double> max(n), sum(n), target(n);
  double* d_max = upload(std::vector<double>(n, NAN));
  gpu_->xent_split_max(d_logits, n, V, d_max);
  cpu_->xent_split_max(logits.data(), n, V, max.data());
  EXPECT_EQ(download(d_max, n), max) << "row max (exact)";
  double *d_sum = upload(std::vector<double>(n, NAN)), *d_target = upload(std::vector<double>(n, NAN));
  gpu_->xent_split_sums(d_logits, d_targets, d_mask, n, V, d_max, d_sum, d_target);
  cpu_->xent_split_sums(logits.data(), local_targets.data(), mask.data(), n, V, max.data(),
                        sum.data(), target.data());
  const std::vector<double> gpu_sum = download(d_sum, n);
  for (int r = 0; r < n; ++r)  // double sums in another order
    EXPECT_NEAR(gpu_sum[r], sum[r], 1e-12 * sum[r]) << "sum of exponentials, row " << r;
  EXPECT_EQ(download(d_target, n), target) << "target logits (exact)";
  std::vector<float> dlogits(logits.size()), loss(n);
  float *d_dlogits = poisoned(logits.size()), *d_loss = poisoned(n);
  const double gpu_total = gpu_->xent_split_finish(d_logits, d_targets, d_mask, n, V, 0.5f, d_max,
                                                   d_sum, d_target, d_dlogits, d_loss);
  const double cpu_total = cpu_->xent_split_finish(logits.data(), local_targets.data(), mask.data(),
                                                   n, V, 0.5f, max.data(), sum.data(),
                                                   target.data(), dlogits.data(), loss.data());
  EXPECT_NEAR(gpu_total, cpu_total, 1e-12 * cpu_total);
  EXPECT_REL_CLOSE(download(d_loss, n), loss, kFp32Tolerance, "row losses");
  EXPECT_REL_CLOSE(download(d_dlogits, dlogits.size()), dlogits, kFp32Tolerance, "dlogits");
}

}  // namespace
}  // namespace brt::kernels::cuda::test
