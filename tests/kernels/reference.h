// Naive float64 references written straight from docs/model.md (loops only, no BLAS), used by the
// kernel tests as the independent ground truth.
#pragma once

#include <vector>

#include "kernels/backend.h"

namespace brt::kernels::test {

// T5 bucket from the table of first distances per bucket (docs/model.md §3.3), not
// from the formula: 0..16 -> 0..16, 19 -> 17, 21 -> 18, ..., 99 -> 30, >= 113 -> 31.
int reference_t5_bucket(int distance);

struct AttentionResult {
  std::vector<double> out;
  std::vector<double> probs;
};

// model.md §3.2/§3.3 window attention; probs laid out [B, T, H, W, 2W] with exact zeros.
AttentionResult reference_window_attention(const WindowAttnDims& d, const std::vector<double>& q,
                                           const std::vector<double>& k,
                                           const std::vector<double>& v,
                                           const std::vector<double>& k_cache,
                                           const std::vector<double>& v_cache,
                                           const std::vector<double>& rel_bias,
                                           const std::vector<double>& scale);

// model.md §3.4 cross-attention with strides; probs [batch, H, nq, nk]. `out_size` is the size
// of the output buffer (positions not covered by the batch entries stay 0).
AttentionResult reference_cross_attention(const CrossAttnDims& d, const std::vector<double>& q,
                                          const std::vector<double>& k,
                                          const std::vector<double>& v,
                                          const std::vector<double>& scale, std::size_t out_size);

}  // namespace brt::kernels::test
