// The planner's tensor-parallel communication (launch/plan/planner.h, tp_collectives_per_step)
// against the collectives a TP = 2 model actually issues, under mpirun -np 2: the tp group is
// wrapped in a recorder (parallel/counting_communicator.h), one training step's forward and backward runs, and the recorded
// (kind, bytes) multiset must equal the planner's list exactly, for slide, rec:fixed:skip and
// rec:fixed:dual, rec:lstm:skip and rec:lstm:dual. The α-β time the planner gives the list is then checked against its parts.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/model.h"
#include "core/sharding/tensor_parallel.h"
#include "data/batch.h"
#include "kernels/backend.h"
#include "launch/config/config.h"
#include "launch/plan/planner.h"
#include "launch/feed/batch_source.h"
#include "parallel/counting_communicator.h"
#include "parallel/process_groups.h"

namespace brt::launch {
namespace {

using Key = parallel::CountingCommunicator::Key;  // kind, bytes

class PlanTpComm : public ::testing::TestWithParam<std::string> {};

TEST_P(PlanTpComm, PredictedCollectivesAreTheOnesTheModelIssues) {
  const RunConfig rc = load_run_config(
      "configs/tiny.toml", {"model.variant=" + GetParam(), "model.layers=3", "model.recurrent_layers=[1]",
                            "model.d_model=32", "model.heads=2", "model.head_dim=16", "model.d_ff=64",
                            "model.vocab=64", "model.seq_len=32", "model.window=8", "model.state_size=8",
                            "train.batch=2"});
  core::ModelConfig cfg = rc.model;
  cfg.resolve();
  const int B = rc.train.batch;
  const parallel::ProcessGroups groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 2);
  parallel::CountingCommunicator recorder(groups.tp());
  auto backend = kernels::make_cpu_backend<float>();
  core::Model<float> model(cfg, B, *backend, core::TensorParallel(recorder));
  model.params().initialize(1);
  SyntheticMarkovSource source(cfg.vocab, B, cfg.seq_len, 3);
  data::Batch batch;
  source.next(batch);
  recorder.reset();
  model.params().zero_grads();
  model.forward({batch.inputs.data(), batch.targets.data(), batch.mask.data(), batch.doc_start.data()},
                1.0f / float(B * cfg.seq_len));
  model.backward();

  std::map<Key, int64_t> predicted;
  for (const TpCollective& c : tp_collectives_per_step(cfg, B, 2))
    predicted[{c.kind, c.bytes}] += c.count;
  int64_t issued = 0;
  std::map<Key, int64_t> calls = recorder.calls();
  for (const auto& [key, n] : calls) {
    issued += n;
    EXPECT_EQ(predicted[key], n) << GetParam() << ": kind " << std::get<0>(key) << ", " << std::get<1>(key)
                                 << " bytes";
  }
  for (const auto& [key, n] : predicted)
    EXPECT_EQ(calls[key], n) << GetParam() << ": predicted kind " << std::get<0>(key) << ", "
                                      << std::get<1>(key) << " bytes";
  // The α-β time is the sum of its collectives' ring times.
  const double alpha = 5e-6, bw = 10e9;
  double by_hand = 0;
  for (const TpCollective& c : tp_collectives_per_step(cfg, B, 2))
    by_hand += c.count * (c.kind == 'r' ? ring_all_reduce_seconds(double(c.bytes), 2, bw, alpha, 1)
                                        : alpha + 0.5 * double(c.bytes) / bw);
  EXPECT_NEAR(tp_step_seconds(cfg, B, 2, bw, alpha), by_hand, 1e-12);
  if (groups.world_rank() == 0)
    std::printf("%s: %lld TP collectives per step issued\n", GetParam().c_str(),
                static_cast<long long>(issued));
}

INSTANTIATE_TEST_SUITE_P(Variants, PlanTpComm,
                         ::testing::Values("slide", "rec:fixed:skip", "rec:fixed:dual", "rec:lstm:skip",
                                           "rec:lstm:dual"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == ':') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace brt::launch
