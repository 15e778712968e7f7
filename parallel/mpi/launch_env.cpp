#include "parallel/mpi/launch_env.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace brt::parallel {
namespace {

int env_int(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0' && x >= 0) ? static_cast<int>(x) : -1;
}

bool has(const EnvLookup& env, const char* name) { return env(name) != nullptr; }

bool has_pmi(const EnvLookup& env) {
  return has(env, "PMIX_RANK") || has(env, "PMI_RANK") || has(env, "PMI_FD") ||
         has(env, "OMPI_COMM_WORLD_RANK");
}

bool under_srun(const EnvLookup& env) {
  return has(env, "SLURM_STEP_ID") || has(env, "SLURM_STEPID") || has(env, "SLURM_PROCID");
}

}  // namespace

EnvLookup process_env() {
  return [](const char* name) -> const char* { return std::getenv(name); };
}

LauncherEnv read_launcher_env(const EnvLookup& env) {
  LauncherEnv out;
  if (has(env, "OMPI_COMM_WORLD_RANK")) {
    out.launcher = "mpirun";
    out.rank = env_int(env, "OMPI_COMM_WORLD_RANK");
    out.size = env_int(env, "OMPI_COMM_WORLD_SIZE");
    out.local_rank = env_int(env, "OMPI_COMM_WORLD_LOCAL_RANK");
    out.local_size = env_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE");
    return out;
  }
  if (under_srun(env)) {
    out.launcher = has_pmi(env) ? "srun --mpi=pmix" : "srun (no PMI)";
    out.rank = env_int(env, "SLURM_PROCID");
    out.size = env_int(env, "SLURM_STEP_NUM_TASKS");
    if (out.size < 0) out.size = env_int(env, "SLURM_NTASKS");
    out.local_rank = env_int(env, "SLURM_LOCALID");
    // SLURM_TASKS_PER_NODE is a pattern like "2(x3)"; only the plain form is a local size.
    out.local_size = env_int(env, "SLURM_STEP_TASKS_PER_NODE");
    return out;
  }
  if (has(env, "PMIX_RANK") || has(env, "PMI_RANK")) {
    out.launcher = "pmi";
    out.rank = has(env, "PMIX_RANK") ? env_int(env, "PMIX_RANK") : env_int(env, "PMI_RANK");
    out.size = env_int(env, "PMI_SIZE");
    return out;
  }
  out.launcher = "none";
  return out;
}

std::string started_without_pmi_hint(const EnvLookup& env) {
  if (!under_srun(env) || has_pmi(env)) return {};
  int tasks = env_int(env, "SLURM_STEP_NUM_TASKS");
  if (tasks < 0) tasks = env_int(env, "SLURM_NTASKS");
  if (tasks <= 1) return {};
  const int rank = env_int(env, "SLURM_PROCID");
  return "brt-dist: started by srun as task " + std::to_string(rank) + " of " +
         std::to_string(tasks) +
         " without PMI: this srun did not provide PMI, so each task would become a separate "
         "1-rank world. Run with `srun --mpi=pmix ...` (see `srun --mpi=list`) or under "
         "`mpirun` inside the allocation.\n";
}

void exit_if_started_without_pmi(const EnvLookup& env) {
  const std::string hint = started_without_pmi_hint(env);
  if (hint.empty()) return;
  // Every task prints the hint; the launcher shows it once per task, which names them all.
  std::fputs(hint.c_str(), stderr);
  std::fflush(stderr);
  std::exit(kLaunchRefusedExitCode);
}

LaunchInfo query_launch_info(MPI_Comm world, const EnvLookup& env) {
  LaunchInfo info;
  MPI_Comm_rank(world, &info.world_rank);
  MPI_Comm_size(world, &info.world_size);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, info.world_rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &info.local_rank);
  MPI_Comm_size(node, &info.local_size);
  MPI_Comm_free(&node);
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  info.host.assign(host, static_cast<size_t>(len));
  info.launcher = read_launcher_env(env).launcher;
  return info;
}

}  // namespace brt::parallel
