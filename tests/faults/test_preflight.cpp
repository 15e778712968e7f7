// The pieces of the preflight and the checkpoint directory's lock
// (launch/preflight/preflight.h, run_lock.h, host_memory.h, config_agreement.h):
// memory and cgroup files read from a fake /proc and /sys/fs/cgroup, the config diff, the
// memory and thread decisions, the location messages, and the lock's life (a killed holder
// frees it at once). The commands themselves: preflight.sh, lock.sh, config_agreement.sh.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "launch/config/config_keys.h"
#include "launch/plan/planner.h"
#include "launch/preflight/config_agreement.h"
#include "launch/preflight/preflight.h"
#include "parallel/launch_refused.h"

namespace brt::launch {
namespace {

namespace fs = std::filesystem;

class Scratch {
 public:
  Scratch() {
    char name[] = "/tmp/brt-preflight-XXXXXX";
    path_ = ::mkdtemp(name);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  void write(const fs::path& relative, const std::string& text) const {
    fs::create_directories((path_ / relative).parent_path());
    std::ofstream(path_ / relative) << text;
  }

 private:
  fs::path path_;
};

constexpr int64_t kGiB = int64_t(1) << 30;

TEST(HostMemory, ParsesMemAvailableAndTheCgroupPaths) {
  EXPECT_EQ(parse_meminfo_available("MemTotal: 100 kB\nMemFree: 5 kB\nMemAvailable:    2048 kB\n"), 2048 * 1024);
  EXPECT_FALSE(parse_meminfo_available("MemTotal: 100 kB\n").has_value());
  const CgroupPaths paths = parse_proc_cgroup("12:cpu,cpuacct:/a\n4:memory:/slurm/job_7/step_0\n0::/user.slice/x\n");
  EXPECT_EQ(paths.v2, "/user.slice/x");
  EXPECT_EQ(paths.v1_memory, "/slurm/job_7/step_0");
}

TEST(HostMemory, TheTightestCgroupV2LimitAboveTheProcessCounts) {
  Scratch s;
  s.write("proc/meminfo", "MemAvailable: 33554432 kB\n");  // 32 GiB
  s.write("proc/self/cgroup", "0::/job/step\n");
  s.write("cg/cgroup.controllers", "memory\n");
  s.write("cg/job/memory.max", std::to_string(8 * kGiB) + "\n");  // the job's limit, on the parent
  s.write("cg/job/memory.current", std::to_string(2 * kGiB) + "\n");
  s.write("cg/job/step/memory.max", "max\n");
  s.write("cg/job/step/memory.current", std::to_string(1 * kGiB) + "\n");
  const MemoryBudget b = host_memory_budget(s.path() / "proc", s.path() / "cg");
  EXPECT_EQ(b.bytes, 6 * kGiB);
  EXPECT_NE(b.source.find("cgroup /job limit 8.00 GiB, 2.00 GiB in use"), std::string::npos) << b.source;
  EXPECT_NE(b.source.find("MemAvailable 32.00 GiB"), std::string::npos) << b.source;
}

TEST(HostMemory, CgroupV1AndNoLimit) {
  Scratch s;
  s.write("proc/meminfo", "MemAvailable: 4194304 kB\n");  // 4 GiB
  s.write("proc/self/cgroup", "4:memory:/batch\n0::/\n");
  s.write("cg/memory/batch/memory.limit_in_bytes", std::to_string(kGiB) + "\n");
  s.write("cg/memory/batch/memory.usage_in_bytes", std::to_string(kGiB / 4) + "\n");
  EXPECT_EQ(host_memory_budget(s.path() / "proc", s.path() / "cg").bytes, kGiB - kGiB / 4);
  s.write("cg/memory/batch/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "no limit"
  const MemoryBudget b = host_memory_budget(s.path() / "proc", s.path() / "cg");
  EXPECT_EQ(b.bytes, 4 * kGiB);
  EXPECT_EQ(b.source, "MemAvailable 4.00 GiB");
}

TEST(MemoryCheck, RefusesWhatDoesNotFitPerRankAndSaysWhatToLower) {
  const MemoryNeed need{3 * kGiB, 0, "parameters ...", ""};
  const MemoryBudget host{4 * kGiB, "MemAvailable 4.00 GiB"};
  EXPECT_EQ(memory_problem(need, host, 1, 0, "Lower it."), "");
  const std::string p = memory_problem(need, host, 2, 0, "Lower it.");
  EXPECT_NE(p.find("needs 3.00 GiB per rank (parameters ..."), std::string::npos) << p;
  EXPECT_NE(p.find("2.00 GiB available (MemAvailable 4.00 GiB / 2 ranks on this node). Lower it."), std::string::npos)
      << p;
  EXPECT_EQ(memory_problem(need, MemoryBudget{}, 1, 0, ""), "");  // nothing readable: no verdict
  const MemoryNeed gpu{0, 150 * kGiB, "", "parameters ..."};
  EXPECT_NE(memory_problem(gpu, host, 1, 141 * int64_t(1e9), "").find("not enough GPU memory"), std::string::npos);
}

TEST(MemoryCheck, IsPredictedFromTheConfigWithoutAllocating) {
  const RunConfig cfg = parse_run_config("[model]\nlayers = 10000\n[checkpoint]\ndir = \"x\"\n", "test");
  const auto t0 = std::chrono::steady_clock::now();
  const MemoryNeed need = train_memory_need(cfg, 1, 0);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  const MemoryPrediction m = predict_rank_memory(cfg.model, cfg.optim, cfg.train.batch, 1, false, 0);
  EXPECT_EQ(need.host, m.total() + m.parameters + m.optimizer + m.carried_state);  // + the save's snapshot
  EXPECT_GT(need.host, 10 * kGiB);
}

TEST(Threads, RefusedAboveFourTimesTheCoresWarnedAboveThem) {
  parallel::CpuShare share;
  share.cores_in_mask = 2;
  EXPECT_EQ(thread_problem({8, "train.threads"}, share), "");
  const std::string p = thread_problem({100000, "OMP_NUM_THREADS"}, share);
  EXPECT_NE(p.find("threads: 100000 per rank (OMP_NUM_THREADS) is more than 4 x the 2 cores"), std::string::npos) << p;
  EXPECT_NE(p.find("Use at most 8"), std::string::npos) << p;
  EXPECT_EQ(thread_warning({2, ""}, share), "");
  EXPECT_NE(thread_warning({3, "train.threads"}, share).find("3 per rank (train.threads) on 2 cores"), std::string::npos);
  EXPECT_THROW(preflight_threads(100000, share), parallel::LaunchRefused);
}

TEST(ConfigAgreement, NamesEveryDifferingKeyAndItsRanks) {
  RunConfig a, b;
  b.model.d_model = 64;
  b.optim.lr = 0.5;
  const std::string ta = canonical_config_text(a), tb = canonical_config_text(b);
  EXPECT_NE(config_hash(ta), config_hash(tb));
  EXPECT_EQ(config_hash(ta), config_hash(canonical_config_text(a)));
  EXPECT_NE(ta.find("model.d_model = " + std::to_string(a.model.d_model) + "\n"), std::string::npos);
  EXPECT_EQ(size_t(std::count(ta.begin(), ta.end(), '\n')), config_keys().size());
  const std::string m = describe_config_differences({{ta, {0, 1, 2, 5}}, {tb, {3, 4}}});
  EXPECT_NE(m.find("2 keys differ:"), std::string::npos) << m;
  EXPECT_NE(m.find("  model.d_model: " + std::to_string(a.model.d_model) + " on world ranks 0-2,5; 64 on world ranks 3-4"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("  optim.lr: "), std::string::npos) << m;
  EXPECT_EQ(rank_list_text({0}), "0");
  EXPECT_EQ(rank_list_text({0, 2, 3, 4, 7}), "0,2-4,7");
}

TEST(Locations, SayWhatIsWrongWithAPath) {
  Scratch s;
  s.write("file", "x");
  const fs::path dir = s.path();
  EXPECT_EQ(directory_problem(dir / "file", "checkpoint.dir"),
            "checkpoint.dir " + (dir / "file").string() + " is a regular file, not a directory");
  EXPECT_NE(directory_problem(dir / "file" / "sub", "checkpoint.dir")
                .find(": " + (dir / "file").string() + " is a regular file, not a directory"),
            std::string::npos);
  fs::create_symlink("missing", dir / "link");
  EXPECT_NE(directory_problem(dir / "link", "checkpoint.dir")
                .find("is a dangling symbolic link (to missing): its target does not exist"),
            std::string::npos);
  const std::string long_name(300, 'n');
  const std::string p = directory_problem(dir / long_name, "checkpoint.dir");
  EXPECT_NE(p.find("File name too long (ENAMETOOLONG); a name in it is 300 characters long"), std::string::npos) << p;
  EXPECT_NE(p.find("nnnnnnnnnnnnnnnn...(300 characters)"), std::string::npos) << p;
  // A missing directory is created, and the probe leaves nothing behind.
  EXPECT_EQ(directory_problem(dir / "new" / "ckpt", "checkpoint.dir"), "");
  EXPECT_TRUE(fs::is_directory(dir / "new" / "ckpt"));
  EXPECT_TRUE(fs::is_empty(dir / "new" / "ckpt"));
  EXPECT_EQ(output_file_problem(dir / "new", "--json"), "--json " + (dir / "new").string() + " is a directory, not a file");
  EXPECT_EQ(output_file_problem(dir / "out" / "m.jsonl", "log.metrics_path"), "");
}

TEST(DirectoryLock, OneHolderAtATimeAndTheHolderIsNamed) {
  Scratch s;
  DirectoryLock first, second;
  std::string holder;
  ASSERT_EQ(first.try_take(s.path(), lock_holder_line("brt-dist train a"), holder), DirectoryLock::Attempt::kTaken);
  ASSERT_EQ(second.try_take(s.path(), lock_holder_line("brt-dist train b"), holder),
            DirectoryLock::Attempt::kHeldByOther);
  const std::string described = describe_lock_holder(holder);
  EXPECT_NE(described.find("PID " + std::to_string(::getpid()) + " on host "), std::string::npos) << described;
  EXPECT_NE(described.find(" since "), std::string::npos) << described;
  EXPECT_NE(described.find("(brt-dist train a)"), std::string::npos) << described;
  first = DirectoryLock();  // released
  EXPECT_EQ(second.try_take(s.path(), lock_holder_line("b"), holder), DirectoryLock::Attempt::kTaken);
}

TEST(DirectoryLock, AKilledHolderFreesItAtOnce) {
  Scratch s;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    DirectoryLock lock;
    std::string holder;
    const bool taken = lock.try_take(s.path(), lock_holder_line("child"), holder) == DirectoryLock::Attempt::kTaken;
    (void)!::write(ready[1], taken ? "y" : "n", 1);
    for (;;) ::pause();
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  try {
    lock_checkpoint_dir(s.path(), 0.3, "second", nullptr, false);
    FAIL() << "took a directory another process holds";
  } catch (const parallel::LaunchRefused& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("is in use by PID " + std::to_string(child) + " on host "), std::string::npos) << m;
    EXPECT_NE(m.find("Waited 1 s for it to end (checkpoint.lock_wait_s = 1 s). Nothing was changed."),
              std::string::npos)
        << m;
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  s.write("ckpt-00000030.h5.tmp", "a save the killed run never finished");
  const auto t0 = std::chrono::steady_clock::now();
  const CheckpointDirLock taken = lock_checkpoint_dir(s.path(), 60, "third", nullptr, false);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  EXPECT_TRUE(taken.lock.held());
  ASSERT_EQ(taken.notes.size(), 1u);
  EXPECT_NE(taken.notes[0].find("removed ckpt-00000030.h5.tmp, left by a save that never finished"), std::string::npos);
  EXPECT_FALSE(fs::exists(s.path() / "ckpt-00000030.h5.tmp"));
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace brt::launch
