// Damaged and unsuitable checkpoints: truncation, flipped bytes inside a dataset's data, a
// newer format version, a file that is not a checkpoint, a different model config or tokenizer;
// find_latest_good skipping all of them; inspect/verify output.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "tests/checkpoint/test_util.h"

namespace brt::checkpoint {
namespace {
using namespace brt::checkpoint::testing;

bool mentions(const std::vector<std::string>& lines, const std::string& a, const std::string& b = "") {
  for (const auto& line : lines) {
    if (line.find(a) != std::string::npos && line.find(b) != std::string::npos) return true;
  }
  return false;
}

TEST(Damage, TruncatedFileIsDetectedWithTheFileName) {
  ScratchDir dir;
  write_simple(dir.path(), 100);
  const fs::path file = dir.path() / checkpoint_file_name(100);
  fs::resize_file(file, fs::file_size(file) * 6 / 10);
  EXPECT_THROW(CheckpointReader{file}, CorruptCheckpointError);
  const VerifyReport report = verify(file);
  EXPECT_FALSE(report.ok);
  EXPECT_TRUE(mentions(report.problems, file.string(), "truncated")) << report.problems.at(0);
}

TEST(Damage, NonFiniteTrainingStateIsReportedAsDamageThoughItsChecksumsMatch) {
  // Diverged weights saved with valid checksums: verify reports every float tensor
  // under /model, /optim and /state holding NaN or inf, with the count; elsewhere they are data.
  ScratchDir dir;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> weights = {1.0f, inf, -inf, 2.0f}, moments = {nan, 0.5f}, other = {inf};
  {
    CheckpointWriter writer(dir.path(), 3);
    Metadata meta;
    meta.step = 3;
    writer.set_metadata(meta);
    writer.write_whole<float>("/model/w", {4}, weights);
    writer.write_whole<float>("/optim/w.m", {2}, moments);
    writer.write_whole<double>("/state/s", {2}, std::vector<double>{0.0, -1.0});
    writer.write_whole<float>("/extra/x", {1}, other);
    writer.commit();
  }
  const fs::path file = dir.path() / checkpoint_file_name(3);
  const VerifyReport report = verify(file);
  EXPECT_FALSE(report.ok);
  ASSERT_EQ(report.problems.size(), 2u);
  EXPECT_TRUE(mentions(report.problems, "dataset /model/w: 2 non-finite values (NaN or inf)", "diverged"));
  EXPECT_TRUE(mentions(report.problems, "dataset /optim/w.m: 1 non-finite values"));
  // Reading is not refused: the values come back bit for bit (inspect, debugging).
  CheckpointReader reader(file);
  EXPECT_TRUE(bit_equal(reader.read_whole<float>("/model/w"), weights));
  // Resume's search skips it like any damaged file.
  EXPECT_FALSE(find_latest_good(dir.path()).path.has_value());
}

TEST(Damage, FlippedByteInsideDatasetDataNamesDatasetAndChunk) {
  ScratchDir dir;
  const auto big = write_simple(dir.path(), 100);
  const fs::path file = dir.path() / checkpoint_file_name(100);
  const int64_t offset = dataset_data_offset(file, "/model/big");
  ASSERT_GT(offset, 0);
  // Element at row 1050 (chunk 1), column 3.
  flip_byte(file, offset + (1050 * 1000 + 3) * 4 + 1);

  const VerifyReport report = verify(file);
  EXPECT_FALSE(report.ok);
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_TRUE(mentions(report.problems, "/model/big", "chunk 1")) << report.problems[0];
  EXPECT_TRUE(mentions(report.problems, file.string()));

  CheckpointReader reader(file);
  try {
    reader.read_whole<float>("/model/big");
    FAIL() << "damage not detected";
  } catch (const CorruptCheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("/model/big"), std::string::npos) << e.what();
  }
  // A slice touching only the intact chunk 0 still loads; one touching chunk 1 does not.
  const Slice rows = Slice::along({1100, 1000}, 0, 0, 1000);
  std::vector<float> got(rows.numel());
  reader.read<float>("/model/big", rows, got);
  EXPECT_TRUE(bit_equal(got, cut(big, {1100, 1000}, rows)));
  const Slice column = Slice::along({1100, 1000}, 1, 500, 10);
  std::vector<float> col(column.numel());
  EXPECT_THROW(reader.read<float>("/model/big", column, col), CorruptCheckpointError);
}

TEST(Damage, FindLatestGoodSkipsDamagedAndHalfWrittenCheckpoints) {
  ScratchDir dir;
  WriterOptions keep_all;
  keep_all.keep_last = 0;
  for (int64_t step : {100, 200, 300, 400}) write_simple(dir.path(), step, keep_all);
  const fs::path f300 = dir.path() / checkpoint_file_name(300);
  const fs::path f400 = dir.path() / checkpoint_file_name(400);
  flip_byte(f300, dataset_data_offset(f300, "/model/small") + 2);
  fs::resize_file(f400, fs::file_size(f400) / 2);
  fs::copy_file(dir.path() / checkpoint_file_name(200), dir.path() / "ckpt-00000500.h5.tmp");

  const LatestGood good = find_latest_good(dir.path());
  ASSERT_TRUE(good.path.has_value());
  EXPECT_EQ(*good.path, dir.path() / checkpoint_file_name(200));
  EXPECT_EQ(good.step, 200);
  EXPECT_TRUE(mentions(good.warnings, "ckpt-00000500.h5.tmp"));
  EXPECT_TRUE(mentions(good.warnings, "ckpt-00000400.h5"));
  EXPECT_TRUE(mentions(good.warnings, "ckpt-00000300.h5", "/model/small"));

  ScratchDir empty;
  EXPECT_FALSE(find_latest_good(empty.path()).path.has_value());
}

// Rewrites an int64 root attribute in place; with `update_table` also its entry in the
// attribute checksum table, as a writer of that value would have written it.
void rewrite_int_attr(const fs::path& file, const std::string& name, int64_t value, bool update_table) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  hid_t a = H5Aopen(f, name.c_str(), H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_INT64, &value);
  H5Aclose(a);
  if (update_table) {
    hid_t t = H5Aopen(f, kAttributeChecksumsAttr, H5P_DEFAULT);
    hid_t type = H5Aget_type(t);
    char* text = nullptr;
    H5Aread(t, type, &text);
    std::string table = text;
    H5free_memory(text);
    const size_t at = table.find(name + "\t") + name.size() + 1;
    const auto* bytes = reinterpret_cast<const unsigned char*>(&value);
    table.replace(at, 16, hex64(attribute_hash(name, 'i', {bytes, sizeof value})));
    const char* out = table.c_str();
    H5Awrite(t, type, &out);
    H5Tclose(type);
    H5Aclose(t);
  }
  H5Fclose(f);
}

TEST(Refusal, NewerFormatVersionIsRefused) {
  ScratchDir dir;
  write_simple(dir.path(), 1);
  const fs::path file = dir.path() / checkpoint_file_name(1);
  const int64_t newer = kFormatVersion + 1;
  rewrite_int_attr(file, "format_version", newer, /*update_table=*/true);
  try {
    CheckpointReader reader(file);
    FAIL() << "newer version accepted";
  } catch (const FormatVersionError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("format version " + std::to_string(newer)), std::string::npos) << message;
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
  }
}

TEST(Damage, ChangedRootAttributesAreDamageNamingTheAttribute) {
  // One changed value in the attributes that decide the run: the step, the
  // format version (not "a newer brt-dist") and a byte of the stored config text.
  ScratchDir dir;
  write_simple(dir.path(), 1);
  const fs::path file = dir.path() / checkpoint_file_name(1);
  for (const std::string name : {"step", "format_version"}) {
    const fs::path copy = dir.path() / ("changed-" + name + ".h5");
    fs::copy_file(file, copy);
    rewrite_int_attr(copy, name, 7, /*update_table=*/false);
    try {
      CheckpointReader reader(copy);
      FAIL() << name << " changed without notice";
    } catch (const CorruptCheckpointError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("root attribute '" + name + "' does not match its checksum"), std::string::npos)
          << message;
      EXPECT_NE(message.find(copy.string()), std::string::npos) << message;
    }
    const VerifyReport report = verify(copy);
    EXPECT_FALSE(report.ok) << name;
  }
  // The config text: one digit of "d_model = 1000" in the raw bytes ("1000" -> "0000").
  const fs::path copy = dir.path() / "changed-config.h5";
  fs::copy_file(file, copy);
  std::string bytes;
  {
    std::ifstream in(copy, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const size_t at = bytes.find("d_model = 1000");
  ASSERT_NE(at, std::string::npos);
  flip_byte(copy, int64_t(at + 10), 0x01);
  try {
    CheckpointReader reader(copy);
    FAIL() << "changed config text accepted";
  } catch (const CorruptCheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("root attribute 'config_toml' does not match its checksum"),
              std::string::npos) << e.what();
  }
}

TEST(Damage, DamagedRootObjectHeaderIsReportedAsDamage) {
  // A flipped byte in the root group's object header: reported as damage
  // naming the file and what could not be read, not as "not a brt-dist checkpoint".
  ScratchDir dir;
  write_simple(dir.path(), 1);
  const fs::path file = dir.path() / checkpoint_file_name(1);
  std::ifstream in(file, std::ios::binary);
  unsigned char super[48];
  in.read(reinterpret_cast<char*>(super), sizeof super);
  uint64_t root = 0;
  std::memcpy(&root, super + 36, 8);  // superblock v2: root group object header address
  in.close();
  flip_byte(file, int64_t(root + 12), 0x5A);
  try {
    CheckpointReader reader(file);
    FAIL() << "damaged root header accepted";
  } catch (const CorruptCheckpointError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(file.string() + " is damaged"), std::string::npos) << message;
    EXPECT_NE(message.find("root group cannot be read"), std::string::npos) << message;
  }
}

TEST(Damage, RenamedOrMissingDatasetIsDamageNotAnotherModel) {
  ScratchDir dir;
  write_simple(dir.path(), 1);
  const fs::path file = dir.path() / checkpoint_file_name(1);
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(H5Lmove(f, "/model/small", f, "/model/smalk", H5P_DEFAULT, H5P_DEFAULT), 0);
  H5Fclose(f);
  try {
    CheckpointReader reader(file);
    FAIL() << "renamed dataset accepted";
  } catch (const CorruptCheckpointError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("dataset /model/smalk is not in the tensor manifest"), std::string::npos) << message;
    EXPECT_NE(message.find("dataset /model/small of the tensor manifest is missing"), std::string::npos) << message;
  }
}

TEST(Refusal, FilesThatAreNotCheckpointsAreRefused) {
  ScratchDir dir;
  const fs::path plain = dir.path() / "plain.h5";
  hid_t f = H5Fcreate(plain.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(f);
  EXPECT_THROW(CheckpointReader{plain}, FormatVersionError);
  const fs::path text = dir.path() / "notes.txt";
  std::ofstream(text) << "hello";
  EXPECT_THROW(CheckpointReader{text}, CorruptCheckpointError);
  EXPECT_THROW(CheckpointReader{dir.path() / "missing.h5"}, CorruptCheckpointError);
}

TEST(Refusal, DifferentModelConfigOrTokenizerIsRefusedNamingTheMismatch) {
  ScratchDir dir;
  write_simple(dir.path(), 1);
  CheckpointReader reader(dir.path() / checkpoint_file_name(1));
  const std::vector<ExpectedTensor> matching = {{"/model/big", {1100, 1000}}, {"/model/small", {8}},
                                                {"/data/cursor", {2}, DType::kI64}};
  EXPECT_FALSE(find_tensor_mismatch(reader, matching).has_value());
  EXPECT_NO_THROW(require_tensors(reader, matching));

  const std::vector<ExpectedTensor> wider = {{"/model/small", {8}}, {"/model/big", {1100, 2048}}};
  const auto mismatch = find_tensor_mismatch(reader, wider);
  ASSERT_TRUE(mismatch.has_value());
  EXPECT_NE(mismatch->find("/model/big has shape [1100, 1000]"), std::string::npos) << *mismatch;
  EXPECT_NE(mismatch->find("[1100, 2048]"), std::string::npos) << *mismatch;
  EXPECT_THROW(require_tensors(reader, wider), MismatchError);

  const std::vector<ExpectedTensor> extra_layer = {{"/model/layers.1.attn.wq", {4, 4}}};
  EXPECT_NE(find_tensor_mismatch(reader, extra_layer)->find("/model/layers.1.attn.wq"), std::string::npos);

  EXPECT_NO_THROW(require_attr_equals(reader, "tokenizer_hash", "tok-A"));
  try {
    require_attr_equals(reader, "tokenizer_hash", "tok-B");
    FAIL();
  } catch (const MismatchError& e) {
    EXPECT_NE(std::string(e.what()).find("tok-A"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("tok-B"), std::string::npos);
  }
}

TEST(Inspect, PrintsStepConfigLayoutTensorsAndChecksumStatus) {
  ScratchDir dir;
  write_simple(dir.path(), 300);
  const fs::path file = dir.path() / checkpoint_file_name(300);
  std::ostringstream out;
  EXPECT_TRUE(inspect(file, out));
  const std::string text = out.str();
  for (const char* expected : {"step: 300", "tokens_seen: 3000", "world_size 1, dp 1, tp 1", "tok-A",
                               "d_model = 1000", "/model/big  float32 [1100, 1000]  checksum ok",
                               "/data/cursor  int64 [2]  checksum ok", "verify: OK"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  }
  flip_byte(file, dataset_data_offset(file, "/model/big") + 10);
  std::ostringstream damaged;
  EXPECT_FALSE(inspect(file, damaged));
  EXPECT_NE(damaged.str().find("/model/big  float32 [1100, 1000]  checksum DAMAGED"), std::string::npos)
      << damaged.str();
  EXPECT_NE(damaged.str().find("verify: DAMAGED"), std::string::npos);
}

}  // namespace
}  // namespace brt::checkpoint
