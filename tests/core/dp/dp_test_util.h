// Shared pieces of the data-parallel tests (tests/core/dp): the small model every test uses, the
// process groups over MPI_COMM_WORLD, one segment of the DP step protocol, the trainer run, and
// comparisons.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/data_parallel.h"
#include "data/batch.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"
#include "launch/train/trainer.h"
#include "parallel/process_groups.h"
#include "tests/common/variant_name.h"

namespace brt::testing {

// Global streams of every test: DP=2 gives 2 per rank, DP=4 one.
inline constexpr int kGlobalStreams = 4;

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// L 2, D 32, H 2, dh 16, F 64, V 64, N 32, W 8, S 8: a step takes milliseconds.
inline launch::RunConfig small_run(const std::string& variant, int streams, int64_t steps,
                                   const std::vector<std::string>& extra = {}) {
  std::string toml =
      "[model]\nvariant = \"" + variant + "\"\nlayers = 2\nd_model = 32\nheads = 2\nhead_dim = 16\n"
      "d_ff = 64\nvocab = 64\nseq_len = 32\nwindow = 8\nstate_size = 8\n" +
      std::string(variant == "slide" ? "" : "recurrent_layers = [1]\n") +
      "[optim]\nkind = \"adamw\"\nlr = 0.01\nwarmup = 3\n"
      "[train]\nseed = 7\npeak_gflops = 1\neval_every = 0\n"
      "[log]\nevery = 1000\nmetrics_path = \"\"\n";
  std::vector<std::string> overrides = {"train.batch=" + std::to_string(streams),
                                        "train.steps=" + std::to_string(steps)};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return launch::parse_run_config(toml, "tests/core/dp small config", overrides);
}

// One segment of the step protocol on the next batch of `source`: the loss scaled by
// 1 / (scored targets in the global batch), forward and backward, and with `dpx` the gradient
// reduced during backward. Returns this rank's loss sums and the global target count.
struct SegmentLoss {
  core::LossSums sums;
  int64_t count = 0;
};
template <typename T>
SegmentLoss forward_backward(core::Model<T>& model, launch::SyntheticMarkovSource& source, data::Batch& batch,
                             core::DataParallel<T>* dpx = nullptr) {
  source.next(batch);
  int64_t count = 0;
  for (uint8_t m : batch.mask) count += m;
  if (dpx) count = dpx->global_count(count);
  model.params().zero_grads();
  const core::LossSums sums =
      model.forward({batch.inputs.data(), batch.targets.data(), batch.mask.data(), batch.doc_start.data()},
                    T(1) / T(count));
  if (dpx) dpx->begin_backward();
  model.backward();
  if (dpx) dpx->end_backward();
  return {sums, count};
}

// A quiet trainer run of `cfg`: one process (groups == nullptr) or this rank's part of `groups`.
inline launch::TrainResult train(const launch::RunConfig& cfg, const parallel::ProcessGroups* groups = nullptr) {
  launch::TrainOptions o;
  o.config = cfg;
  o.quiet = true;
  o.groups = groups;
  return launch::run_training(o);
}

// ||got - want|| / ||want|| over a tensor (0 when both are zero).
template <typename T>
double relative_error(const T* got, const T* want, int64_t n) {
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(got[i]) - double(want[i]);
    diff += d * d;
    ref += double(want[i]) * double(want[i]);
  }
  if (ref == 0) return std::sqrt(diff);
  return std::sqrt(diff / ref);
}

template <typename T>
bool bit_identical(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// A scratch directory shared by all ranks (made by rank 0, name broadcast).
std::string shared_temp_dir(const std::string& tag);

}  // namespace brt::testing
