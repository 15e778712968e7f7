// What users of a recurrent trainer ask first: does reading a document segment by segment
// with the carried state compute what one pass over the whole document computes? For every
// variant where the model defines it (model.md §8: the caches and states carry across segment
// boundaries exactly), in float64: the logits of 4 segments of N = 8 equal one segment of 32 to
// summation-order rounding (contract 1e-10 relative). Where it is not defined the test says why
// and checks that it indeed differs: xl (its window is the segment, W = N, model.md §6: another
// N is another attention span) and BST's unstructured kernels (the implicit filter makes N taps,
// so streaming computes the N-tap convolution of the document, a longer segment a longer one).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/model.h"
#include "kernels/backend.h"
#include "model_test_util.h"

namespace brt::testing {
namespace {

core::ModelConfig consistency_config(const std::string& variant, int seq_len) {
  core::ModelConfig c = tiny_config(variant);
  c.seq_len = seq_len;
  c.window = variant == "xl" ? seq_len : 4;
  if (variant.rfind("bst:", 0) == 0) {
    c.ssm_state = 4;   // M = 2 complex modes
    c.ctx_states = 3;  // S_ctx (MF)
    c.bst_layers = {0};
  }
  c.resolve();
  return c;
}

// The logits of every position of `doc` read in segments of `seq_len` (the carried state
// reset only at the first).
std::vector<double> logits_in_segments(const std::string& variant, int seq_len, const std::vector<int32_t>& doc) {
  auto backend = kernels::make_cpu_backend<double>();
  const core::ModelConfig cfg = consistency_config(variant, seq_len);
  core::Model<double> model(cfg, 1, *backend);
  model.params().initialize(29);
  std::vector<double> out;
  for (size_t begin = 0; begin < doc.size(); begin += size_t(seq_len)) {
    const uint8_t start = begin == 0;
    const double* logits = model.forward_logits({doc.data() + begin, nullptr, nullptr, &start});
    out.insert(out.end(), logits, logits + size_t(seq_len) * size_t(cfg.vocab));
  }
  return out;
}

double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double scale = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(a[i]));
    diff = std::max(diff, std::fabs(a[i] - b[i]));
  }
  return diff / std::max(scale, 1e-300);
}

class SegmentConsistency : public ::testing::TestWithParam<std::string> {};

TEST_P(SegmentConsistency, SegmentsWithCarriedStateEqualOnePassOverTheDocument) {
  const std::string variant = GetParam();
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int> token(0, tiny_config(variant).vocab - 1);
  std::vector<int32_t> doc(32);
  for (auto& t : doc) t = token(rng);
  const double diff = max_rel_diff(logits_in_segments(variant, 8, doc), logits_in_segments(variant, 32, doc));
  std::printf("%s: 4 segments of 8 vs one of 32, max rel diff %.3g\n", variant.c_str(), diff);
  if (variant == "xl" || variant.find(":unstructured") != std::string::npos) {
    EXPECT_GT(diff, 1e-6) << "another N is another model here: it must compute something else";
    return;
  }
  EXPECT_LE(diff, 1e-10);
}

INSTANTIATE_TEST_SUITE_P(Variants, SegmentConsistency,
                         ::testing::Values("slide", "xl", "rec:fixed:skip", "rec:fixed:dual", "rec:lstm:skip",
                                           "rec:lstm:dual", "feedback:fixed:skip", "feedback:lstm:dual",
                                           "bst:sh:s4d", "bst:mh:s4d", "bst:mf:s4d", "bst:sh:unstructured",
                                           "bst:mh:unstructured", "bst:mf:unstructured"),
                         variant_name);

}  // namespace
}  // namespace brt::testing
