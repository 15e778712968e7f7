// The node checks of an in-job restart under srun (launch/supervise/restarts.h): inside an
// allocation (SLURM_JOB_ID, SLURM_JOB_NODELIST) every node not yet left out is checked by a
// one-task srun step; a node that fails is left out beside the fault's host, the step shrinks
// under --min-dp, a fault host that passed is kept when nothing else can take its place, and a
// failed node with too few left refuses the restart. Stand-ins for srun and scontrol (sh
// scripts first on PATH) answer as the nodes named in FAKE_* variables would.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "launch/supervise/restarts.h"

namespace brt::launch {
namespace {

namespace fs = std::filesystem;

// Sets the variables for one test; puts the old values back at its end.
class ScopedEnv {
 public:
  void set(const std::string& name, const std::string& value) {
    const char* old = std::getenv(name.c_str());
    saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it)
      if (it->second) ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else ::unsetenv(it->first.c_str());
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

void write_script(const fs::path& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  fs::permissions(path, fs::perms::owner_all);
}

// A Slurm allocation of FAKE_NODES: srun -w NODE answers for a healthy node, says "dir missing"
// for one in FAKE_NO_DIR and fails to start on one in FAKE_DOWN.
class SrunNodeChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("brt-srun-checks-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    write_script(dir_ / "scontrol", "for n in $FAKE_NODES; do echo $n; done\n");
    write_script(dir_ / "srun",
                 "while [ $# -gt 0 ]; do [ \"$1\" = -w ] && node=$2; shift; done\n"
                 "case \" $FAKE_DOWN \" in *\" $node \"*) echo \"srun: error: Task launch failed on node $node\" >&2;"
                 " exit 1 ;; esac\n"
                 "echo 'mem 2000000'\n"
                 "case \" $FAKE_NO_DIR \" in *\" $node \"*) echo 'dir missing' ;; *) echo 'dir ok' ;; esac\n");
    env_.set("PATH", dir_.string() + ":" + std::getenv("PATH"));
    env_.set("SLURM_JOB_ID", "7");
    env_.set("SLURM_JOB_NODELIST", "h[1-4]");
    env_.set("FAKE_NODES", "h1 h2 h3 h4");
    env_.set("FAKE_DOWN", "");
    env_.set("FAKE_NO_DIR", "");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Restarts after world rank 1's task was killed on h2, `srun -N 2` of the 2-rank run.
  std::optional<int> after_fault_on_h2(int min_dp, std::vector<std::string>& next) {
    RestartOptions o;
    o.restarts = 2;
    o.host_check_timeout_s = 5;
    o.shrink.min_dp = min_dp;
    o.shrink.ranks = 2;
    o.shrink.batch = 1;
    o.shrink.global_streams = 2;
    Restarter restarter(o, {"srun", "-N", "2", "--ntasks-per-node=1", "brt-dist", "train", "c.toml",
                            "checkpoint.dir=/c"});
    AttemptResult r;
    r.status = 1;
    r.signs.line("srun: error: h2: task 1: Killed", std::chrono::steady_clock::now());
    const std::optional<int> status = restarter.after_fault(r);
    next = restarter.command();
    return status;
  }

  fs::path dir_;
  ScopedEnv env_;
};

TEST_F(SrunNodeChecks, LeaveOutTheFaultHostAndEveryNodeThatFailsItsCheck) {
  env_.set("FAKE_NO_DIR", "h3");
  env_.set("FAKE_DOWN", "h4");
  std::vector<std::string> next;
  testing::internal::CaptureStderr();
  EXPECT_EQ(after_fault_on_h2(1, next), std::nullopt);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("host h3: FAILED its check: reachable, 2.0 GB available; checkpoint dir /c is not a readable "
                      "directory there"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("host h4: FAILED its check: srun exited 1: srun: error: Task launch failed on node h4"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("host h1: ok, reachable, 2.0 GB available, /c readable"), std::string::npos) << said;
  // One node is left of four: the step shrinks to it, the global batch kept by accumulation.
  EXPECT_EQ(next, (std::vector<std::string>{"srun", "--exclude=h3,h4,h2", "-N", "1", "--ntasks-per-node=1", "brt-dist",
                                            "train", "c.toml", "checkpoint.dir=/c", "train.grad_accum=2"}));
}

TEST_F(SrunNodeChecks, KeepTheFaultHostWhenItPassedAndNothingElseCanTakeItsPlace) {
  env_.set("FAKE_NODES", "h1 h2 h3");
  env_.set("FAKE_NO_DIR", "h3");
  std::vector<std::string> next;
  testing::internal::CaptureStderr();
  EXPECT_EQ(after_fault_on_h2(0, next), std::nullopt);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("host h2: the fault was there, but it passed its check"), std::string::npos) << said;
  EXPECT_EQ(next, (std::vector<std::string>{"srun", "--exclude=h3", "-N", "2", "--ntasks-per-node=1", "brt-dist",
                                            "train", "c.toml", "checkpoint.dir=/c"}));
}

TEST_F(SrunNodeChecks, RefuseWhenTooFewNodesPassAndNoShrinkIsAllowed) {
  env_.set("FAKE_NODES", "h1 h2 h3");
  env_.set("FAKE_DOWN", "h2 h3");
  std::vector<std::string> next;
  testing::internal::CaptureStderr();
  EXPECT_EQ(after_fault_on_h2(0, next), kRestartsExhaustedExitCode);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("the allocation has 1 node(s) left that pass their check, the step needs 2 (--min-dp would "
                      "shrink)"),
            std::string::npos)
      << said;
}

TEST_F(SrunNodeChecks, OutsideAnAllocationOnlyTheFaultHostIsLeftOut) {
  ::unsetenv("SLURM_JOB_ID");
  std::vector<std::string> next;
  testing::internal::CaptureStderr();
  EXPECT_EQ(after_fault_on_h2(0, next), std::nullopt);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("no node check: not inside a Slurm allocation"), std::string::npos) << said;
  EXPECT_EQ(next[1], "--exclude=h2");
}

}  // namespace
}  // namespace brt::launch
