// Parallel writing and resharded reading under mpiexec (-np 1, 2, 4): every rank writes only its
// slices into one file with collective MPI-IO; the file read back on one process equals the
// whole tensors, its checksums equal the naive reference, and a different slicing read by all
// ranks in parallel matches too.
#include <gtest/gtest.h>
#include <mpi.h>

#include "tests/checkpoint/test_util.h"

namespace brt::checkpoint {
namespace {
using namespace brt::checkpoint::testing;

int world_rank() {
  int r;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int s;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// [offset, count) of part `k` of `n` over `extent`, uneven on purpose (the first parts are
// larger), so shard boundaries do not line up with checksum chunks.
std::pair<int64_t, int64_t> part(int64_t extent, int k, int n) {
  const int64_t base = extent / n, extra = extent % n;
  const int64_t offset = k * base + std::min<int64_t>(k, extra);
  return {offset, base + (k < extra ? 1 : 0)};
}

struct TensorCase {
  std::string path;
  Shape shape;
  int shard_dim;  // -1: replicated, written by rank 0 only; -2: only the last rank holds it
  uint64_t seed;
};

std::vector<TensorCase> cases() {
  return {
      {"/model/embed", {13, 6}, 0, 11},                 // row shards (vocab-parallel)
      {"/model/layers.0.attn.wq", {5, 10}, 1, 12},      // column shards (tensor-parallel)
      {"/model/final_norm.scale", {7}, -1, 13},         // replicated
      {"/optim/adamw.v/box", {4, 4, 6}, 2, 14},         // innermost-dim shards
      {"/state/stream0.rec", {2, 3}, -2, 15},           // held by one rank
      {"/model/big", {2100, 1000}, 1, 16},              // 2 checksum chunks, column shards
  };
}

std::optional<Slice> my_slice(const TensorCase& c, int rank, int size) {
  if (c.shard_dim == -1) return rank == 0 ? std::optional<Slice>(Slice::whole(c.shape)) : std::nullopt;
  if (c.shard_dim == -2) return rank == size - 1 ? std::optional<Slice>(Slice::whole(c.shape)) : std::nullopt;
  const auto [offset, count] = part(c.shape[c.shard_dim], rank, size);
  return Slice::along(c.shape, c.shard_dim, offset, count);
}

fs::path shared_scratch() {
  std::string path;
  if (world_rank() == 0) {
    char pattern[] = "/tmp/brt-ckpt-mpi-XXXXXX";
    path = ::mkdtemp(pattern);
  }
  int64_t n = static_cast<int64_t>(path.size());
  MPI_Bcast(&n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  path.resize(n);
  MPI_Bcast(path.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

void write_sharded(const fs::path& dir, int64_t step) {
  const int rank = world_rank(), size = world_size();
  CheckpointWriter writer(dir, step, MPI_COMM_WORLD);
  Metadata meta;
  meta.step = step;
  meta.layout = Layout{size, 1, size};
  meta.config_toml = "[model]\n";
  writer.set_metadata(meta);
  for (const TensorCase& c : cases()) {
    const auto whole = test_tensor_f32(c.seed, shape_numel(c.shape));
    const auto mine = my_slice(c, rank, size);
    const auto data = mine ? cut(whole, c.shape, *mine) : std::vector<float>();
    writer.write<float>(c.path, c.shape, mine, data);
  }
  std::vector<int64_t> cursor_row = {rank * 100, rank * 100 + 1, rank * 100 + 2};
  writer.write<int64_t>("/data/cursor", {size, 3}, Slice::along({size, 3}, 0, rank, 1), cursor_row);
  const SaveResult result = writer.commit();
  EXPECT_EQ(result.path, dir / checkpoint_file_name(step));
}

TEST(Parallel, SlicesWrittenByAllRanksReadBackWholeOnOneRank) {
  const fs::path dir = shared_scratch();
  write_sharded(dir, 100);
  const fs::path file = dir / checkpoint_file_name(100);
  if (world_rank() == 0) {
    CheckpointReader reader(file, MPI_COMM_SELF);
    EXPECT_EQ(reader.metadata().layout.world_size, world_size());
    for (const TensorCase& c : cases()) {
      const auto whole = test_tensor_f32(c.seed, shape_numel(c.shape));
      EXPECT_TRUE(bit_equal(reader.read_whole<float>(c.path), whole)) << c.path;
      EXPECT_EQ(reader.info(c.path).shape, c.shape);
    }
    std::vector<int64_t> cursor;
    for (int r = 0; r < world_size(); ++r) cursor.insert(cursor.end(), {r * 100, r * 100 + 1, r * 100 + 2});
    EXPECT_EQ(reader.read_whole<int64_t>("/data/cursor"), cursor);
    EXPECT_TRUE(reader.verify_all().ok);
    // The combined checksum equals the naive one over the whole tensor.
    EXPECT_EQ(stored_checksum(file, "/model/big"), naive_checksum(test_tensor_f32(16, 2100 * 1000)));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(dir);
}

TEST(Parallel, AllRanksReadADifferentSlicingThanWasWritten) {
  const fs::path dir = shared_scratch();
  write_sharded(dir, 200);
  const int rank = world_rank(), size = world_size();
  CheckpointReader reader(dir / checkpoint_file_name(200), MPI_COMM_WORLD);
  for (const TensorCase& c : cases()) {
    // Written along shard_dim (or whole); read along dim 0 split one rank fewer ways (or whole
    // when that leaves nothing to split), like a resume at a different tensor-parallel degree.
    const int ways = std::max(1, size - 1);
    const int k = rank % ways;
    const auto [offset, count] = part(c.shape[0], k, ways);
    const Slice slice = Slice::along(c.shape, 0, offset, count);
    std::vector<float> got(slice.numel());
    reader.read<float>(c.path, slice, got);
    EXPECT_TRUE(bit_equal(got, cut(test_tensor_f32(c.seed, shape_numel(c.shape)), c.shape, slice))) << c.path;
  }
  const VerifyReport report = reader.verify_all();
  EXPECT_TRUE(report.ok);
  EXPECT_GT(report.chunks, 0);
  const LatestGood good = find_latest_good(dir, MPI_COMM_WORLD);
  EXPECT_EQ(good.step, 200);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) fs::remove_all(dir);
}

TEST(Parallel, OneRanksMistakeFailsTheSaveOnEveryRankWithoutHanging) {
  const fs::path dir = shared_scratch();
  const int rank = world_rank(), size = world_size();
  bool threw = false;
  try {
    CheckpointWriter writer(dir, 300, MPI_COMM_WORLD);
    // Every rank claims the whole replicated tensor (missing ownership flag): overlapping
    // writers are caught by the element count (unless there is only one rank).
    const std::vector<float> v(4, 1.0f);
    writer.write_whole<float>("/model/dup", {4}, v, /*this_rank_writes=*/true);
    // The last rank passes a slice that does not fit.
    const std::vector<float> w(3, 1.0f);
    writer.write<float>("/model/bad", {2}, rank == size - 1 ? std::optional<Slice>(Slice{{0}, {3}}) : std::nullopt,
                        rank == size - 1 ? std::span<const float>(w) : std::span<const float>());
    writer.commit();
  } catch (const SaveError& e) {
    threw = true;
    // With one rank only the bad slice fails; with several the duplicate owners fail first.
    const std::string expected = size == 1 ? "does not fit" : "each element must have exactly one writer";
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ckpt-00000300.h5"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(threw);
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_FALSE(fs::exists(dir / "ckpt-00000300.h5.tmp"));
  EXPECT_FALSE(fs::exists(dir / "ckpt-00000300.h5"));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace brt::checkpoint

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {  // one rank prints; every rank's failures still set the exit code
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS();
  MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return failed;
}
