// Crash and failure safety: a writer SIGKILLed mid-save, a save that cannot create or rename
// its file, and a save that runs out of space (RLIMIT_FSIZE) must all leave the previous
// checkpoint and `latest` intact, and report the failing file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <thread>

#include "tests/checkpoint/test_util.h"

namespace brt::checkpoint {
namespace {
using namespace brt::checkpoint::testing;

struct ChildResult {
  int exit_code = -1;
  int signal = 0;
  std::string err;
};

// Runs ckpt_test_writer with `args`; `before_exec` runs in the child (rlimits), `on_started`
// in the parent once the child printed "started" (return true to SIGKILL it).
ChildResult run_writer(const std::vector<std::string>& args, void (*before_exec)() = nullptr,
                       bool kill_after_start = false) {
  int out_pipe[2], err_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0) throw std::runtime_error("pipe failed");
  std::vector<std::string> argv_storage = {BRT_CKPT_TEST_WRITER};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    if (before_exec) before_exec();
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (kill_after_start) {
    std::string seen;
    char c;
    while (seen.find("started\n") == std::string::npos && ::read(out_pipe[0], &c, 1) == 1) seen += c;
    std::this_thread::sleep_for(std::chrono::milliseconds(60));  // well inside the ~0.6 s save
    ::kill(pid, SIGKILL);
  }
  ChildResult result;
  char buffer[4096];
  for (ssize_t n; (n = ::read(err_pipe[0], buffer, sizeof buffer)) > 0;) result.err.append(buffer, n);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

void expect_previous_intact(const fs::path& dir, int64_t step, const std::vector<float>& values) {
  EXPECT_EQ(read_latest_pointer(dir), dir / checkpoint_file_name(step));
  const LatestGood good = find_latest_good(dir);
  ASSERT_TRUE(good.path.has_value());
  EXPECT_EQ(good.step, step);
  CheckpointReader reader(*good.path);
  EXPECT_TRUE(bit_equal(reader.read_whole<float>("/model/big"), values));
}

TEST(Crash, SigkillWhileSavingKeepsThePreviousCheckpoint) {
  ScratchDir dir;
  const auto previous = write_simple(dir.path(), 100);
  const ChildResult child = run_writer({"slow", dir.path().string(), "200"}, nullptr, true);
  ASSERT_EQ(child.signal, SIGKILL) << "writer finished before it was killed: " << child.err;
  EXPECT_FALSE(fs::exists(dir.path() / checkpoint_file_name(200)));
  EXPECT_TRUE(fs::exists(dir.path() / "ckpt-00000200.h5.tmp"));  // the half-written file
  expect_previous_intact(dir.path(), 100, previous);
  EXPECT_NE(find_latest_good(dir.path()).warnings.at(0).find("ckpt-00000200.h5.tmp"), std::string::npos);
  // The half-written file itself is detected as damaged, not silently accepted.
  EXPECT_FALSE(verify(dir.path() / "ckpt-00000200.h5.tmp").ok);
  // The next save of the same step succeeds and clears the leftover.
  write_simple(dir.path(), 200);
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt-00000200.h5.tmp"));
  EXPECT_EQ(find_latest_good(dir.path()).step, 200);
}

TEST(Failure, DirectoryThatCannotExistIsReportedAsSaveError) {
  ScratchDir dir;
  const fs::path not_a_dir = dir.path() / "regular-file";
  std::ofstream(not_a_dir) << "x";
  try {
    CheckpointWriter writer(not_a_dir / "ckpts", 100);
    FAIL() << "save into a path under a regular file succeeded";
  } catch (const SaveError& e) {
    EXPECT_NE(std::string(e.what()).find((not_a_dir / "ckpts").string()), std::string::npos) << e.what();
  }
}

TEST(Failure, UnwritableTemporaryFileLeavesPreviousIntact) {
  // Root ignores permission bits, so block the temporary name with a non-empty directory:
  // creating the file fails (EISDIR) for every user.
  ScratchDir dir;
  const auto previous = write_simple(dir.path(), 100);
  const fs::path blocker = dir.path() / "ckpt-00000200.h5.tmp";
  fs::create_directory(blocker);
  std::ofstream(blocker / "keep") << "x";
  try {
    write_simple(dir.path(), 200);
    FAIL() << "save succeeded";
  } catch (const SaveError& e) {
    EXPECT_NE(std::string(e.what()).find("ckpt-00000200.h5"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(blocker / "keep"));
  expect_previous_intact(dir.path(), 100, previous);
}

TEST(Failure, RenameFailureLeavesPreviousIntactAndNoTemporary) {
  ScratchDir dir;
  const auto previous = write_simple(dir.path(), 100);
  const fs::path blocker = dir.path() / "ckpt-00000300.h5";  // final name is a non-empty directory
  fs::create_directory(blocker);
  std::ofstream(blocker / "keep") << "x";
  EXPECT_THROW(write_simple(dir.path(), 300), SaveError);
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt-00000300.h5.tmp"));
  expect_previous_intact(dir.path(), 100, previous);
}

void limit_file_size_to_2mib() {
  ::signal(SIGXFSZ, SIG_IGN);  // writes past the limit then fail with EFBIG, like a full disk
  const rlimit limit = {2 << 20, 2 << 20};
  ::setrlimit(RLIMIT_FSIZE, &limit);
}

TEST(Failure, RunningOutOfSpaceMidWriteIsReportedAndPreviousSurvives) {
  ScratchDir dir;
  const auto previous = write_simple(dir.path(), 100);  // 4.4 MB: written before the limit
  const ChildResult child =
      run_writer({"big", dir.path().string(), "200", std::to_string(4 << 20)}, limit_file_size_to_2mib);
  EXPECT_EQ(child.exit_code, 3) << child.err;
  EXPECT_NE(child.err.find("ckpt-00000200.h5"), std::string::npos) << child.err;
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt-00000200.h5.tmp"));
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt-00000200.h5"));
  expect_previous_intact(dir.path(), 100, previous);
}

// No cleanup touches a file it did not create: a save removes only its own
// temporary file, identified by device and inode, and never another run's *.tmp.
void replace_with_foreign_file(const fs::path& path, const std::string& text) {
  fs::remove(path);  // another process (ignoring the directory lock) puts its own file there
  std::ofstream(path) << text;
}

TEST(Cleanup, AnAbandonedSaveLeavesAFileSomeoneElsePutInItsPlace) {
  ScratchDir dir;
  const auto previous = write_simple(dir.path(), 100);
  const fs::path tmp = dir.path() / "ckpt-00000200.h5.tmp";
  {
    CheckpointWriter writer(dir.path(), 200);
    ASSERT_TRUE(fs::exists(tmp));
    replace_with_foreign_file(tmp, "another run's save");
  }  // abandoned without commit
  ASSERT_TRUE(fs::exists(tmp));
  EXPECT_EQ(read_text(tmp), "another run's save");
  expect_previous_intact(dir.path(), 100, previous);
}

TEST(Cleanup, ACommitRefusesToRenameAFileItDidNotWrite) {
  ScratchDir dir;
  const auto previous = write_simple(dir.path(), 100);
  const fs::path tmp = dir.path() / "ckpt-00000200.h5.tmp";
  try {
    CheckpointWriter writer(dir.path(), 200);
    Metadata meta;
    meta.step = 200;
    writer.set_metadata(meta);
    writer.write_whole<float>("/model/small", {8}, test_tensor_f32(7, 8));
    replace_with_foreign_file(tmp, "another run's save");
    writer.commit();
    FAIL() << "committed a file another process put in place";
  } catch (const SaveError& e) {
    EXPECT_NE(std::string(e.what()).find("is no longer the file this save wrote"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_text(tmp), "another run's save");
  EXPECT_FALSE(fs::exists(dir.path() / checkpoint_file_name(200)));
  expect_previous_intact(dir.path(), 100, previous);
}

TEST(Cleanup, ASaveLeavesOtherTemporaryFilesAlone) {
  ScratchDir dir;
  std::ofstream(dir.path() / "ckpt-00000300.h5.tmp") << "a save in progress elsewhere";
  std::ofstream(dir.path() / "latest.tmp.12345") << "ckpt-00000300.h5\n";
  write_simple(dir.path(), 100);
  WriterOptions keep_one;
  keep_one.keep_last = 1;
  write_simple(dir.path(), 200, keep_one);
  EXPECT_EQ(read_text(dir.path() / "ckpt-00000300.h5.tmp"), "a save in progress elsewhere");
  EXPECT_TRUE(fs::exists(dir.path() / "latest.tmp.12345"));
  // The lock holder (brt-dist train, at start) removes the leftovers of crashed saves.
  const auto removed = remove_abandoned_partials(dir.path());
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(fs::exists(dir.path() / "ckpt-00000300.h5.tmp"));
  EXPECT_FALSE(fs::exists(dir.path() / "latest.tmp.12345"));
  EXPECT_EQ(find_latest_good(dir.path()).step, 200);
}

}  // namespace
}  // namespace brt::checkpoint
