// Every collective on the world, dp and tp groups, under mpirun -np 2 and -np 4, for each
// --tp that divides the world: (world, tp) = (2,1), (2,2), (4,1), (4,2), (4,4). References
// are computed locally from the known inputs of every member rank, in ascending group-rank
// order, and compared bit for bit — the MPI backend promises exactly that serial fold
// (parallel/mpi/mpi_communicator.h), which is what makes results identical between runs.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "parallel/comm_benchmark.h"
#include "parallel/health/comm_error.h"
#include "parallel/mpi/launch_env.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/process_groups.h"

namespace bp = brt::parallel;

namespace {

// Rank- and index-dependent values whose magnitudes span decades, so that a different
// summation order changes low bits (checked in SumOrderIsObservable).
template <typename T>
T input(int world_rank, int64_t i, int salt = 0) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<int64_t>(world_rank) * 1000003 + i * 7 - 500 + salt;
  } else {
    const double mag = std::pow(10.0, static_cast<double>((i * 7 + world_rank * 3 + salt) % 9) - 4.0);
    return static_cast<T>((1.0 + 0.37 * world_rank + 1e-3 * static_cast<double>(i)) * mag / 3.0);
  }
}

template <typename T>
std::vector<T> inputs(int world_rank, int64_t n, int salt = 0) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = input<T>(world_rank, i, salt);
  return v;
}

// The serial fold over `members` (world ranks in ascending group-rank order).
template <typename T>
std::vector<T> fold(const std::vector<int>& members, int64_t n, bp::ReduceOp op, int salt = 0) {
  std::vector<T> acc = inputs<T>(members[0], n, salt);
  for (size_t m = 1; m < members.size(); ++m) {
    const std::vector<T> x = inputs<T>(members[m], n, salt);
    for (size_t i = 0; i < acc.size(); ++i) {
      acc[i] = op == bp::ReduceOp::kSum ? acc[i] + x[i] : (x[i] > acc[i] ? x[i] : acc[i]);
    }
  }
  return acc;
}

template <typename T>
::testing::AssertionResult bit_equal(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "size differs";
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
      return ::testing::AssertionFailure() << "first difference at " << i << ": got " << got[i]
                                           << " want " << want[i] << " (" << got.size() << " elements)";
    }
  }
  return ::testing::AssertionSuccess();
}

class Collectives : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    int world = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    if (world % GetParam() != 0) GTEST_SKIP() << "--tp " << GetParam() << " does not divide " << world;
    bp::CommOptions options;
    options.timeout = std::chrono::seconds(30);  // a bug that deadlocks fails, not hangs
    groups_ = std::make_unique<bp::ProcessGroups>(
        bp::make_mpi_process_groups(MPI_COMM_WORLD, GetParam(), options));
  }

  // Each group with its members in group-rank order, from the layout arithmetic (not from
  // the communicator under test).
  struct Case {
    bp::Communicator* comm;
    std::vector<int> members;
  };
  std::vector<Case> cases() const {
    const auto& layout = groups_->layout();
    const int r = groups_->world_rank();
    std::vector<int> world(static_cast<size_t>(layout.world));
    for (int i = 0; i < layout.world; ++i) world[static_cast<size_t>(i)] = i;
    return {{&groups_->world(), world},
            {&groups_->dp_cp(), layout.dp_cp_group_members(r)},
            {&groups_->tp(), layout.tp_group_members(r)}};
  }

  int me() const { return groups_->world_rank(); }

  std::unique_ptr<bp::ProcessGroups> groups_;
};

template <typename T>
void check_all_reduce(bp::Communicator& c, const std::vector<int>& members, int me) {
  for (int64_t n : {0, 1, 3, 1000, 100003}) {
    for (auto op : {bp::ReduceOp::kSum, bp::ReduceOp::kMax}) {
      const auto want = fold<T>(members, n, op);
      std::vector<T> inout = inputs<T>(me, n);
      c.all_reduce(inout, op);
      EXPECT_TRUE(bit_equal(inout, want)) << c.name() << " in place, n=" << n;
      const std::vector<T> send = inputs<T>(me, n);
      std::vector<T> recv(static_cast<size_t>(n), T(-1));
      c.all_reduce_async(send.data(), recv.data(), n, bp::dtype_of<T>(), op).wait();
      EXPECT_TRUE(bit_equal(recv, want)) << c.name() << " out of place, n=" << n;
      EXPECT_TRUE(bit_equal(send, inputs<T>(me, n))) << "send buffer modified";
    }
  }
}

TEST_P(Collectives, GroupsMatchTheLayout) {
  for (const auto& k : cases()) {
    ASSERT_EQ(k.comm->size(), static_cast<int>(k.members.size()));
    EXPECT_EQ(k.comm->world_rank_of(k.comm->rank()), me());
    for (int g = 0; g < k.comm->size(); ++g) EXPECT_EQ(k.comm->world_rank_of(g), k.members[static_cast<size_t>(g)]);
  }
  EXPECT_EQ(groups_->tp().name(), groups_->layout().tp_group_name(me()));
  EXPECT_EQ(groups_->dp_cp().name(), groups_->layout().dp_cp_group_name(me()));
}

TEST_P(Collectives, AllReduceEqualsSerialFoldBitForBit) {
  for (const auto& k : cases()) {
    check_all_reduce<float>(*k.comm, k.members, me());
    check_all_reduce<double>(*k.comm, k.members, me());
    check_all_reduce<int64_t>(*k.comm, k.members, me());
  }
}

template <typename T>
void check_reduce_scatter(bp::Communicator& c, const std::vector<int>& members, int me) {
  const int p = c.size();
  for (int64_t m : {0, 1, 513}) {
    const auto full = fold<T>(members, m * p, bp::ReduceOp::kSum);
    const std::vector<T> want(full.begin() + c.rank() * m, full.begin() + (c.rank() + 1) * m);
    const std::vector<T> send = inputs<T>(me, m * p);
    std::vector<T> recv(static_cast<size_t>(m), T(-1));
    c.reduce_scatter(std::span<const T>(send), std::span<T>(recv));
    EXPECT_TRUE(bit_equal(recv, want)) << c.name() << " m=" << m;
  }
}

TEST_P(Collectives, ReduceScatterEqualsSerialFoldOfMyBlock) {
  for (const auto& k : cases()) {
    check_reduce_scatter<float>(*k.comm, k.members, me());
    check_reduce_scatter<double>(*k.comm, k.members, me());
    check_reduce_scatter<int64_t>(*k.comm, k.members, me());
  }
}

TEST_P(Collectives, AllGatherConcatenatesBlocksInGroupRankOrder) {
  for (const auto& k : cases()) {
    for (int64_t m : {0, 1, 300}) {
      std::vector<double> want;
      for (int member : k.members) {
        const auto b = inputs<double>(member, m);
        want.insert(want.end(), b.begin(), b.end());
      }
      const std::vector<double> send = inputs<double>(me(), m);
      std::vector<double> recv(want.size(), -1.0);
      k.comm->all_gather(std::span<const double>(send), std::span<double>(recv));
      EXPECT_TRUE(bit_equal(recv, want)) << k.comm->name() << " m=" << m;
      // In place: my block already sits at its place in the output.
      std::vector<double> inplace(want.size(), -1.0);
      std::copy(send.begin(), send.end(), inplace.begin() + k.comm->rank() * m);
      k.comm->all_gather_async(inplace.data() + k.comm->rank() * m, inplace.data(), m,
                               bp::DataType::kFloat64).wait();
      EXPECT_TRUE(bit_equal(inplace, want)) << k.comm->name() << " in place m=" << m;
    }
  }
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  for (const auto& k : cases()) {
    for (int root = 0; root < k.comm->size(); ++root) {
      for (int64_t n : {1, 1000}) {
        const int root_world = k.members[static_cast<size_t>(root)];
        std::vector<float> buf = k.comm->rank() == root ? inputs<float>(me(), n)
                                                        : std::vector<float>(static_cast<size_t>(n), -7.0f);
        k.comm->broadcast(std::span<float>(buf), root);
        EXPECT_TRUE(bit_equal(buf, inputs<float>(root_world, n))) << k.comm->name() << " root " << root;
      }
    }
  }
}

TEST_P(Collectives, BarrierAndSequenceNumbers) {
  for (const auto& k : cases()) {
    const uint64_t before = k.comm->sequence();
    k.comm->barrier();
    std::vector<int64_t> one{1};
    k.comm->all_reduce(one);
    EXPECT_EQ(one[0], k.comm->size());
    EXPECT_EQ(k.comm->sequence(), before + 2);
  }
}

// Gradient-bucket style: several collectives in flight on two groups at once, progressed by
// test() and completed out of order.
TEST_P(Collectives, ManyRequestsInFlightOnSeveralGroups) {
  const auto all = cases();
  const auto& dp = all[1];
  const auto& tp = all[2];
  const int64_t sizes[] = {5000, 17, 70001};
  std::vector<std::vector<float>> tp_bufs, dp_bufs;
  std::vector<bp::Request> requests;
  for (int b = 0; b < 3; ++b) {
    tp_bufs.push_back(inputs<float>(me(), sizes[b], b));
    dp_bufs.push_back(inputs<float>(me(), sizes[b], 10 + b));
  }
  for (int b = 0; b < 3; ++b) {
    requests.push_back(tp.comm->all_reduce_async(std::span<float>(tp_bufs[static_cast<size_t>(b)])));
    requests.push_back(dp.comm->all_reduce_async(std::span<float>(dp_bufs[static_cast<size_t>(b)])));
  }
  while (!requests[0].test()) {
  }
  EXPECT_TRUE(requests[0].done());
  for (size_t i = requests.size(); i-- > 0;) requests[i].wait();
  for (int b = 0; b < 3; ++b) {
    EXPECT_TRUE(bit_equal(tp_bufs[static_cast<size_t>(b)], fold<float>(tp.members, sizes[b], bp::ReduceOp::kSum, b)));
    EXPECT_TRUE(bit_equal(dp_bufs[static_cast<size_t>(b)], fold<float>(dp.members, sizes[b], bp::ReduceOp::kSum, 10 + b)));
  }
}

TEST_P(Collectives, RepeatedAllReduceIsBitIdentical) {
  auto first = inputs<float>(me(), 65537);
  auto second = first;
  groups_->world().all_reduce(first);
  groups_->world().all_reduce(second);
  EXPECT_TRUE(bit_equal(first, second));
}

// The bit-for-bit checks above only have teeth if another order gives other bits.
TEST_P(Collectives, SumOrderIsObservable) {
  std::vector<int> world;
  for (int r = 0; r < groups_->layout().world; ++r) world.push_back(r);
  if (world.size() < 3) GTEST_SKIP() << "with two ranks, a + b == b + a exactly";
  std::vector<int> reversed(world.rbegin(), world.rend());
  EXPECT_FALSE(bit_equal(fold<float>(world, 1000, bp::ReduceOp::kSum),
                         fold<float>(reversed, 1000, bp::ReduceOp::kSum)));
}

TEST_P(Collectives, BadArgumentsAreRefusedWithoutCommunicating) {
  bp::Communicator& w = groups_->world();
  const uint64_t before = w.sequence();
  std::vector<float> a(10), b(3);
  if (w.size() > 1) {
    EXPECT_THROW(w.reduce_scatter(std::span<const float>(a), std::span<float>(a)), std::invalid_argument);
  }
  EXPECT_THROW(w.broadcast(std::span<float>(b), w.size()), std::invalid_argument);
  int fake_stream = 0;
  EXPECT_THROW(w.all_reduce_async(std::span<float>(b), bp::ReduceOp::kSum, bp::Stream{&fake_stream}),
               std::invalid_argument);
  EXPECT_EQ(w.sequence(), before);
}

// A message MPI cannot count (over 2 GiB) is refused on every rank with a CommError naming
// the op and group, before any buffer is touched.
TEST_P(Collectives, OversizedMessageIsACommErrorWithContext) {
  bp::Communicator& w = groups_->world();
  float dummy = 0;
  try {
    w.broadcast_async(&dummy, int64_t{1} << 30, bp::DataType::kFloat32, 0).wait();
    ADD_FAILURE() << "expected CommError";
  } catch (const bp::CommError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("broadcast(root 0) #"), std::string::npos) << m;
    EXPECT_NE(m.find("4294967296 bytes) on group 'world'"), std::string::npos) << m;
    EXPECT_NE(m.find("2 GiB"), std::string::npos) << m;
  }
  w.barrier();  // the group still works afterwards
}

INSTANTIATE_TEST_SUITE_P(Tp, Collectives, ::testing::Values(1, 2, 4),
                         [](const auto& info) { return "tp" + std::to_string(info.param); });

TEST(LaunchInfo, SingleNodeUnderMpirun) {
  const auto info = bp::query_launch_info(MPI_COMM_WORLD, bp::process_env());
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(info.world_rank, rank);
  EXPECT_EQ(info.world_size, size);
  EXPECT_EQ(info.local_rank, rank);  // all ranks of the test share this machine
  EXPECT_EQ(info.local_size, size);
  EXPECT_FALSE(info.host.empty());
  EXPECT_EQ(info.launcher, "mpirun");
  const auto env = bp::read_launcher_env(bp::process_env());
  EXPECT_EQ(env.rank, rank);
  EXPECT_EQ(env.local_rank, info.local_rank);
}

// The timing helper behind the α-β fit: one positive sample per size, identical on every rank
// (the slowest rank's time is agreed through the group).
TEST(CommBenchmark, MeasuresEverySizeAndAgreesAcrossRanks) {
  bp::ProcessGroups groups = bp::make_mpi_process_groups(MPI_COMM_WORLD, 1);
  const std::vector<int64_t> sizes = bp::doubling_sizes(4, 4096);
  ASSERT_EQ(sizes.size(), 11u);
  bp::TimingOptions fast;
  fast.min_seconds = 0.001;
  const auto samples = bp::measure_all_reduce(groups.world(), sizes, fast);
  ASSERT_EQ(samples.size(), sizes.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(samples[i].bytes, static_cast<double>(sizes[i]));
    EXPECT_GT(samples[i].seconds, 0.0);
    double lo = samples[i].seconds, hi = samples[i].seconds;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    EXPECT_EQ(lo, hi);
  }
}

// On ranks other than 0, print only failures, prefixed by the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed()) {
      std::fprintf(stderr, "[world rank %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
    }
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  bp::MpiSession session(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (session.world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(session.world_rank()));
  }
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (session.world_rank() == 0 && any_failed && !failed) {
    std::fprintf(stderr, "some other rank had failures (printed above with its rank)\n");
  }
  return any_failed;
}
