// The pieces of the multi-host harness that need no cluster: what the abort helper will end (by the parent's
// name), the placement line, the doctor's slow-link verdict and cluster file, and the flight
// records' "waiting on each other" diagnosis. The behaviour on real hosts is tests/cluster/*.sh.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "launch/preflight/doctor_cluster.h"
#include "launch/run/placement.h"
#include "parallel/health/abort_fallback.h"
#include "parallel/health/flight_recorder.h"

namespace brt {
namespace {

TEST(AbortFallback, EndsOpenMpiLaunchersOnly) {
  const auto orted = parallel::plan_abort_fallback(3, "h2", 124, 10, "orted");
  EXPECT_EQ(orted.launcher_name, "orted");
  EXPECT_EQ(orted.launcher_pid, int(::getppid()));
  EXPECT_TRUE(orted.terminate_launcher);  // SIGTERM first: orted kills its ranks and cleans up
  EXPECT_NE(orted.message.find("world rank 3 (host h2): the job has not ended 10 s after MPI_Abort(124); "
                               "orted (pid "),
            std::string::npos)
      << orted.message;
  const auto mpirun = parallel::plan_abort_fallback(0, "h1", 124, 10, "mpirun");
  EXPECT_EQ(mpirun.launcher_name, "mpirun");
  EXPECT_FALSE(mpirun.terminate_launcher);  // SIGTERM makes a hung mpirun crash in PMIx_Finalize
  for (const char* other : {"slurmstepd", "bash", "srun", "brt-dist"}) {
    const auto plan = parallel::plan_abort_fallback(1, "h", 1, 10, other);
    EXPECT_EQ(plan.launcher_pid, 0) << other;
    EXPECT_NE(plan.message.find("this rank ends itself"), std::string::npos) << plan.message;
  }
}

// The helper really ends a rank that does not end: a child process plays the rank stuck in
// MPI_Abort (it arms the fallback with a short grace and then sleeps forever).
TEST(AbortFallback, KillsARankStuckAfterTheGrace) {
  const pid_t rank = ::fork();
  ASSERT_GE(rank, 0);
  if (rank == 0) {
    parallel::arm_abort_fallback(parallel::plan_abort_fallback(0, "here", 124, 0.5, "bash"));
    for (;;) ::pause();
  }
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  ASSERT_EQ(::waitpid(rank, &status, 0), rank);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_GE(secs, 0.4);
  EXPECT_LT(secs, 5.0);
}

TEST(Placement, NamesEveryHostItsRanksAndThreads) {
  using launch::RankPlace;
  EXPECT_EQ(launch::format_placement({{"vm", 1, "x"}, {"vm", 1, "x"}}), "");  // one host: nothing to say
  EXPECT_EQ(launch::format_placement({{"h1", 1, "2 cores / 2 ranks"}, {"h1", 1, "2 cores / 2 ranks"},
                                      {"h2", 2, "2 cores / 1 rank"}}),
            "placement: 3 ranks on 2 hosts: h1 ranks 0-1, 1 thread each (2 cores / 2 ranks); h2 rank 2, 2 threads "
            "(2 cores / 1 rank)");
  EXPECT_EQ(launch::format_placement({{"a", 1, "t"}, {"b", 1, "t"}, {"a", 1, "t"}, {"b", 3, "u"}}),
            "placement: 4 ranks on 2 hosts: a ranks 0,2, 1 thread each (t); b ranks 1,3, threads 1 (t) 3 (u)");
  EXPECT_EQ(launch::rank_ranges({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
}

TEST(DoctorLinks, NamesSlowPairsAndTheHostTheyShare) {
  const std::vector<launch::LinkMeasure> links = {
      {"h1", "h2", 10, 1.0}, {"h1", "h3", 300, 0.0024}, {"h2", "h3", 300, 0.0025}};
  const std::string slow = launch::slow_links(links, 4, 0);
  EXPECT_NE(slow.find("slow links: h1 <-> h3 0.0024 GB/s, h2 <-> h3 0.0025 GB/s"), std::string::npos) << slow;
  EXPECT_NE(slow.find("every slow pair involves h3"), std::string::npos) << slow;
  EXPECT_EQ(launch::slow_links({{"h1", "h2", 10, 1.0}}, 4, 0), "");
  EXPECT_NE(launch::slow_links({{"h1", "h2", 10, 1.0}}, 4, 5).find("h1 <-> h2"), std::string::npos);
}

TEST(DoctorLinks, ClusterFileTakesTheSlowestPair) {
  const std::vector<launch::LinkMeasure> links = {{"h1", "h2", 12, 2.0}, {"h1", "h3", 30, 0.5}};
  const std::string updated = launch::cluster_file_with_links(
      "gpus_per_node = 8\nnodes = 4\ninter_node_gbps = 25\npeak_tflops = 900\n", links, 3, 1, 0, 0);
  EXPECT_NE(updated.find("gpus_per_node = 8\n"), std::string::npos);
  EXPECT_NE(updated.find("nodes = 3 "), std::string::npos) << updated;
  EXPECT_NE(updated.find("inter_node_gbps = 0.5 "), std::string::npos) << updated;
  EXPECT_NE(updated.find("alpha_us = 30 "), std::string::npos) << updated;
  EXPECT_EQ(updated.find("inter_node_gbps = 25"), std::string::npos);
  const std::string fresh = launch::cluster_file_with_links("", links, 3, 2, 80, 4);
  for (const char* key : {"gpus_per_node = 2", "nodes = 3", "gpu_memory_gb = 4.0", "peak_gflops = 80.0",
                          "intra_node_gbps", "inter_node_gbps = 0.5"})
    EXPECT_NE(fresh.find(key), std::string::npos) << key << "\n" << fresh;
}

TEST(FlightDivergence, NamesTheHostsOfRanksWaitingOnEachOther) {
  auto rank = [](int r, const char* host, bool finished) {
    parallel::FlightEntry e{"all_reduce(sum)", "dp_cp[0]", 6, 8, 10.0, finished ? 11.0 : -1.0, 0};
    return std::optional<parallel::RankFlight>(parallel::RankFlight{r, host, 1.0, {e}});
  };
  const std::string both = parallel::describe_divergence({rank(0, "h1", false), rank(1, "h2", false)}, 20);
  EXPECT_NE(both.find("all 2 ranks are inside it and none has finished"), std::string::npos) << both;
  EXPECT_NE(both.find("check the network between hosts h1 h2"), std::string::npos) << both;
  const std::string one_host = parallel::describe_divergence({rank(0, "h1", false), rank(1, "h1", false)}, 20);
  EXPECT_EQ(one_host.find("network between hosts"), std::string::npos) << one_host;
  const std::string one_done = parallel::describe_divergence({rank(0, "h1", false), rank(1, "h2", true)}, 20);
  EXPECT_EQ(one_done.find("none has finished"), std::string::npos) << one_done;
}

}  // namespace
}  // namespace brt
