// The flight recorder's ring, its JSONL form, the comparison of ranks' records, and the
// monitor's deadline (parallel/health/flight_recorder.h, parallel/health/job_monitor.h).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "parallel/health/flight_recorder.h"
#include "parallel/health/job_monitor.h"

namespace brt::parallel {
namespace {

TEST(FlightRecorder, KeepsTheLast64OperationsInOrder) {
  FlightRecorder r;
  std::vector<uint64_t> tokens;
  for (int i = 0; i < 100; ++i) tokens.push_back(r.begin("all_reduce(sum)", "world", uint64_t(i), 4 * i));
  r.end(tokens[99]);
  r.end(tokens[10]);  // long overwritten: ignored
  const auto e = r.entries();
  ASSERT_EQ(e.size(), FlightRecorder::kCapacity);
  EXPECT_EQ(e.front().sequence, 36u);
  EXPECT_EQ(e.back().sequence, 99u);
  EXPECT_GE(e.back().end, e.back().start);
  EXPECT_LT(e[0].end, 0);
  // Local operations have their own, smaller ring: a save's many phases cannot push the
  // collectives out.
  for (int i = 0; i < 40; ++i) r.end(r.begin("checkpoint save: writing /model/x", kLocalGroup, uint64_t(i), 0));
  const auto mixed = r.entries();
  EXPECT_EQ(mixed.size(), FlightRecorder::kCapacity + FlightRecorder::kLocalCapacity);
  EXPECT_EQ(mixed.front().sequence, 36u);
  EXPECT_EQ(mixed.back().group, kLocalGroup);
  EXPECT_EQ(mixed.back().sequence, 39u);
}

TEST(FlightRecorder, JsonlRoundTrip) {
  FlightRecorder r;
  r.end(r.begin("broadcast(root 0)", "tp[1]", 7, 128));
  r.begin("checkpoint save: writing /model/\"odd\" name", kLocalGroup, 0, 0);
  const auto parsed = parse_flight_jsonl(flight_jsonl(r.entries(), {3, "node-7"}, 8, 123.5));
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->rank, 3);
  EXPECT_EQ(parsed->host, "node-7");
  EXPECT_DOUBLE_EQ(parsed->request, 123.5);
  ASSERT_EQ(parsed->entries.size(), 2u);
  EXPECT_EQ(parsed->entries[0].op, "broadcast(root 0)");
  EXPECT_EQ(parsed->entries[0].group, "tp[1]");
  EXPECT_EQ(parsed->entries[0].sequence, 7u);
  EXPECT_EQ(parsed->entries[0].bytes, 128);
  EXPECT_EQ(parsed->entries[1].op, "checkpoint save: writing /model/\"odd\" name");
  EXPECT_LT(parsed->entries[1].end, 0);
  EXPECT_FALSE(parse_flight_jsonl("not a record").has_value());
}

RankFlight rank_with(int rank, std::vector<FlightEntry> entries) {
  return {rank, "h" + std::to_string(rank), 1.0, std::move(entries)};
}
FlightEntry op(const char* name, uint64_t seq, int64_t bytes, bool finished) {
  return {name, "dp_cp[0]", seq, bytes, 10.0, finished ? 11.0 : -1.0, 0};
}

TEST(FlightRecorder, NamesTheFirstSequenceNumberWhereRanksDiverge) {
  // Ranks 0 and 1 agree up to #4; at #5 rank 0 all-reduces and rank 1 broadcasts; rank 2
  // wrote nothing.
  std::vector<std::optional<RankFlight>> ranks(3);
  ranks[0] = rank_with(0, {op("all_reduce(sum)", 3, 8, true), op("all_reduce(sum)", 4, 8, true),
                           op("all_reduce(sum)", 5, 8, false)});
  ranks[1] = rank_with(1, {op("all_reduce(sum)", 4, 8, true), op("broadcast(root 0)", 5, 8, false)});
  const std::string text = describe_divergence(ranks, 20.0);
  EXPECT_NE(text.find("no flight record from world rank 2"), std::string::npos) << text;
  EXPECT_NE(text.find("group 'dp_cp[0]': the ranks diverge at #5"), std::string::npos) << text;
  EXPECT_NE(text.find("world rank 0: all_reduce(sum) (8 bytes), unfinished after 10.0 s"), std::string::npos) << text;
  EXPECT_NE(text.find("world rank 1: broadcast(root 0) (8 bytes), unfinished"), std::string::npos) << text;
  // One rank behind: rank 1 never reached #6.
  ranks[1] = rank_with(1, {op("all_reduce(sum)", 5, 8, true)});
  ranks[0] = rank_with(0, {op("all_reduce(sum)", 5, 8, true), op("all_reduce(sum)", 6, 8, false)});
  const std::string behind = describe_divergence(ranks, 20.0);
  EXPECT_NE(behind.find("diverge at #6"), std::string::npos) << behind;
  EXPECT_NE(behind.find("world rank 1: did not reach it (last #5)"), std::string::npos) << behind;
}

TEST(JobMonitorDeathTest, AGuardOpenPastTheTimeoutEndsTheProcessNamingIt) {
  EXPECT_EXIT(
      {
        MonitorSettings s;
        s.timeout_s = 0.3;
        s.flight_dir = testing::TempDir() + "/flight-test";
        JobMonitor monitor({0, "testhost"}, 1, s);
        auto guard = monitor.guard("checkpoint save");
        guard.phase("writing /model/embed");
        std::this_thread::sleep_for(std::chrono::seconds(5));
        std::exit(0);
      },
      testing::ExitedWithCode(124),
      "timeout on world rank 0 \\(host testhost\\): checkpoint save: writing /model/embed has not finished");
}

TEST(JobMonitor, WorkAndFinishedGuardsAreNotTimedOut) {
  MonitorSettings s;
  s.timeout_s = 0.2;
  s.flight_dir = testing::TempDir() + "/flight-test2";
  JobMonitor monitor({0, "testhost"}, 1, s);
  {
    auto guard = monitor.guard("prepare");
    guard.working("encoding a shard");  // this rank's own work: no deadline
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // nothing open
  const auto entries = monitor.recorder().entries();
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].op, "prepare: encoding a shard");
  EXPECT_GE(entries[1].end, entries[1].start);
}

}  // namespace
}  // namespace brt::parallel
