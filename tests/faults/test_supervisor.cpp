// brt-dist launch's supervisor (launch/supervise/supervisor.h) on stand-in launchers (sh): the
// abort report parsed from a line; a launcher that hangs after one ended after the grace with the
// reported status; a launcher's own status (and 128 + N for a signal) passed through.
#include <gtest/gtest.h>

#include <chrono>

#include "launch/supervise/host_list.h"
#include "launch/supervise/job_signs.h"
#include "launch/supervise/supervisor.h"
#include "parallel/health/comm_error.h"

namespace brt::launch {
namespace {

TEST(Supervisor, ParsesTheAbortMarkerAnywhereInALine) {
  const auto r = parse_abort_report(std::string("[h1:123] ") + parallel::kJobAbortMarker +
                                    "world rank 3 (host node-7.cluster), exit status 124");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->world_rank, 3);
  EXPECT_EQ(r->host, "node-7.cluster");
  EXPECT_EQ(r->exit_code, 124);
  EXPECT_FALSE(parse_abort_report("brt-dist: timeout on world rank 0 (host h1)"));
  EXPECT_FALSE(parse_abort_report(std::string(parallel::kJobAbortMarker) + "garbled"));
}

SupervisorOptions shell(const std::string& script, double grace_s = 0.5) {
  SupervisorOptions o;
  o.command = {"/bin/sh", "-c", script};
  o.grace_s = grace_s;
  o.kill_after_s = 1;
  return o;
}

TEST(Supervisor, EndsALauncherThatHangsAfterAnAbortReportWithTheReportedStatus) {
  const auto t0 = std::chrono::steady_clock::now();
  // A stand-in for a hung mpirun: reports, then ignores SIGTERM (SIGKILL follows).
  const int status = supervise(shell(std::string("trap '' TERM; echo '") + parallel::kJobAbortMarker +
                                     "world rank 0 (host h1), exit status 124' >&2; sleep 30"));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(status, 124);
  EXPECT_LT(seconds, 10.0);  // grace 0.5 s + SIGKILL 1 s after SIGTERM, not the 30 s sleep
}

TEST(Supervisor, PassesTheLauncherStatusThrough) {
  EXPECT_EQ(supervise(shell("exit 0")), 0);
  EXPECT_EQ(supervise(shell("exit 75")), 75);
  EXPECT_EQ(supervise(shell("kill -KILL $$")), 128 + 9);
  // An abort the launcher ends by itself keeps the launcher's own status.
  EXPECT_EQ(supervise(shell(std::string("echo '") + parallel::kJobAbortMarker +
                            "world rank 1 (host h2), exit status 124' >&2; exit 124", 20)),
            124);
  EXPECT_EQ(supervise(shell("exec /nonexistent/launcher")), 127);
}

}  // namespace
}  // namespace brt::launch

namespace brt::launch {
namespace {

// The signs in the job's lines: the host a fault was on (the strongest sign wins), the step
// the run resumed from, its newest save, and its first new step.
TEST(JobSigns, ReadTheFaultHostAndTheRunsProgress) {
  JobSigns s;
  const auto t = JobSigns::Clock::now();
  EXPECT_FALSE(s.line("resumed from c/ckpt-00000003.h5 at step 3 (tokens 384)", t));
  EXPECT_EQ(s.resumed_step(), 3);
  EXPECT_FALSE(s.line("step      3/8 | loss 4.1", t));  // not past the resume
  EXPECT_TRUE(s.line("step      4/8 | loss 4.0 | bits/tok 5.8", t));
  EXPECT_EQ(s.first_step(), 4);
  EXPECT_FALSE(s.line("step      5/8 | loss 4.0", t));
  s.line("checkpoint saved: c/ckpt-00000005.h5 (0.001 GB in 0.01 s)", t);
  EXPECT_EQ(s.saved_step(), 5);
  EXPECT_FALSE(s.first_sign());
  s.line("Connection to h2 closed by remote host.", t);
  EXPECT_EQ(s.fault_host(), "h2");
  ASSERT_TRUE(s.first_sign());
  s.line("mpirun noticed that process rank 1 with PID 0 on node h1 exited on signal 9 (Killed).", t);
  EXPECT_EQ(s.fault_host(), "h1");
  s.line("  Remote daemon: [[1234,0],2] on node h3", t);
  EXPECT_EQ(s.fault_host(), "h3");
  s.blame("h4", "world rank 3 (host h4) has sent no heartbeat", t);
  EXPECT_EQ(s.fault_host(), "h4");
  s.line("  Remote daemon: [[1234,0],1] on node h1", t);
  EXPECT_EQ(s.fault_host(), "h4");  // the silence stays the strongest sign
  JobSigns timeout;
  timeout.line("brt::parallel: collective timeout on world rank 0 (host h1): all_reduce ... Still waiting for "
               "world rank 1 (host h2): dead, stalled", t);
  EXPECT_EQ(timeout.fault_host(), "h2");
  JobSigns fresh;
  fresh.line("no checkpoint in c: starting from step 0", t);
  EXPECT_EQ(fresh.resumed_step(), 0);
  EXPECT_TRUE(fresh.line("[1,0]<stdout>:step      1/8 | loss 4.0", t));
}

}  // namespace
}  // namespace brt::launch

namespace brt::launch {
namespace {

// mpirun's host list and rank count read and rewritten for a relaunch; an override made last.
TEST(HostList, ReadAndRewriteALaunchersHostsAndRanks) {
  EXPECT_EQ(parse_host_list("h1:2,h2"), (std::vector<HostSlots>{{"h1", 2}, {"h2", 1}}));
  EXPECT_THROW(parse_host_list("h1,,h2"), std::invalid_argument);
  EXPECT_THROW(parse_host_list("h1:x"), std::invalid_argument);
  const std::vector<std::string> cmd = {"mpirun", "-x", "A", "--host", "h1:1,h2:1", "-np", "2", "brt-dist", "train",
                                        "c.toml", "train.grad_accum=1"};
  const auto hosts = find_command_hosts(cmd);
  ASSERT_TRUE(hosts);
  EXPECT_EQ(hosts->hosts.size(), 2u);
  const auto ranks = find_command_ranks(cmd);
  ASSERT_TRUE(ranks);
  EXPECT_EQ(ranks->ranks, 2);
  auto next = with_command_hosts(cmd, *hosts, {{"h1", 1}});
  next = with_command_ranks(next, *ranks, 1);
  next = with_last_override(next, "train.grad_accum", "2");
  EXPECT_EQ(next, (std::vector<std::string>{"mpirun", "-x", "A", "--host", "h1:1", "-np", "1", "brt-dist", "train",
                                            "c.toml", "train.grad_accum=2"}));
  const std::vector<std::string> eq = {"mpiexec", "--host=a:4", "--np=4", "x"};
  ASSERT_TRUE(find_command_hosts(eq));
  EXPECT_EQ(with_command_hosts(eq, *find_command_hosts(eq), {{"b", 4}})[1], "--host=b:4");
  EXPECT_EQ(with_command_ranks(eq, *find_command_ranks(eq), 2)[2], "--np=2");
  EXPECT_FALSE(find_command_hosts({"srun", "-N", "2", "brt-dist"}));
  EXPECT_FALSE(find_command_ranks({"mpirun", "--host", "a", "x"}));
  // srun's size (its options only: the program's words are not srun's) and its exclusions.
  const std::vector<std::string> srun = {"srun", "-N", "4", "--ntasks-per-node=2", "--mpi=pmix", "/bin/brt-dist",
                                         "train", "-n", "9"};
  const auto shape = find_srun_shape(srun);
  ASSERT_TRUE(shape);
  EXPECT_EQ(shape->nodes, 4);
  EXPECT_EQ(shape->ranks(), 8);
  EXPECT_EQ(with_srun_size(srun, *shape, 3, 6)[2], "3");
  const std::vector<std::string> tasks = {"srun", "--nodes=2", "--ntasks=4", "a"};
  EXPECT_EQ(with_srun_size(tasks, *find_srun_shape(tasks), 1, 2),
            (std::vector<std::string>{"srun", "--nodes=1", "--ntasks=2", "a"}));
  std::string list;
  EXPECT_EQ(*with_srun_exclude({"srun", "-N", "2", "a"}, "h2", list),
            (std::vector<std::string>{"srun", "--exclude=h2", "-N", "2", "a"}));
  EXPECT_EQ(*with_srun_exclude({"srun", "--exclude=h2", "a"}, "h3", list),
            (std::vector<std::string>{"srun", "--exclude=h2,h3", "a"}));
  EXPECT_EQ(list, "h2,h3");
  EXPECT_FALSE(with_srun_exclude({"mpirun", "a"}, "h3", list));
}

}  // namespace
}  // namespace brt::launch
