// Context parallelism's traffic: the planner's exchanges (launch/plan/planner.h,
// cp_exchanges_per_step) against what a CP model issues in one training step, under mpirun
// with 2 and 4 ranks (CP = world): the cp group is wrapped in a counter
// (parallel/counting_communicator.h) and the recorded (kind, bytes) multiset and the bytes this
// rank sent must equal the prediction exactly, for slide and every bst:*:s4d variant; the S4D
// summaries' size does not depend on N. Also the communicator's cyclic shift itself, both ways.
#include <gtest/gtest.h>
#include <mpi.h>

#include <map>
#include <string>
#include <vector>

#include "core/sharding/context_parallel.h"
#include "core/model.h"
#include "kernels/backend.h"
#include "launch/plan/planner.h"
#include "parallel/counting_communicator.h"
#include "tests/core/cp/cp_test_util.h"

namespace brt::testing {
namespace {

using Key = parallel::CountingCommunicator::Key;

TEST(CpShift, EveryRankReceivesItsNeighboursBlockBothWays) {
  parallel::MpiCommunicator world(MPI_COMM_WORLD, "world");
  const int r = world.rank(), p = world.size();
  for (const int offset : {1, -1}) {
    const std::vector<double> send = {double(r), 10.0 * r + 1};
    std::vector<double> recv(2, -1);
    world.shift(std::span<const double>(send), std::span<double>(recv), offset);
    const int from = ((r - offset) % p + p) % p;
    EXPECT_EQ(recv[0], double(from)) << "offset " << offset;
    EXPECT_EQ(recv[1], 10.0 * from + 1) << "offset " << offset;
  }
  std::vector<double> a(3), b(2);
  EXPECT_THROW(world.shift(std::span<const double>(a), std::span<double>(b), 1), std::invalid_argument);
  EXPECT_THROW(world.shift(std::span<const double>(b), std::span<double>(b), p), std::invalid_argument);
}

class CpComm : public ::testing::TestWithParam<std::string> {};

TEST_P(CpComm, PredictedExchangesAreTheOnesTheModelIssues) {
  const core::ModelConfig cfg = cp_model_config(GetParam(), true);
  const int B = 2, cp = world_size();
  parallel::MpiCommunicator world(MPI_COMM_WORLD, "cp");
  parallel::CountingCommunicator counter(world);
  auto backend = kernels::make_cpu_backend<float>();
  core::Model<float> model(cfg, B, *backend, {}, core::ContextParallel(counter));
  model.params().initialize(3);
  const SegmentData data = segment_data(cfg, B, 1);
  const int L = model.chunk_len();
  std::vector<int32_t> in(size_t(B) * L), tg(size_t(B) * L);
  std::vector<uint8_t> mask(size_t(B) * L, 1);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < L; ++t) {
      in[size_t(b) * L + t] = data.inputs[size_t(b) * cfg.seq_len + size_t(world.rank()) * L + t];
      tg[size_t(b) * L + t] = data.targets[size_t(b) * cfg.seq_len + size_t(world.rank()) * L + t];
    }
  counter.reset();
  model.params().zero_grads();
  model.forward({in.data(), tg.data(), mask.data(), data.doc_start.data()}, 1e-3f);
  model.backward();

  std::map<Key, int64_t> predicted;
  for (const launch::CpExchange& x : launch::cp_exchanges_per_step(cfg, B, 1, cp))
    predicted[{x.kind, x.kind == 'g' ? x.piece_bytes * cp : x.piece_bytes}] += x.count;
  std::map<Key, int64_t> issued = counter.calls();
  for (const auto& [key, n] : issued)
    EXPECT_EQ(predicted[key], n) << GetParam() << ": kind " << std::get<0>(key) << ", " << std::get<1>(key) << " bytes";
  for (const auto& [key, n] : predicted)
    EXPECT_EQ(issued[key], n) << GetParam() << ": predicted kind " << std::get<0>(key) << ", " << std::get<1>(key)
                              << " bytes";
  EXPECT_EQ(counter.sent_bytes(), launch::cp_bytes_sent_per_step(cfg, B, 1, cp)) << GetParam();
  // The S4D summaries are state-sized: doubling N leaves their bytes as they are.
  core::ModelConfig longer = cfg;
  longer.seq_len *= 2;
  for (const auto& [a, b] : {std::pair{launch::cp_exchanges_per_step(cfg, B, 1, cp),
                                       launch::cp_exchanges_per_step(longer, B, 1, cp)}})
    for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].piece_bytes, b[i].piece_bytes) << a[i].where;
  if (world.rank() == 0)
    std::printf("  %s at CP %d: %lld bytes sent per step per rank, as predicted\n", GetParam().c_str(), cp,
                static_cast<long long>(counter.sent_bytes()));
}

INSTANTIATE_TEST_SUITE_P(Variants, CpComm, ::testing::Values("slide", "xl", "bst:sh:s4d", "bst:mh:s4d", "bst:mf:s4d"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == ':') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace brt::testing
