// `brt-dist launch`: a supervisor around the job's launcher (mpirun, srun, or brt-dist itself),
// as torchrun is to PyTorch (docs/reliability.md "Launch topologies"). It exists for what the
// launcher cannot do on its own:
//  - end the job after an abort: a rank that gives up (a timeout, an error on one rank) prints
//    parallel::kJobAbortMarker and calls MPI_Abort; mpirun should then kill every rank, but
//    with a host unreachable it can wait forever ("abort is already in progress"), notably when
//    it runs on a login node outside the job's hosts, where no rank's abort helper
//    (parallel/health/abort_fallback.h) can end it. The supervisor reads the launcher's stderr, and
//    `grace_s` after the first abort report ends the launcher's process group (SIGTERM, then
//    SIGKILL) and exits with the reported status;
//  - a clean stop: SIGINT, SIGTERM, SIGHUP or SIGUSR1 (a batch script's "time is nearly up") to
//    the supervisor becomes SIGUSR1 to the launcher,
//    which mpirun and srun forward to every rank as the stop request (the ranks save and exit
//    75, so the job exits 75 as one process does; mpirun given SIGINT itself kills the ranks
//    and exits 1). A second signal sends SIGTERM to the launcher's group, a third SIGKILL;
//  - no orphans: the launcher gets SIGTERM if the supervisor dies (PR_SET_PDEATHSIG);
//  - a silent rank: each rank beats on stderr every few seconds (parallel/health/heartbeat.h;
//    the supervisor sets and forwards the interval, launch/supervise/heartbeat_watch.h) and
//    the supervisor takes those lines out of the log; a rank silent for heartbeat_timeout_s (a
//    stopped process, a dead host, a cut link) ends the job with exit 124 and one line naming
//    its rank, host and last reported step and activity, long before train.timeout_s would.
// It calls no MPI: it is the launcher's parent, not a rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launch/supervise/host_list.h"

namespace brt::launch {

// A smaller data-parallel size after a fault without a spare (--min-dp): what the launched
// `brt-dist train` runs, read from its config by the command line (launch/cli).
struct ShrinkOptions {
  int min_dp = 0;                 // --min-dp (0: never shrink)
  int replica_ranks = 1;          // train.tp x train.cp: ranks per data-parallel replica
  int batch = 1;                  // train.batch
  int64_t global_streams = 0;     // train.batch x train.grad_accum x data-parallel ranks, kept
  int ranks = 0;                  // the launch's ranks (mpirun -np, or its host list's slots)
};

// brt-dist launch --restarts (launch/supervise/restarts.h).
struct RestartOptions {
  int restarts = 0;                  // --restarts N (0: none)
  int no_progress_limit = 3;         // --no-progress-restarts K
  std::vector<HostSlots> spares;     // --spare-hosts
  std::string log_path;              // --restart-log FILE (JSONL); "" none
  double host_check_timeout_s = 10;  // per host, in parallel
  ShrinkOptions shrink;
};

struct SupervisorOptions {
  std::vector<std::string> command;  // the launcher and its arguments
  double grace_s = 20;               // after an abort report, before ending the launcher
  double kill_after_s = 5;           // after SIGTERM, before SIGKILL
  double heartbeat_timeout_s = 30;   // a rank silent this long ends the job; 0: no heartbeats
  RestartOptions restart;
};

// One abort report, parsed from a line of the launcher's stderr (parallel/health/comm_error.h).
struct AbortReport {
  int world_rank = -1;
  std::string host;
  int exit_code = 1;
};
std::optional<AbortReport> parse_abort_report(std::string_view line);

// Runs the launcher under supervision; returns the exit status for the supervisor: the
// launcher's (128 + N when a signal N ended it), or the abort report's when the supervisor
// had to end the launcher after it.
int supervise(const SupervisorOptions& options);

}  // namespace brt::launch
