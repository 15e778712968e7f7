// Single-process round trips: bit-exact tensors of every dtype, attributes and metadata, reads
// in a different slicing than was written, checksums against a naive reference, and the
// directory protocol (latest pointer, keep-last-K). docs/checkpoint-format.md.
#include <gtest/gtest.h>

#include <limits>

#include "tests/checkpoint/test_util.h"

namespace brt::checkpoint {
namespace {
using namespace brt::checkpoint::testing;

TEST(Checksum, SlicesInAnyDimensionSumToTheNaiveWholeTensorChecksum) {
  const Shape shape = {7, 3, 5};
  const auto whole = test_tensor_f32(1, shape_numel(shape));
  const ChunkGrid grid = chunk_grid_with(shape, 2);  // 4 chunks: rows {0,1},{2,3},{4,5},{6}
  for (int dim = 0; dim < 3; ++dim) {
    std::vector<uint64_t> sums(grid.n_chunks, 0);
    for (int64_t off = 0; off < shape[dim];) {  // uneven pieces: 1, 2, 1, 2, ...
      const int64_t count = std::min<int64_t>(1 + off % 2, shape[dim] - off);
      const Slice piece = Slice::along(shape, dim, off, count);
      const auto part = cut(whole, shape, piece);
      accumulate_checksums(shape, grid, piece, part.data(), 4, sums);
      off += count;
    }
    EXPECT_EQ(sum_of(sums), naive_checksum(whole)) << "split along dim " << dim;
    // Chunk c must equal the naive checksum of its own rows.
    std::vector<uint64_t> chunk0(grid.n_chunks, 0);
    const Slice rows01 = Slice::along(shape, 0, 0, 2);
    accumulate_checksums(shape, grid, rows01, cut(whole, shape, rows01).data(), 4, chunk0);
    EXPECT_EQ(sums[0], chunk0[0]);
  }
}

TEST(Checksum, OneDimensionalSliceCrossingChunksMatchesNaive) {
  const Shape shape = {10};
  const auto whole = test_tensor_f32(2, 10);
  const ChunkGrid grid = chunk_grid_with(shape, 3);
  std::vector<uint64_t> sums(grid.n_chunks, 0);
  const Slice a = Slice::along(shape, 0, 0, 5), b = Slice::along(shape, 0, 5, 5);
  accumulate_checksums(shape, grid, a, cut(whole, shape, a).data(), 4, sums);
  accumulate_checksums(shape, grid, b, cut(whole, shape, b).data(), 4, sums);
  EXPECT_EQ(sum_of(sums), naive_checksum(whole));
}

TEST(Checksum, AnySingleBitFlipOrSwapChangesIt) {
  const Shape shape = {4, 8};
  const auto whole = test_tensor_f32(3, 32);
  const uint64_t reference = naive_checksum(whole);
  for (size_t i = 0; i < whole.size(); i += 5) {
    for (int bit = 0; bit < 32; ++bit) {
      auto damaged = whole;
      uint32_t bits;
      std::memcpy(&bits, &damaged[i], 4);
      bits ^= 1u << bit;
      std::memcpy(&damaged[i], &bits, 4);
      EXPECT_NE(naive_checksum(damaged), reference) << "element " << i << " bit " << bit;
    }
  }
  auto swapped = whole;
  std::swap(swapped[0], swapped[1]);  // position-keyed: moving values is detected too
  EXPECT_NE(naive_checksum(swapped), reference);
}

// Writes a checkpoint with tensors of every dtype into dir at `step`; returns the whole values.
struct Written {
  Shape big_shape = {3000, 700};  // 2.1M elements: 3 checksum chunks of 1497 rows
  std::vector<float> big;
  std::vector<double> f64 = {0.0, -0.0, 1e300, std::numeric_limits<double>::denorm_min(), -3.5};
  std::vector<int64_t> i64 = {0, -1, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                              42, 7, -7, 123456789012345};
  std::vector<uint64_t> u64 = {0, ~uint64_t{0}, 0x0123456789abcdefULL};
  // Finite: a NaN or inf under /model is diverged state, which verify reports (test_damage.cpp).
  std::vector<float> small = {1.5f, -0.0f, std::numeric_limits<float>::max(), 1e-45f};
  Metadata meta;
};

Written write_sample(const fs::path& dir, int64_t step, WriterOptions options = {}) {
  Written w;
  w.big = test_tensor_f32(step, shape_numel(w.big_shape));
  w.small[0] = static_cast<float>(step);
  w.meta.step = step;
  w.meta.tokens_seen = step * 4096;
  w.meta.config_toml = "[model]\nd_model = 64\nname = \"tiny\"\n";
  w.meta.tokenizer_hash = "sha256:abc123";
  w.meta.layout = Layout{8, 4, 2};
  CheckpointWriter writer(dir, step, MPI_COMM_SELF, options);
  writer.set_metadata(w.meta);
  writer.set_attr_double("lr_schedule.last_lr", 3e-4);
  writer.set_attr_string("note", "unit test");
  writer.write_whole<float>("/model/layers.0.attn.wq", w.big_shape, w.big);
  writer.write_whole<float>("/model/final_norm.scale", {2, 2}, w.small);
  writer.write_whole<double>("/optim/lr_state", {5}, w.f64);
  writer.write_whole<int64_t>("/data/cursor", {4, 2}, w.i64);
  writer.write_whole<uint64_t>("/data/rng", {3}, w.u64);
  SaveResult result = writer.commit();
  EXPECT_EQ(result.path, dir / checkpoint_file_name(step));
  EXPECT_EQ(result.stats.bytes, int64_t(w.big.size() * 4 + 16 + 40 + 64 + 24));
  EXPECT_GT(result.stats.seconds, 0.0);
  return w;
}

TEST(RoundTrip, TensorsAttributesAndMetadataAreBitExact) {
  ScratchDir dir;
  const Written w = write_sample(dir.path(), 100);
  CheckpointReader reader(dir.path() / "ckpt-00000100.h5");
  EXPECT_EQ(reader.format_version(), kFormatVersion);
  EXPECT_TRUE(bit_equal(reader.read_whole<float>("/model/layers.0.attn.wq"), w.big));
  EXPECT_TRUE(bit_equal(reader.read_whole<float>("/model/final_norm.scale"), w.small));
  EXPECT_TRUE(bit_equal(reader.read_whole<double>("/optim/lr_state"), w.f64));
  EXPECT_TRUE(bit_equal(reader.read_whole<int64_t>("/data/cursor"), w.i64));
  EXPECT_TRUE(bit_equal(reader.read_whole<uint64_t>("/data/rng"), w.u64));
  const Metadata m = reader.metadata();
  EXPECT_EQ(m.step, 100);
  EXPECT_EQ(m.tokens_seen, 100 * 4096);
  EXPECT_EQ(m.config_toml, w.meta.config_toml);
  EXPECT_EQ(m.tokenizer_hash, w.meta.tokenizer_hash);
  EXPECT_EQ(m.layout.world_size, 8);
  EXPECT_EQ(m.layout.dp, 4);
  EXPECT_EQ(m.layout.tp, 2);
  EXPECT_EQ(reader.attr_double("lr_schedule.last_lr"), 3e-4);
  EXPECT_EQ(reader.attr_string("note"), "unit test");
  EXPECT_FALSE(reader.attr_string("absent").has_value());

  std::vector<std::string> paths;
  for (const auto& t : reader.tensors()) paths.push_back(t.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"/data/cursor", "/data/rng", "/model/final_norm.scale",
                                             "/model/layers.0.attn.wq", "/optim/lr_state"}));
  const TensorInfo& big = reader.info("/model/layers.0.attn.wq");
  EXPECT_EQ(big.shape, w.big_shape);
  EXPECT_EQ(big.n_chunks, 3);
  EXPECT_EQ(big.rows_per_chunk, kChecksumChunkElems / 700);
  EXPECT_EQ(reader.load_stats().bytes, int64_t(w.big.size() * 4 + 16 + 40 + 64 + 24));

  // The stored whole-tensor checksum equals the naive formula.
  const VerifyReport report = reader.verify_all();
  EXPECT_TRUE(report.ok);
  EXPECT_EQ(report.chunks, 3 + 4);
}

TEST(RoundTrip, StoredChecksumMatchesNaiveReference) {
  ScratchDir dir;
  const Written w = write_sample(dir.path(), 5);
  EXPECT_EQ(stored_checksum(dir.path() / "ckpt-00000005.h5", "/model/layers.0.attn.wq"), naive_checksum(w.big));
}

TEST(RoundTrip, ReadsAnySlicingOfWhatWasWritten) {
  ScratchDir dir;
  const Written w = write_sample(dir.path(), 7);
  CheckpointReader reader(dir.path() / checkpoint_file_name(7));
  const std::vector<Slice> slices = {
      Slice::along(w.big_shape, 1, 350, 350),         // a tensor-parallel column shard
      Slice::along(w.big_shape, 0, 1400, 200),        // rows straddling the chunk 0/1 boundary
      Slice{{2999, 699}, {1, 1}},                     // last element
      Slice{{10, 3}, {2000, 5}},                      // a box across two chunks
  };
  for (const Slice& slice : slices) {
    std::vector<float> got(slice.numel());
    reader.read<float>("/model/layers.0.attn.wq", slice, got);
    EXPECT_TRUE(bit_equal(got, cut(w.big, w.big_shape, slice))) << shape_string(slice.start);
    std::vector<float> unverified(slice.numel());
    reader.read<float>("/model/layers.0.attn.wq", slice, unverified, Verify::kNone);
    EXPECT_TRUE(bit_equal(unverified, got));
  }
}

TEST(RoundTrip, MisuseIsReportedWithNames) {
  ScratchDir dir;
  write_sample(dir.path(), 9);
  CheckpointReader reader(dir.path() / checkpoint_file_name(9));
  std::vector<double> wrong_type(8);
  EXPECT_THROW(reader.read<double>("/data/cursor", Slice::whole({4, 2}), wrong_type), MismatchError);
  EXPECT_THROW(reader.info("/model/nope"), MismatchError);
  try {
    reader.read_whole<float>("/model/nope");
    FAIL();
  } catch (const MismatchError& e) {
    EXPECT_NE(std::string(e.what()).find("/model/nope"), std::string::npos);
  }

  CheckpointWriter writer(dir.path(), 10);
  const std::vector<float> half(2);
  // One process holds the whole tensor, so a partial slice leaves elements without a writer.
  EXPECT_THROW(writer.write<float>("/model/x", {4}, Slice::along({4}, 0, 0, 2), half), SaveError);
  EXPECT_THROW(writer.commit(), SaveError);  // abandoned
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt-00000010.h5.tmp"));
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt-00000010.h5"));
}

TEST(RoundTrip, EmptyTensorsAndLargeAttributes) {
  ScratchDir dir;
  const std::string big_config(200 * 1024, 'x');  // beyond HDF5's 64 KiB compact-attribute limit
  {
    CheckpointWriter writer(dir.path(), 1);
    writer.set_attr_string("config_toml", big_config);
    writer.write_whole<float>("/state/empty", {0, 5}, std::span<const float>());
    writer.commit();
  }
  CheckpointReader reader(dir.path() / checkpoint_file_name(1));
  EXPECT_EQ(reader.metadata().config_toml, big_config);
  EXPECT_EQ(reader.info("/state/empty").shape, (Shape{0, 5}));
  EXPECT_TRUE(reader.read_whole<float>("/state/empty").empty());
  EXPECT_TRUE(reader.verify_all().ok);
}

TEST(Directory, LatestPointerMovesAndOnlyTheLastKAreKept) {
  ScratchDir dir;
  WriterOptions options;
  options.keep_last = 2;
  for (int64_t step : {100, 200, 300, 400}) {
    CheckpointWriter writer(dir.path(), step, MPI_COMM_SELF, options);
    const std::vector<int64_t> cursor = {step};
    writer.write_whole<int64_t>("/data/step", {1}, cursor);
    writer.commit();
    EXPECT_EQ(read_latest_pointer(dir.path()), dir.path() / checkpoint_file_name(step));
  }
  const auto entries = list_checkpoints(dir.path());
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].step, 400);
  EXPECT_EQ(entries[1].step, 300);
  EXPECT_EQ(read_text(dir.path() / "latest"), "ckpt-00000400.h5\n");
  EXPECT_FALSE(fs::exists(dir.path() / "latest.tmp"));
}

TEST(Directory, AbandonedWriterLeavesNothingBehind) {
  ScratchDir dir;
  write_sample(dir.path(), 100);
  {
    CheckpointWriter writer(dir.path(), 200);
    EXPECT_TRUE(fs::exists(writer.temporary_path()));
    const std::vector<float> v(4, 1.0f);
    writer.write_whole<float>("/model/a", {4}, v);
  }  // no commit
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt-00000200.h5.tmp"));
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt-00000200.h5"));
  EXPECT_EQ(read_latest_pointer(dir.path()), dir.path() / "ckpt-00000100.h5");
}

TEST(Directory, FileNamesRoundTrip) {
  EXPECT_EQ(checkpoint_file_name(100), "ckpt-00000100.h5");
  EXPECT_EQ(step_of_checkpoint_name("ckpt-00000100.h5"), 100);
  EXPECT_EQ(step_of_checkpoint_name("ckpt-123456789012.h5"), 123456789012);
  EXPECT_FALSE(step_of_checkpoint_name("ckpt-00000100.h5.tmp"));
  EXPECT_FALSE(step_of_checkpoint_name("ckpt-x.h5"));
  EXPECT_FALSE(step_of_checkpoint_name("latest"));
}

}  // namespace
}  // namespace brt::checkpoint
