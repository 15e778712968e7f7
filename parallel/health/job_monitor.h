// A deadline on every wait, and the report when one passes.
//
// Collectives time out by themselves (CommOptions::timeout, parallel/mpi/mpi_ops.cpp), but some
// waits happen inside calls we do not control: HDF5's collective MPI-IO writes and opens, MPI
// calls in the checkpoint and data code, a hung file system. A JobMonitor runs a watchdog
// thread; code enters such a wait through a Guard ("checkpoint save", phase "writing
// /model/layers.3.mlp.w1") and a guard open longer than the timeout ends the job with a report
// naming the rank, host and operation. Every fatal end (a guard or collective timeout, an
// exception on one rank) goes through fail(): this rank writes its flight record
// (flight_recorder.h), asks the other ranks to write theirs (a request file their watchdogs
// poll), compares what arrived within a few seconds, prints one report and aborts the job.
// One per process, owned by its MpiSession, passed explicitly to what needs it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parallel/health/comm_error.h"
#include "parallel/health/flight_recorder.h"

namespace brt::parallel {

struct MonitorSettings {
  double timeout_s = 600;                     // a guard open longer than this ends the job
  std::filesystem::path flight_dir = "flight";  // <checkpoint.dir or cwd>/flight
  std::string timeout_key = "train.timeout_s";  // named in the report
};

class JobMonitor {
 public:
  JobMonitor(RankLocation self, int world_size, MonitorSettings settings = {});
  ~JobMonitor();
  JobMonitor(const JobMonitor&) = delete;
  JobMonitor& operator=(const JobMonitor&) = delete;

  void configure(const MonitorSettings& settings);
  MonitorSettings settings() const;
  FlightRecorder& recorder() { return recorder_; }
  const RankLocation& self() const { return self_; }

  // An operation under the deadline. phase() starts its next step (the deadline restarts: a
  // save of many tensors may take longer than the timeout, no single write may). Movable;
  // ends the operation when destroyed. Every open guard is watched, from any thread.
  class Guard {
   public:
    Guard() = default;
    Guard(Guard&& other) noexcept;
    Guard& operator=(Guard&& other) noexcept;
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard();
    void phase(const std::string& what);
    // The next step is this rank's own work (training a tokenizer, encoding a shard), not a
    // wait: recorded, but not under the deadline (a peer waiting for it has its own).
    void working(const std::string& what);

   private:
    friend class JobMonitor;
    Guard(JobMonitor* monitor, uint64_t slot) : monitor_(monitor), slot_(slot) {}
    JobMonitor* monitor_ = nullptr;
    uint64_t slot_ = 0;
  };
  Guard guard(const std::string& operation);

  // What this rank does now, for its heartbeat (parallel/health/heartbeat.h): the newest open
  // guard ("checkpoint save: writing /model/embed"), else the newest unfinished collective
  // ("all_reduce(sum) on dp_cp[0] #41"), else "computing". Thread-safe.
  std::string activity() const;
  // The training step begun last (from 1; -1 before the first), for the heartbeat.
  void note_step(int64_t step) { step_.store(step); }
  int64_t step() const { return step_.load(); }

  // Ends the job: flight records written and compared, `report` and the comparison printed on
  // stderr, MPI_Abort with exit_code (124 for timeouts). Called once; a second caller waits for
  // the first to end the process.
  [[noreturn]] void fail(const std::string& report, int exit_code);

 private:
  struct Open {
    uint64_t slot = 0;
    std::string operation, phase;
    double since = 0;  // wall seconds of the last phase change
    uint64_t flight = 0;
    bool watched = true;  // false while this rank works on its own (Guard::working)
  };
  void watch();
  void end_guard(uint64_t slot);
  void set_phase(uint64_t slot, const std::string& what, bool watched);
  void answer_dump_request();
  std::filesystem::path own_record() const;
  void write_own_record(double request) const;

  RankLocation self_;
  int world_size_;
  FlightRecorder recorder_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  MonitorSettings settings_;
  std::vector<Open> open_;
  uint64_t next_slot_ = 1, local_sequence_ = 0;
  double created_ = 0, answered_request_ = 0;
  bool stopping_ = false;
  std::atomic<bool> failing_{false};
  std::atomic<int64_t> step_{-1};
  std::thread watchdog_;
};

}  // namespace brt::parallel
