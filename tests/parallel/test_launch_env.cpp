// Launcher environment parsing, the plain-srun refusal, and the timeout report's wording.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "parallel/health/comm_error.h"
#include "parallel/mpi/launch_env.h"

namespace bp = brt::parallel;

namespace {

bp::EnvLookup fake_env(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST(LaunchEnv, MpirunVariables) {
  const auto e = bp::read_launcher_env(fake_env({{"OMPI_COMM_WORLD_RANK", "3"},
                                                 {"OMPI_COMM_WORLD_SIZE", "8"},
                                                 {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                 {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  EXPECT_EQ(e.launcher, "mpirun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
}

TEST(LaunchEnv, SrunWithPmix) {
  const auto env = fake_env({{"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "8"},
                             {"SLURM_STEP_ID", "0"}, {"PMIX_RANK", "5"}});
  const auto e = bp::read_launcher_env(env);
  EXPECT_EQ(e.launcher, "srun --mpi=pmix");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(bp::started_without_pmi_hint(env), "");
}

TEST(LaunchEnv, PlainSrunWithoutPmiGetsTheHint) {
  const auto env = fake_env({{"SLURM_PROCID", "1"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS", "2"},
                             {"SLURM_STEP_ID", "0"}});
  EXPECT_EQ(bp::read_launcher_env(env).launcher, "srun (no PMI)");
  const std::string hint = bp::started_without_pmi_hint(env);
  EXPECT_NE(hint.find("task 1 of 2"), std::string::npos) << hint;
  EXPECT_NE(hint.find("srun --mpi=pmix"), std::string::npos) << hint;
  EXPECT_NE(hint.find("mpirun"), std::string::npos) << hint;
  EXPECT_NE(hint.find("separate 1-rank world"), std::string::npos) << hint;
}

TEST(LaunchEnv, NoHintForOneTaskMpirunOrNoLauncher) {
  EXPECT_EQ(bp::started_without_pmi_hint(fake_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}})), "");
  EXPECT_EQ(bp::started_without_pmi_hint(fake_env(
                {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}})),
            "");
  EXPECT_EQ(bp::started_without_pmi_hint(fake_env({})), "");
  EXPECT_EQ(bp::read_launcher_env(fake_env({})).launcher, "none");
}

TEST(LaunchEnv, StepTaskCountWinsOverJobTaskCount) {
  // An sbatch -n 4 job running a one-task step: not a multi-task launch.
  const auto env = fake_env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"},
                             {"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_STEP_ID", "3"}});
  EXPECT_EQ(bp::started_without_pmi_hint(env), "");
}

TEST(TimeoutReport, NamesOpBytesGroupSequenceAndMissingRanks) {
  bp::CollectiveInfo info{"all_reduce(sum)", "float32", 4096, "tp[1]", 2, 17};
  const bp::RankLocation self{2, "node-a"};
  const std::vector<bp::RankLocation> missing{{3, "node-b"}};
  const std::string m = bp::describe_timeout(info, self, 5.02, 5.0, missing);
  EXPECT_NE(m.find("world rank 2 (host node-a)"), std::string::npos) << m;
  EXPECT_NE(m.find("all_reduce(sum) #17 (float32, 4096 bytes) on group 'tp[1]' of 2 ranks"),
            std::string::npos) << m;
  EXPECT_NE(m.find("timeout 5.0 s"), std::string::npos) << m;
  EXPECT_NE(m.find("Still waiting for world rank 3 (host node-b)"), std::string::npos) << m;
}
