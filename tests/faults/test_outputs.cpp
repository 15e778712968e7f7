// The pieces behind faults_outputs and faults_errors: the checked output writers
// (data/output_file.h) under a write that fails part-way, and the typed flag parsers
// (launch/cli/cli.h). A failing write without a full disk: RLIMIT_FSIZE with SIGXFSZ ignored makes
// write(2) fail with EFBIG past the limit, after writing what fits, as a filling disk does.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/output_file.h"
#include "launch/cli/cli.h"

namespace fs = std::filesystem;
using brt::data::AtomicOutputFile;
using brt::data::OutputError;
using brt::data::RecordLog;

namespace {

// Files of this test may not grow past `bytes` while it lives.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = nullptr;
};

fs::path scratch_dir() { return fs::temp_directory_path() / ("brt-test-outputs-" + std::to_string(::getpid())); }

// The scratch folder goes when the tests end.
class RemoveScratch : public ::testing::Environment {
  void TearDown() override { fs::remove_all(scratch_dir()); }
};
[[maybe_unused]] ::testing::Environment* const kRemoveScratch = ::testing::AddGlobalTestEnvironment(new RemoveScratch);

fs::path scratch(const std::string& name) {
  const fs::path dir = scratch_dir();
  fs::create_directories(dir);
  fs::remove(dir / name);
  return dir / name;
}

std::string contents(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST(RecordLog, CutsARecordThatDoesNotFitBackOffTheFile) {
  const fs::path path = scratch("m.jsonl");
  RecordLog log(path);
  EXPECT_EQ(log.append("{\"step\":1}\n"), "");
  {
    const FileSizeLimit limit(16);  // the next record fits only in part
    const std::string error = log.append("{\"step\":2,\"loss\":1.5}\n");
    EXPECT_NE(error.find("File too large"), std::string::npos) << error;
  }
  EXPECT_EQ(contents(path), "{\"step\":1}\n");  // whole records only
  EXPECT_EQ(log.append("{\"step\":3}\n"), "");  // room again: records go on
  EXPECT_EQ(contents(path), "{\"step\":1}\n{\"step\":3}\n");
}

TEST(AtomicOutputFile, AFailedWriteLeavesNeitherTheFileNorItsTmp) {
  const fs::path path = scratch("eval.json");
  std::ofstream(path) << "the previous report\n";
  try {
    const FileSizeLimit limit(4096);
    AtomicOutputFile out(path);
    out.write(std::string(64 * 1024, 'x'));  // past the buffer: written now
    out.commit();
    FAIL() << "no error";
  } catch (const OutputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot write " + path.string() + ": File too large"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
  EXPECT_EQ(contents(path), "the previous report\n");  // unchanged
}

TEST(AtomicOutputFile, ReplacesTheFileOnlyWhenComplete) {
  const fs::path path = scratch("out.tsv");
  {
    AtomicOutputFile out(path);
    out.write("a\t1\n");
    EXPECT_FALSE(fs::exists(path));  // not yet
  }  // destroyed without commit: nothing
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
  brt::data::write_file_atomically(path, "b\t2\n");
  EXPECT_EQ(contents(path), "b\t2\n");
}

TEST(Flags, WholeNumbersAreWholeAndInRange) {
  using brt::launch::parse_int_flag;
  EXPECT_EQ(parse_int_flag("max-tokens", "200", 1), 200);
  for (const char* bad : {"1e3", "2.0", "", "12abc", " 5", "+5"}) {
    try {
      parse_int_flag("max-tokens", bad, 1);
      FAIL() << bad;
    } catch (const brt::parallel::UsageError& e) {
      EXPECT_EQ(std::string(e.what()), std::string("--max-tokens needs a whole number, got '") + bad + "'");
    }
  }
  EXPECT_THROW(parse_int_flag("max-tokens", "0", 1), brt::parallel::UsageError);
  EXPECT_THROW(parse_int_flag("top-k", "99999999999999999999", 0), brt::parallel::UsageError);
  EXPECT_EQ(brt::launch::parse_uint64_flag("seed", "18446744073709551615"), UINT64_MAX);
  EXPECT_THROW(brt::launch::parse_uint64_flag("seed", "-1"), brt::parallel::UsageError);
}

TEST(Flags, RealNumbersAreFiniteAndInRange) {
  using brt::launch::parse_double_flag;
  using brt::launch::Range;
  EXPECT_DOUBLE_EQ(parse_double_flag("top-p", "1", {0, 1, true, false}), 1.0);
  EXPECT_DOUBLE_EQ(parse_double_flag("shard-mb", "1e-3", Range::above(0)), 1e-3);
  try {
    parse_double_flag("top-p", "1.5", {0, 1, true, false});
    FAIL();
  } catch (const brt::parallel::UsageError& e) {
    EXPECT_STREQ(e.what(), "--top-p must be in (0, 1], got 1.5");
  }
  for (const char* bad : {"0", "nan", "inf", "-1"})
    EXPECT_THROW(parse_double_flag("temperature", bad, Range::above(0)), brt::parallel::UsageError) << bad;
  EXPECT_THROW(parse_double_flag("temperature", "0.5x", Range::above(0)), brt::parallel::UsageError);
}
