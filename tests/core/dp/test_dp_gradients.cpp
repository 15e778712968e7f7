// (a) Whole model, variants slide, rec:fixed:skip, rec:lstm:dual: the loss and every gradient
// of DP ranks that hold kGlobalStreams / world streams each, reduced in buckets during
// backward, match one process holding all kGlobalStreams streams (model.md §10b: the mean over
// the global batch) — over two consecutive segments, so the carried state takes part.
// Also: the reduced gradient is bit-identical whatever the bucket size and with or without
// overlap (the MPI all-reduce folds in rank order), and identical on every rank.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/data_parallel.h"
#include "core/model.h"
#include "data/batch.h"
#include "kernels/backend.h"
#include "launch/feed/batch_source.h"
#include "tests/core/dp/dp_test_util.h"

namespace brt::testing {
namespace {

using core::Model;

struct StepOutput {
  double loss = 0;
  std::vector<float> grads;
};

constexpr uint64_t kDataSeed = 99;
constexpr int kSegments = 2;

// One process, all global streams.
std::vector<StepOutput> single_process(const launch::RunConfig& cfg) {
  auto backend = kernels::make_cpu_backend<float>();
  Model<float> model(cfg.model, kGlobalStreams, *backend);
  model.params().initialize(uint64_t(cfg.train.seed));
  launch::SyntheticMarkovSource source(cfg.model.vocab, kGlobalStreams, cfg.model.seq_len, kDataSeed);
  std::vector<StepOutput> out;
  data::Batch batch;
  for (int s = 0; s < kSegments; ++s) {
    const SegmentLoss loss = forward_backward(model, source, batch);
    const float* g = model.params().grads();
    out.push_back({loss.sums.nats / double(loss.count), std::vector<float>(g, g + model.params().total_numel())});
  }
  return out;
}

// This rank's streams [rank*B, (rank+1)*B) with the DP step protocol.
std::vector<StepOutput> data_parallel(const launch::RunConfig& cfg, parallel::Communicator& dp,
                                      const core::DpSettings& settings) {
  const int B = kGlobalStreams / dp.size();
  auto backend = kernels::make_cpu_backend<float>();
  Model<float> model(cfg.model, B, *backend);
  model.params().initialize(uint64_t(cfg.train.seed));
  launch::SyntheticMarkovSource source(cfg.model.vocab, B, cfg.model.seq_len, kDataSeed, dp.rank() * B);
  core::DataParallel<float> dpx(dp, model, settings);
  std::vector<StepOutput> out;
  data::Batch batch;
  for (int s = 0; s < kSegments; ++s) {
    const SegmentLoss loss = forward_backward(model, source, batch, &dpx);
    const float* g = model.params().grads();
    out.push_back({dpx.global_nats(loss.sums.nats) / double(loss.count),
                   std::vector<float>(g, g + model.params().total_numel())});
  }
  return out;
}

class DpGradients : public ::testing::TestWithParam<std::string> {};

TEST_P(DpGradients, LossAndEveryGradientMatchOneProcess) {
  const launch::RunConfig cfg = small_run(GetParam(), kGlobalStreams, 1);
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 1);
  ASSERT_EQ(kGlobalStreams % groups.dp_cp().size(), 0);
  const auto ref = single_process(cfg);
  const auto got = data_parallel(cfg, groups.dp_cp(), {true, 0.001, false});  // ~256-float buckets

  auto backend = kernels::make_cpu_backend<float>();
  Model<float> layout(cfg.model, 1, *backend);  // for the parameter names and offsets
  for (int s = 0; s < kSegments; ++s) {
    EXPECT_NEAR(got[s].loss, ref[s].loss, 1e-5 * ref[s].loss) << "segment " << s;
    ASSERT_EQ(got[s].grads.size(), ref[s].grads.size());
    for (const auto& p : layout.params().params()) {
      const double rel = relative_error(got[s].grads.data() + p.offset, ref[s].grads.data() + p.offset, p.numel());
      EXPECT_LE(rel, 1e-5) << GetParam() << " segment " << s << " gradient of " << p.spec.name;
    }
  }
  // Every rank holds the same reduced gradient, bit for bit.
  std::vector<float> rank0 = got[1].grads;
  MPI_Bcast(rank0.data(), int(rank0.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_TRUE(bit_identical(rank0, got[1].grads));
}

TEST_P(DpGradients, BucketSizeAndOverlapDoNotChangeABit) {
  const launch::RunConfig cfg = small_run(GetParam(), kGlobalStreams, 1);
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 1);
  const auto small_overlapped = data_parallel(cfg, groups.dp_cp(), {true, 0.0005, false});
  const auto one_bucket_after = data_parallel(cfg, groups.dp_cp(), {false, 64.0, false});
  for (int s = 0; s < kSegments; ++s) {
    EXPECT_EQ(small_overlapped[s].loss, one_bucket_after[s].loss);
    EXPECT_TRUE(bit_identical(small_overlapped[s].grads, one_bucket_after[s].grads)) << "segment " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, DpGradients,
                         ::testing::Values("slide", "rec:fixed:skip", "rec:lstm:dual", "feedback:lstm:dual"),
                         variant_name);

}  // namespace
}  // namespace brt::testing
