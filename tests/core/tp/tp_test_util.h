// Shared pieces of the tensor-parallel tests (tests/core/tp): a small model whose heads, hidden
// units and vocabulary divide by 4, the (DP, TP) layouts, one rank's model and data under a
// layout, gathering a rank's shards back into full tensors, a checkpoint saved under TP resumed
// in one process, and comparisons. Reuses tests/core/dp's helpers.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/param_store.h"
#include "core/data_parallel.h"
#include "core/sharding/tensor_parallel.h"
#include "kernels/backend.h"
#include "launch/feed/batch_source.h"
#include "launch/train/trainer.h"
#include "parallel/process_groups.h"
#include "tests/core/dp/dp_test_util.h"

namespace brt::testing {

// L 2, D 32, H 4 x 8, F 64, V 64, N 32, W 8, S 8: every split quantity divides by 4 (BST:
// Ds = D/4 = 8 features, N_s 8 (4 modes), S_ctx 4, the BST layer is layer 0).
inline launch::RunConfig tp_run(const std::string& variant, int streams, int64_t steps,
                                std::vector<std::string> extra = {}) {
  extra.insert(extra.begin(), {"model.heads=4", "model.head_dim=8"});
  if (variant.rfind("bst", 0) == 0)
    extra.insert(extra.begin(), {"model.ssm_state=8", "model.ctx_states=4"});
  return small_run(variant, streams, steps, extra);
}

// The (DP, TP) layouts compared with one process: (1, world); with 4 ranks also (2, 2) with
// ZeRO-1 over the dp_cp groups.
struct TpLayout {
  int tp;
  bool zero;
};
inline std::vector<TpLayout> tp_layouts() {
  std::vector<TpLayout> layouts = {{world_size(), false}};
  if (world_size() == 4) layouts.push_back({2, true});
  return layouts;
}

// Streams per rank of the kGlobalStreams global streams: all of them in one process (groups ==
// nullptr), else split over the DP ranks.
inline int rank_streams(const parallel::ProcessGroups* groups) {
  return kGlobalStreams / (groups ? groups->dp_cp().size() : 1);
}

// One process holding all global streams (groups == nullptr), or this rank's part of a (DP, TP)
// layout: the model with this rank's shards initialised from cfg.train.seed, this rank's
// streams of the synthetic Markov data (seed `data_seed`), and with groups the DP step protocol.
template <typename T>
struct TpRankRun {
  const int B;
  const core::TensorParallel tp;
  std::unique_ptr<kernels::Backend<T>> backend = kernels::make_cpu_backend<T>();
  core::Model<T> model;
  launch::SyntheticMarkovSource source;
  std::unique_ptr<core::DataParallel<T>> dpx;

  TpRankRun(const launch::RunConfig& cfg, const parallel::ProcessGroups* groups, uint64_t data_seed,
            const core::DpSettings& settings = {})
      : B(rank_streams(groups)),
        tp(groups ? core::TensorParallel(groups->tp()) : core::TensorParallel()),
        model(cfg.model, B, *backend, tp),
        source(cfg.model.vocab, B, cfg.model.seq_len, data_seed, (groups ? groups->dp_cp_rank() : 0) * B) {
    model.params().initialize(uint64_t(cfg.train.seed));
    if (groups) dpx = std::make_unique<core::DataParallel<T>>(groups->dp_cp(), model, settings);
  }
};

// Every parameter (value or gradient) of `store`, gathered over tp into its full shape, in
// store order.
template <typename T>
std::vector<std::vector<T>> gather_all(const core::ParamStore<T>& store,
                                       const core::TensorParallel& tp, bool grads) {
  std::vector<std::vector<T>> out;
  std::vector<T> staging;
  for (const auto& p : store.params()) {
    std::vector<T> full(size_t(p.spec.global_numel()));
    core::gather_shards(tp, p.spec, grads ? p.grad : p.value, full.data(), staging);
    out.push_back(std::move(full));
  }
  return out;
}

// A checkpoint of `whole_run` saved in `dir` under `groups` after `saved_at` steps holds the
// full tensors: rank 0 resumes it in one process, and the remaining whole_run.train.steps -
// saved_at steps follow the uninterrupted TP run's losses (relative 1e-5). `label` prefixes
// the failure messages.
inline void expect_one_process_resume(const launch::RunConfig& whole_run, const parallel::ProcessGroups& groups,
                                      const std::string& dir, int64_t saved_at,
                                      const launch::TrainResult& uninterrupted, const std::string& label) {
  auto first = whole_run;
  first.train.steps = saved_at;
  first.checkpoint.dir = dir;
  train(first, &groups);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    auto rest = whole_run;
    rest.checkpoint.dir = dir;
    rest.checkpoint.resume = true;
    const auto resumed = train(rest, nullptr);
    const size_t n = size_t(whole_run.train.steps - saved_at), k = size_t(saved_at);
    ASSERT_EQ(resumed.losses.size(), n);
    for (size_t i = 0; i < n; ++i)
      EXPECT_NEAR(resumed.losses[i], uninterrupted.losses[k + i], 1e-5 * uninterrupted.losses[k + i])
          << label << "step " << k + i;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace brt::testing
