// Heartbeats (parallel/health/heartbeat.h, launch/supervise/heartbeat_watch.h): the line's
// format and parse, the emitter's beats and last line, the monitor's activity, the launcher's
// command with the variable forwarded; and brt-dist launch's supervisor on stand-in launchers
// (sh): a rank silent past the timeout ends the job with 124 and one line naming its rank,
// host, step and activity; the beats stay out of the log; a rank that said done, or never beat,
// is not judged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "launch/supervise/heartbeat_watch.h"
#include "launch/supervise/host_list.h"
#include "launch/supervise/supervisor.h"
#include "parallel/health/heartbeat.h"
#include "parallel/health/job_monitor.h"

namespace brt::launch {
namespace {

using parallel::HeartbeatReport;

TEST(Heartbeat, LinesRoundTripAndAreFoundAfterATag) {
  const HeartbeatReport r{3, "node-7", 12, "checkpoint save: writing /model/embed", false};
  const std::string line = parallel::format_heartbeat(r);
  EXPECT_EQ(line, "brt-dist heartbeat: world rank 3 (host node-7) step 12: checkpoint save: writing /model/embed");
  for (const std::string& text : {line, "[1,3]<stderr>:" + line}) {
    const auto p = parallel::parse_heartbeat(text);
    ASSERT_TRUE(p) << text;
    EXPECT_EQ(p->world_rank, 3);
    EXPECT_EQ(p->host, "node-7");
    EXPECT_EQ(p->step, 12);
    EXPECT_EQ(p->activity, r.activity);
    EXPECT_FALSE(p->done);
  }
  const auto done = parallel::parse_heartbeat(parallel::format_heartbeat({3, "node-7", -1, "", true}));
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->done);
  EXPECT_FALSE(parallel::parse_heartbeat("brt-dist: timeout on world rank 0 (host h1)"));
  EXPECT_FALSE(parallel::parse_heartbeat(std::string(parallel::kHeartbeatMarker) + "garbled"));
  EXPECT_EQ(parallel::format_heartbeat({0, "h", 1, std::string(1000, 'x') + "\n", false}).size(),
            std::string("brt-dist heartbeat: world rank 0 (host h) step 1: ").size() + 300);
}

TEST(Heartbeat, TheIntervalVariableIsCheckedNamingIt) {
  EXPECT_FALSE(parallel::heartbeat_interval_from(nullptr));
  EXPECT_FALSE(parallel::heartbeat_interval_from(""));
  EXPECT_DOUBLE_EQ(*parallel::heartbeat_interval_from("2.5"), 2.5);
  for (const char* bad : {"x", "0", "-1", "1e9", "3s"}) {
    try {
      parallel::heartbeat_interval_from(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("BRT_HEARTBEAT_S"), std::string::npos) << e.what();
    }
  }
}

// The emitter beats at once and every interval from its own thread, the probe's step and
// activity in each line, and writes "done" as it is destroyed.
TEST(Heartbeat, TheEmitterBeatsEveryIntervalAndSaysDone) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  {
    int64_t calls = 0;
    parallel::HeartbeatEmitter emitter({2, "hx"}, 0.05, [&calls](int64_t& step, std::string& activity) {
      step = ++calls;
      activity = "computing";
    }, fds[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  ::close(fds[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  ::close(fds[0]);
  std::istringstream lines(text);
  std::vector<HeartbeatReport> beats;
  for (std::string line; std::getline(lines, line);) {
    const auto r = parallel::parse_heartbeat(line);
    ASSERT_TRUE(r) << line;
    beats.push_back(*r);
  }
  ASSERT_GE(beats.size(), 4u) << text;  // ~6 beats in 0.3 s at 0.05 s, and the last line
  EXPECT_EQ(beats.front().step, 1);
  EXPECT_EQ(beats.front().activity, "computing");
  EXPECT_TRUE(beats.back().done);
  for (size_t i = 0; i + 1 < beats.size(); ++i) EXPECT_FALSE(beats[i].done);
}

TEST(Heartbeat, TheMonitorReportsItsNewestOpenGuard) {
  parallel::JobMonitor monitor({0, "testhost"}, 1);
  EXPECT_EQ(monitor.activity(), "computing");
  EXPECT_EQ(monitor.step(), -1);
  monitor.note_step(7);
  EXPECT_EQ(monitor.step(), 7);
  {
    auto guard = monitor.guard("checkpoint save");
    guard.phase("writing /model/embed");
    EXPECT_EQ(monitor.activity(), "checkpoint save: writing /model/embed");
  }
  EXPECT_EQ(monitor.activity(), "computing");
}

TEST(Heartbeat, TheWatchJudgesOnlyRanksThatBeatAndForgivesItsOwnPause) {
  using Clock = HeartbeatWatch::Clock;
  HeartbeatWatch watch(5);
  const auto t0 = Clock::now();
  EXPECT_FALSE(watch.silent(t0 + std::chrono::seconds(100)));  // nobody beat: nobody judged
  watch.beat({0, "a", 1, "computing", false}, t0);
  watch.beat({1, "b", 1, "checkpoint save", false}, t0);
  EXPECT_FALSE(watch.silent(t0 + std::chrono::seconds(4)));
  watch.beat({0, "a", 2, "computing", false}, t0 + std::chrono::seconds(4));
  const auto silent = watch.silent(t0 + std::chrono::seconds(6));
  ASSERT_TRUE(silent);
  EXPECT_NE(silent->text.find("world rank 1 (host b) has sent no heartbeat for 6.0 s"), std::string::npos) << silent->text;
  EXPECT_NE(silent->text.find("in step 1: checkpoint save"), std::string::npos) << silent->text;
  EXPECT_EQ(silent->host, "b");
  EXPECT_EQ(silent->world_rank, 1);
  EXPECT_EQ(silent->last_heard, t0);
  watch.forgive(t0 + std::chrono::seconds(6));  // the supervisor was stopped
  EXPECT_FALSE(watch.silent(t0 + std::chrono::seconds(10)));
  watch.beat({1, "b", -1, "", true}, t0 + std::chrono::seconds(10));
  watch.beat({0, "a", -1, "", true}, t0 + std::chrono::seconds(10));
  EXPECT_EQ(watch.watched(), 0u);
  EXPECT_FALSE(watch.silent(t0 + std::chrono::seconds(100)));
}

TEST(Heartbeat, TheVariableIsForwardedByEachLauncher) {
  std::string note;
  using V = std::vector<std::string>;
  EXPECT_EQ(with_variable_forwarded({"mpirun", "-np", "2", "brt-dist"}, "BRT_HEARTBEAT_S", note),
            (V{"mpirun", "-x", "BRT_HEARTBEAT_S", "-np", "2", "brt-dist"}));
  EXPECT_EQ(with_variable_forwarded({"/usr/bin/mpiexec", "-n", "2", "a"}, "BRT_HEARTBEAT_S", note),
            (V{"/usr/bin/mpiexec", "-x", "BRT_HEARTBEAT_S", "-n", "2", "a"}));
  EXPECT_TRUE(note.empty());
  EXPECT_EQ(with_variable_forwarded({"srun", "-N", "2", "a"}, "BRT_HEARTBEAT_S", note), (V{"srun", "-N", "2", "a"}));
  EXPECT_EQ(with_variable_forwarded({"srun", "--export=ALL,X=1", "a"}, "BRT_HEARTBEAT_S", note), (V{"srun", "--export=ALL,X=1", "a"}));
  EXPECT_EQ(with_variable_forwarded({"srun", "--export=NONE", "a"}, "BRT_HEARTBEAT_S", note), (V{"srun", "--export=BRT_HEARTBEAT_S", "a"}));
  EXPECT_EQ(with_variable_forwarded({"srun", "--export", "PATH,HOME", "a"}, "BRT_HEARTBEAT_S", note),
            (V{"srun", "--export", "PATH,HOME,BRT_HEARTBEAT_S", "a"}));
  EXPECT_EQ(with_variable_forwarded({"brt-dist", "train", "c.toml"}, "BRT_HEARTBEAT_S", note), (V{"brt-dist", "train", "c.toml"}));
  EXPECT_TRUE(note.empty());
  const V env_list = {"mpirun", "--mca", "mca_base_env_list", "A;B", "a"};
  EXPECT_EQ(with_variable_forwarded(env_list, "BRT_HEARTBEAT_S", note), env_list);
  EXPECT_NE(note.find("mca_base_env_list"), std::string::npos) << note;
}

// supervise() with its stderr (the job's log) captured in a file.
struct Supervised {
  int status = 0;
  double seconds = 0;
  std::string log;
};
Supervised supervise_captured(const std::string& script, double heartbeat_timeout_s) {
  SupervisorOptions o;
  o.command = {"/bin/sh", "-c", script};
  o.grace_s = 0.5;
  o.kill_after_s = 1;
  o.heartbeat_timeout_s = heartbeat_timeout_s;
  char path[] = "/tmp/brt_supervised_XXXXXX";
  const int fd = ::mkstemp(path);
  const int saved = ::dup(2);
  std::fflush(stderr);
  ::dup2(fd, 2);
  Supervised s;
  const auto t0 = std::chrono::steady_clock::now();
  s.status = supervise(o);
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  s.log.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  ::unlink(path);
  return s;
}

std::string beat(int rank, int step, const std::string& activity) {
  return "echo '" + parallel::format_heartbeat({rank, "h" + std::to_string(rank + 1), step, activity, false}) + "' >&2; ";
}

TEST(SupervisorHeartbeat, ASilentRankEndsTheJobNamingItsRankHostStepAndActivity) {
  // Rank 0 beats on; rank 1 beats twice, in a save, then falls silent (a stopped process).
  const std::string script = "test \"$BRT_HEARTBEAT_S\" = 0.333333 || { echo \"interval $BRT_HEARTBEAT_S\" >&2; exit 3; }; " +
                             beat(1, 4, "checkpoint save: writing /model/embed") + "echo 'a log line' >&2; " +
                             "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do " + beat(0, 5, "computing") +
                             "sleep 0.25; done";
  const Supervised s = supervise_captured(script, 2);
  EXPECT_EQ(s.status, 124) << s.log;
  EXPECT_LT(s.seconds, 4.5) << s.log;  // 2 s of silence (+ a loop turn), not the 5 s script
  EXPECT_NE(s.log.find("brt-dist launch: world rank 1 (host h2) has sent no heartbeat for 2."), std::string::npos) << s.log;
  EXPECT_NE(s.log.find("it last reported in step 4: checkpoint save: writing /model/embed; ending the job (exit 124)"),
            std::string::npos) << s.log;
  EXPECT_NE(s.log.find("a log line\n"), std::string::npos) << s.log;
  EXPECT_EQ(s.log.find(parallel::kHeartbeatMarker), std::string::npos) << "heartbeats leaked into the log:\n" << s.log;
}

TEST(SupervisorHeartbeat, ARankThatSaidDoneOrNeverBeatIsNotJudged) {
  const Supervised done = supervise_captured(beat(0, 1, "computing") + "echo '" +
                                                 parallel::format_heartbeat({0, "h1", -1, "", true}) +
                                                 "' >&2; sleep 2.5; exit 0",
                                             1);
  EXPECT_EQ(done.status, 0) << done.log;
  const Supervised never = supervise_captured("sleep 2.5; exit 0", 1);
  EXPECT_EQ(never.status, 0) << never.log;
  // A beat behind another rank's unfinished line stays in the log with it, and still counts.
  const Supervised merged = supervise_captured("printf 'partial ' >&2; " + beat(0, 1, "computing") + "exit 0", 1);
  EXPECT_EQ(merged.status, 0);
  EXPECT_NE(merged.log.find("partial brt-dist heartbeat: world rank 0"), std::string::npos) << merged.log;
  // Off: the variable is not set.
  const Supervised off = supervise_captured("test -z \"$BRT_HEARTBEAT_S\"", 0);
  EXPECT_EQ(off.status, 0) << off.log;
}

}  // namespace
}  // namespace brt::launch
