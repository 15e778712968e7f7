// MPI's lifetime as an object: MPI_Init_thread in the constructor (after refusing a plain
// srun without PMI), MPI_Finalize in the destructor. Plus run_mpi_main(), which turns an
// exception escaping the program into a message naming the rank and a clean job end.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>

#include "parallel/health/heartbeat.h"
#include "parallel/health/job_monitor.h"

namespace brt::parallel {

class MpiSession {
 public:
  // Requests MPI_THREAD_MULTIPLE (Open MPI 4.1 provides it), so a communication thread can
  // be added later; accepts whatever level the library grants and reports it.
  MpiSession(int* argc, char*** argv, int requested_thread_level = MPI_THREAD_MULTIPLE);
  // MPI_Finalize. If an exception is unwinding through here, MPI_Finalize could hang waiting
  // for ranks that never arrive, so the job is aborted instead.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int thread_level() const { return thread_level_; }
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  const std::string& host() const { return host_; }
  // This process's watchdog and flight recorder (job_monitor.h); commands configure its
  // timeout and flight directory from their config and pass it to their communicators.
  JobMonitor& monitor() { return *monitor_; }
  // Whether this process beats to `brt-dist launch` (parallel/health/heartbeat.h).
  bool heartbeat() const { return heartbeat_ != nullptr; }
  // A duplicate of MPI_COMM_WORLD that only run_mpi_main's error agreement uses.
  MPI_Comm error_comm() const { return error_comm_; }

 private:
  void start_heartbeat();
  int thread_level_ = MPI_THREAD_SINGLE;
  int world_rank_ = 0;
  int world_size_ = 1;
  std::string host_;
  MPI_Comm error_comm_ = MPI_COMM_NULL;
  std::unique_ptr<JobMonitor> monitor_;
  std::unique_ptr<HeartbeatEmitter> heartbeat_;  // under brt-dist launch (kHeartbeatEnv set)
};

// Runs body(session) inside an MpiSession and returns its exit status. An exception escaping
// body is the command's error, printed as "<program>: error: <what>" on stderr:
//  - one process: printed, status 1 (2 for a LaunchRefused — a LayoutError, a preflight refusal
//    (launch/preflight/preflight.h) — or a UsageError), MPI finalized normally;
//  - several: the ranks that failed wait up to kErrorAgreementSeconds (at most half the
//    monitor's timeout) for the others. If every
//    rank failed (a bad config, a missing or damaged file: every rank checks the same thing),
//    world rank 0 prints the distinct messages once and every rank finalizes: status 1 (2 for
//    LaunchRefused or UsageError), no MPI abort. Otherwise the error is on some ranks only, the others may be
//    blocked in a collective: the monitor's fail() reports it with the flight records, naming
//    the rank and host, and aborts the job (status 1).
inline constexpr double kErrorAgreementSeconds = 10.0;
int run_mpi_main(int argc, char** argv, const std::function<int(MpiSession&)>& body,
                 const std::string& program = "brt-dist");

}  // namespace brt::parallel
