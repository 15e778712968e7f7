// The kernels tensor parallelism runs on backend memory (docs/parallelism.md): the embedding
// with -1 (another rank's) tokens, copy_2d, and the three phases of the cross-entropy over
// vocabulary-split logits, against float64 references on random inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/backend.h"
#include "kernel_test_util.h"

namespace brt::kernels::test {
namespace {

TEST(TpKernels, EmbeddingSkipsTokensOfOtherRanks) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  constexpr int rows = 9, D = 70, n = 40;
  // Float-representable values, so the forward reference is exact.
  const std::vector<double> table = cast_to<double>(cast_to<float>(rng.normal(size_t(rows) * D, 1.0)));
  const std::vector<double> dout = cast_to<double>(cast_to<float>(rng.normal(size_t(n) * D, 1.0)));
  std::vector<int32_t> tokens(n);
  for (int32_t& t : tokens) t = rng.uniform_int(-1, rows - 1);
  tokens[0] = -1, tokens[1] = 3, tokens[2] = 3;  // a skipped row and a repeated token
  std::vector<double> want_out(size_t(n) * D, 0.0), want_dtable(size_t(rows) * D, 0.5);
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0) continue;
    for (int j = 0; j < D; ++j) {
      want_out[size_t(i) * D + j] = table[size_t(tokens[i]) * D + j];
      want_dtable[size_t(tokens[i]) * D + j] += dout[size_t(i) * D + j];
    }
  }
  auto be = make_cpu_backend<float>();
  const auto tablef = cast_to<float>(table), doutf = cast_to<float>(dout);
  std::vector<float> out(size_t(n) * D, 7.0f), dtable(size_t(rows) * D, 0.5f);
  be->embedding_forward(tokens.data(), n, tablef.data(), D, out.data());
  be->embedding_backward(tokens.data(), n, doutf.data(), D, dtable.data());
  expect_close(out, want_out, 0.0, "embedding forward");
  expect_close(dtable, want_dtable, 1e-6, "embedding backward");
}

TEST(TpKernels, Copy2dMovesAndAccumulatesStridedRowBlocks) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  constexpr int rows = 5;
  constexpr int64_t cols = 13, ldx = 20, ldy = 31;
  const std::vector<double> x = rng.normal(size_t(rows) * ldx, 1.0);
  const std::vector<double> y0 = rng.normal(size_t(rows) * ldy, 1.0);
  for (const bool accumulate : {false, true}) {
    std::vector<double> want = y0;
    for (int i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        want[size_t(i * ldy + j)] = (accumulate ? y0[size_t(i * ldy + j)] : 0.0) + x[size_t(i * ldx + j)];
    auto be = make_cpu_backend<double>();
    std::vector<double> y = y0;
    be->copy_2d(x.data(), ldx, rows, cols, y.data(), ldy, accumulate);
    expect_close(y, want, 1e-15, accumulate ? "copy_2d accumulate" : "copy_2d");
  }
}

// The split cross-entropy over `parts` column ranges, the statistics combined as the TP
// all-reduces would, against the float64 softmax cross-entropy of the whole rows.
template <typename T>
void check_split_xent(int n, int V, int parts, double tol) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const std::vector<double> logits = rng.normal(size_t(n) * V, 3.0);
  std::vector<int32_t> targets(n);
  std::vector<uint8_t> mask(n);
  for (int r = 0; r < n; ++r) {
    targets[r] = rng.uniform_int(0, V - 1);
    mask[r] = r % 4 != 1;
  }
  const double grad_scale = 0.3;
  std::vector<double> want_loss(n, 0.0), want_d(size_t(n) * V, 0.0);
  double want_total = 0;
  for (int r = 0; r < n; ++r) {
    if (!mask[r]) continue;
    const double* l = logits.data() + size_t(r) * V;
    const double m = *std::max_element(l, l + V);
    double s = 0;
    for (int v = 0; v < V; ++v) s += std::exp(l[v] - m);
    want_loss[r] = std::log(s) + m - l[targets[r]];
    want_total += want_loss[r];
    for (int v = 0; v < V; ++v)
      want_d[size_t(r) * V + v] = grad_scale * (std::exp(l[v] - m) / s - (v == targets[r]));
  }
  auto be = make_cpu_backend<T>();
  const int local = V / parts;
  std::vector<std::vector<T>> part_logits(parts, std::vector<T>(size_t(n) * local));
  std::vector<std::vector<int32_t>> local_targets(parts, std::vector<int32_t>(n));
  for (int p = 0; p < parts; ++p)
    for (int r = 0; r < n; ++r) {
      for (int v = 0; v < local; ++v)
        part_logits[p][size_t(r) * local + v] = T(logits[size_t(r) * V + p * local + v]);
      const int t = targets[r] - p * local;
      local_targets[p][r] = t >= 0 && t < local ? t : -1;
    }
  std::vector<double> max(n, -INFINITY), sum(n, 0.0), target(n, 0.0), part(n), part_t(n);
  for (int p = 0; p < parts; ++p) {
    be->xent_split_max(part_logits[p].data(), n, local, part.data());
    for (int r = 0; r < n; ++r) max[r] = std::max(max[r], part[r]);
  }
  for (int p = 0; p < parts; ++p) {
    be->xent_split_sums(part_logits[p].data(), local_targets[p].data(), mask.data(), n, local,
                        max.data(), part.data(), part_t.data());
    for (int r = 0; r < n; ++r) sum[r] += part[r], target[r] += part_t[r];
  }
  std::vector<double> got_d(size_t(n) * V);
  for (int p = 0; p < parts; ++p) {
    std::vector<T> loss(n, T(-1));
    // In place, as the model calls it (dlogits aliases logits).
    const double total = be->xent_split_finish(part_logits[p].data(), local_targets[p].data(),
                                               mask.data(), n, local, T(grad_scale), max.data(),
                                               sum.data(), target.data(), part_logits[p].data(),
                                               loss.data());
    EXPECT_NEAR(total, want_total, tol * want_total) << "part " << p;
    expect_close(loss, want_loss, tol, "row losses, part " + std::to_string(p));
    for (int r = 0; r < n; ++r)
      for (int v = 0; v < local; ++v)
        got_d[size_t(r) * V + p * local + v] = double(part_logits[p][size_t(r) * local + v]);
  }
  expect_close(got_d, want_d, tol, "dlogits");
}

TEST(TpKernels, SplitCrossEntropyMatchesTheWholeVocabulary) {
  check_split_xent<double>(7, 12, 3, 1e-12);
  check_split_xent<float>(33, 1000, 4, 2e-5);
  check_split_xent<float>(5, 64, 1, 2e-5);  // TP = 1: every target is local
}

}  // namespace
}  // namespace brt::kernels::test
