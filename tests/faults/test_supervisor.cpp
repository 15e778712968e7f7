// brt-dist launch's supervisor (launch/supervise/supervisor.h) on stand-in launchers (sh): the
// abort report parsed from a line; a launcher that hangs after one ended after the grace with the
// reported status; a launcher's own status (and 128 + N for a signal) passed through.
#include <gtest/gtest.h>

#include <chrono>

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
