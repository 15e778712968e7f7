// The whole model under (DP, TP) layouts against one process on the same global batch of
// kGlobalStreams streams (fp32):
//  - loss and every gradient (gathered over TP) over two segments, for slide, xl, rec:fixed:skip,
//    rec:lstm:dual, bst:sh:s4d, bst:mf:unstructured at (DP, TP) = (2,1), (1,2) with 2 ranks
//    and (2,2), (1,4) with 4 (<= 1e-5);
//  - 20 training steps (rec:fixed:skip, rec:lstm:dual, bst:mh:s4d) through the trainer at
//    (DP, TP) = (1, world), and (2, 2) with ZeRO-1 on 4 ranks (AdamW, clipping active so the global norm over TP shards matters), track the
//    single-process loss curve (<= 1e-4);
//  - per-rank memory: sharded parameters and the carried state (caches and Σ) fall as 1/TP;
//  - a checkpoint saved under TP holds the full tensors: one process loads it and continues on
//    the same curve as the uninterrupted TP run (rec:lstm:dual; BST with the S4D carry and
//    with the unstructured carry, both sharded by SSM features).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/data_parallel.h"
#include "core/model.h"
#include "data/batch.h"
#include "kernels/backend.h"
#include "launch/feed/batch_source.h"
#include "launch/train/trainer.h"
#include "parallel/process_groups.h"
#include "tests/core/tp/tp_test_util.h"

namespace brt::testing {
namespace {

using core::Model;
using core::TensorParallel;

constexpr uint64_t kDataSeed = 99;
constexpr int kSegments = 2;

struct StepOutput {
  double loss = 0;
  std::vector<std::vector<float>> grads;  // full tensors, store order
};

// One process holding all global streams, or this rank's part of a (DP, TP) layout.
std::vector<StepOutput> run(const launch::RunConfig& cfg, const parallel::ProcessGroups* groups) {
  TpRankRun<float> r(cfg, groups, kDataSeed);
  std::vector<StepOutput> out;
  data::Batch batch;
  for (int s = 0; s < kSegments; ++s) {
    const SegmentLoss loss = forward_backward(r.model, r.source, batch, r.dpx.get());
    const double nats = r.dpx ? r.dpx->global_nats(loss.sums.nats) : loss.sums.nats;
    out.push_back({nats / double(loss.count), gather_all(r.model.params(), r.tp, true)});
  }
  return out;
}

// The (DP, TP) layouts of this world size.
std::vector<int> tp_sizes() { return world_size() == 2 ? std::vector<int>{1, 2} : std::vector<int>{2, 4}; }

class TpModel : public ::testing::TestWithParam<std::string> {};

TEST_P(TpModel, LossAndEveryGradientMatchOneProcess) {
  // xl: Transformer-XL, one window over the whole segment (W = N).
  const launch::RunConfig cfg =
      tp_run(GetParam(), kGlobalStreams, 1, GetParam() == "xl" ? std::vector<std::string>{"model.window=32"}
                                                                : std::vector<std::string>{});
  const auto ref = run(cfg, nullptr);
  auto backend = kernels::make_cpu_backend<float>();
  Model<float> names(cfg.model, 1, *backend);
  for (const int tp : tp_sizes()) {
    const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, tp);
    const auto got = run(cfg, &groups);
    double worst = 0, worst_loss = 0;
    for (int s = 0; s < kSegments; ++s) {
      EXPECT_NEAR(got[s].loss, ref[s].loss, 1e-5 * ref[s].loss) << "TP " << tp << " segment " << s;
      worst_loss = std::max(worst_loss, std::abs(got[s].loss - ref[s].loss) / ref[s].loss);
      ASSERT_EQ(got[s].grads.size(), ref[s].grads.size());
      for (size_t p = 0; p < ref[s].grads.size(); ++p) {
        const double rel = relative_error(got[s].grads[p].data(), ref[s].grads[p].data(),
                                          int64_t(ref[s].grads[p].size()));
        worst = std::max(worst, rel);
        EXPECT_LE(rel, 1e-5) << GetParam() << " (DP, TP) = (" << world_size() / tp << ", " << tp
                             << ") segment " << s << " gradient of " << names.params()[int(p)].spec.name;
      }
    }
    if (world_rank() == 0)
      std::printf("  %s (DP, TP) = (%d, %d): loss rel. diff %.2e, worst gradient rel. error %.2e\n",
                  GetParam().c_str(), world_size() / tp, tp, worst_loss, worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, TpModel,
                         ::testing::Values("slide", "xl", "rec:fixed:skip", "rec:lstm:dual",
                                           "feedback:fixed:skip", "feedback:lstm:dual",
                                           "bst:sh:s4d", "bst:mf:unstructured"),
                         variant_name);

// AdamW with a clip norm the gradients exceed, so the clip scale (from the global norm over
// every TP shard) shapes every update.
const std::vector<std::string> kTrainKeys = {"optim.kind=adamw", "optim.clip_norm=0.05"};

TEST(TpTraining, TwentyStepsTrackTheSingleProcessLossCurve) {
  // (DP, TP) = (1, world); with 4 ranks also (2, 2) with ZeRO-1 over the dp_cp groups.
  for (const std::string variant : {"rec:fixed:skip", "rec:lstm:dual", "bst:mh:s4d"}) {
    const auto ref = train(tp_run(variant, kGlobalStreams, 20, kTrainKeys), nullptr);
    for (const TpLayout& layout : tp_layouts()) {
      const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, layout.tp);
      const int dp = world_size() / layout.tp;
      auto keys = kTrainKeys;
      keys.push_back(layout.zero ? "train.zero=1" : "train.zero=0");
      const auto got = train(tp_run(variant, kGlobalStreams / dp, 20, keys), &groups);
      ASSERT_EQ(got.losses.size(), 20u);
      for (size_t i = 0; i < 20; ++i)
        EXPECT_NEAR(got.losses[i], ref.losses[i], 1e-4 * ref.losses[i])
            << variant << " (DP, TP) = (" << dp << ", " << layout.tp << ") zero " << layout.zero
            << " step " << i;
      EXPECT_LT(got.losses.back(), got.losses.front());
    }
  }
}

TEST(TpMemory, ShardedParametersAndCarriedStateFallAsOneOverTp) {
  const launch::RunConfig cfg = tp_run("rec:lstm:dual", 2, 1);
  const int tp_size = world_size();
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, tp_size);
  auto backend = kernels::make_cpu_backend<float>();
  Model<float> whole(cfg.model, 2, *backend);
  Model<float> sharded(cfg.model, 2, *backend, TensorParallel(groups.tp()));
  const auto wm = whole.memory_report(), sm = sharded.memory_report();
  // Sharded parameters: exactly 1/TP each; the replicated ones (norm gains, gate biases, state
  // IDs and initial state) are whole on every rank.
  int64_t sharded_whole = 0, sharded_local = 0, replicated = 0;
  for (const auto& p : sharded.params().params()) {
    if (p.spec.shard.sharded()) {
      sharded_whole += p.spec.global_numel();
      sharded_local += p.numel();
    } else {
      replicated += p.numel();
    }
  }
  EXPECT_EQ(sharded_local * tp_size, sharded_whole);
  EXPECT_EQ(sm.parameters, (sharded_local + replicated) * 4);
  EXPECT_EQ(wm.parameters, (sharded_whole + replicated) * 4);
  // Carried state: the caches (by heads) and the recurrent state Σ (by state rows, sequence
  // parallelism) are 1/TP each, so the whole per-rank carried state is 1/TP.
  auto wr = whole.carried_state(), sr = sharded.carried_state();
  ASSERT_EQ(wr.size(), sr.size());
  bool saw_sigma = false;
  for (size_t i = 0; i < wr.size(); ++i) {
    int64_t wn = 1, sn = 1;
    for (auto d : wr[i].shape) wn *= d;
    for (auto d : sr[i].shape) sn *= d;
    EXPECT_EQ(sn * tp_size, wn) << wr[i].name;
    saw_sigma |= wr[i].name.find("state.sigma") != std::string::npos;
  }
  EXPECT_TRUE(saw_sigma);
  EXPECT_EQ(sm.carried_state * tp_size, wm.carried_state);
}

class TpCheckpoint : public ::testing::TestWithParam<std::string> {};

TEST_P(TpCheckpoint, SavedUnderTpResumesInOneProcessOnTheSameCurve) {
  const std::string dir = shared_temp_dir("ckpt");
  const int tp = world_size();
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, tp);
  auto whole_run = tp_run(GetParam(), kGlobalStreams, 12, kTrainKeys);
  const auto uninterrupted = train(whole_run, &groups);
  // The checkpoint holds full tensors: TP = 1 continues it.
  expect_one_process_resume(whole_run, groups, dir + "/tp", 6, uninterrupted, GetParam() + " ");
}

INSTANTIATE_TEST_SUITE_P(Variants, TpCheckpoint,
                         ::testing::Values("rec:lstm:dual", "bst:sh:s4d", "bst:mf:unstructured"),
                         variant_name);

}  // namespace
}  // namespace brt::testing
