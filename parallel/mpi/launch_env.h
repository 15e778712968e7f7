// Where this process sits in the job: read from the launcher's environment before MPI_Init
// (mpirun's OMPI_* variables, srun's SLURM_* variables, PMIx), and from MPI afterwards.
// Also the one check that must run before MPI_Init: a plain `srun ./prog` without PMI makes
// every task a separate 1-rank world (or fails inside Open MPI with an obscure message), so
// we stop first with a hint (docs/parallelism.md, shared/docs/local-slurm.md).
#pragma once

#include <mpi.h>

#include <functional>
#include <stdexcept>
#include <string>

namespace brt::parallel {

// Looks up an environment variable; nullptr when unset. Tests pass a fake one.
using EnvLookup = std::function<const char*(const char*)>;
EnvLookup process_env();  // std::getenv

// Launcher-provided placement, -1 where the environment does not say.
struct LauncherEnv {
  std::string launcher;  // "mpirun", "srun --mpi=pmix", "srun (no PMI)", "pmi", "none"
  int rank = -1;
  int size = -1;
  int local_rank = -1;   // use this to pick a GPU before MPI_Init
  int local_size = -1;
};
LauncherEnv read_launcher_env(const EnvLookup& env);

// Non-empty hint when the process was started by srun (SLURM_PROCID/SLURM_STEP_ID set) for
// more than one task (SLURM_STEP_NUM_TASKS or SLURM_NTASKS > 1) but no PMI reached it
// (no PMIX_RANK, PMI_RANK, PMI_FD or OMPI_COMM_WORLD_RANK).
std::string started_without_pmi_hint(const EnvLookup& env);

// Exit status used when refusing to start (a usage error, like a bad command line).
inline constexpr int kLaunchRefusedExitCode = 2;

// A command line that cannot run: an unknown or missing flag, a flag value that is not a number
// or is outside its range, an unexpected argument. The command's error, printed like any other,
// but with exit status kLaunchRefusedExitCode (run_mpi_main, main), as the help documents.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Prints the hint and exits with kLaunchRefusedExitCode when started_without_pmi_hint() is
// not empty. Call before MPI_Init (MpiSession does).
void exit_if_started_without_pmi(const EnvLookup& env);

// Placement as MPI sees it after MPI_Init. Collective over `world`.
struct LaunchInfo {
  int world_rank = 0;
  int world_size = 1;
  int local_rank = 0;   // rank among the processes sharing this node (MPI_COMM_TYPE_SHARED)
  int local_size = 1;
  std::string host;
  std::string launcher; // from read_launcher_env()
};
LaunchInfo query_launch_info(MPI_Comm world, const EnvLookup& env);

}  // namespace brt::parallel
