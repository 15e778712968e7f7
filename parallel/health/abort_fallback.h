// When MPI_Abort cannot end the job (docs/parallelism.md "Across hosts"). MPI_Abort
// asks Open MPI's launcher to kill every rank; with a host unreachable (a cut link, a dead
// switch) mpirun cannot reach that host's orted, so it waits for it forever, and so does the
// orted on the far side, each holding its host's part of the job (and under a batch system,
// the allocation). Before a rank calls MPI_Abort it arms this fallback: a small helper process
// that outlives the rank and, if after the grace period the rank or its Open MPI launcher (the
// rank's parent when that is mpirun or orted) still runs, ends them. So every surviving part of
// the job ends on its own within the timeout plus the grace, whichever hosts can still talk.
#pragma once

#include <string>

namespace brt::parallel {

// MPI_Abort of a reachable job ends it in about a second; this is how long the helper waits.
inline constexpr double kAbortGraceSeconds = 10.0;

// What the helper does after the grace period, decided before it forks (it may then only use
// async-signal-safe calls).
struct AbortFallbackPlan {
  int rank_pid = 0;
  int launcher_pid = 0;          // 0: the parent is not an Open MPI launcher; left alone
  std::string launcher_name;     // "mpirun" or "orted"
  bool terminate_launcher = false;  // orted: SIGTERM first (it kills its ranks and cleans up); mpirun: SIGKILL
  std::string message;           // printed on the launcher's stderr (the job's log) before acting
  double grace_s = kAbortGraceSeconds;
  // /proc paths, formatted before the fork.
  std::string rank_stat, rank_stderr, launcher_stat, launcher_stderr;
};

// The plan for this process: its parent's name from /proc decides whether the parent is a
// launcher to end (mpirun/orterun, orted; never slurmstepd or a shell, whose job control is
// their own). `parent_name` is passed by tests; empty reads /proc/<ppid>/comm.
AbortFallbackPlan plan_abort_fallback(int world_rank, const std::string& host, int exit_code,
                                      double grace_s = kAbortGraceSeconds, const std::string& parent_name = "");

// Forks the helper (a new session, stdio on /dev/null, every other descriptor closed so it
// holds none of the rank's sockets or output pipes open) and returns at once in the rank.
// Nothing happens when fork fails: MPI_Abort is still called.
void arm_abort_fallback(const AbortFallbackPlan& plan);

}  // namespace brt::parallel
