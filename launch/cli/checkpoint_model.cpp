#include "launch/cli/checkpoint_model.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "checkpoint/directory.h"

#include "launch/preflight/numerics_agreement.h"
#include "launch/preflight/preflight.h"
#include "launch/process/fault_injection.h"
#include "launch/run/gpu_binding.h"
#include "launch/run/threads.h"
#include "launch/train/checkpoint/training_checkpoint.h"
#include "parallel/cpu_share.h"
#include "parallel/mpi/launch_env.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/process_groups.h"

namespace brt::launch {

namespace {

// "" or why `given` names no checkpoint to read; `file` gets the one it names.
std::string checkpoint_argument_problem(const std::filesystem::path& given, std::string& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(given, ec)) {
    const auto found = checkpoint::list_checkpoints(given);
    if (found.empty()) return given.string() + " is a directory holding no committed checkpoint (ckpt-*.h5)";
    file = found.front().path.string();
    return "";
  }
  file = given.string();
  if (std::filesystem::exists(given, ec)) return "";
  const std::filesystem::path dir = given.has_parent_path() ? given.parent_path() : ".";
  const auto found = checkpoint::list_checkpoints(dir);
  if (!checkpoint::step_of_checkpoint_name(given.filename().string()) || found.empty()) return "";  // the open says
  return given.string() + " does not exist: its directory holds " + std::to_string(found.size()) +
         " other checkpoint(s), the newest " + found.front().path.string() +
         " — a live run keeps only its newest checkpoint.keep checkpoints and has pruned this one. Give the "
         "directory (" + dir.string() + ") to read its newest checkpoint, or copy a checkpoint before reading it";
}

}  // namespace

std::string resolve_checkpoint_argument(parallel::MpiSession& mpi, const std::string& given, const char* command) {
  if (given.empty())
    throw UsageError(std::string("--checkpoint FILE is required (see brt-dist ") + command + " --help)");
  std::string file, problem;
  if (mpi.world_rank() == 0) problem = checkpoint_argument_problem(given, file);
  std::string decided = problem.empty() ? "F" + file : "P" + problem;
  if (mpi.world_size() > 1) {  // before any process group exists: MPI_COMM_WORLD
    auto watched = mpi.monitor().guard("checkpoint open");
    int64_t n = int64_t(decided.size());
    MPI_Bcast(&n, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    decided.resize(size_t(n));
    MPI_Bcast(decided.data(), int(n), MPI_CHAR, 0, MPI_COMM_WORLD);
  }
  if (decided[0] == 'P') throw std::runtime_error(decided.substr(1));
  file = decided.substr(1);
  if (file != given && mpi.world_rank() == 0)
    std::fprintf(stderr, "brt-dist %s: %s: its newest checkpoint, %s\n", command, given.c_str(), file.c_str());
  return file;
}

RunConfig checkpoint_command_config(parallel::MpiSession& mpi, const CommandLine& cl, const std::string& checkpoint,
                                    const char* command, ConfigSources* sources) {
  if (checkpoint.empty())
    throw UsageError(std::string("--checkpoint FILE is required (see brt-dist ") + command + " --help)");
  RunConfig cfg;
  {
    auto watched = mpi.monitor().guard("checkpoint open");
    cfg = config_of_checkpoint(checkpoint);
  }
  // The checkpoint's run may have trained elsewhere (a GPU, fp64, another layout): where this
  // command computes is its own --tp, --device and --precision (default 1, cpu, fp32).
  cfg.train.tp = 1;
  cfg.train.cp = 1;
  cfg.train.device = "cpu";
  cfg.train.precision = "fp32";
  with_command_line_config(cl, [&] {
    for (const auto& o : cl.overrides) apply_override(cfg, o, sources);
  });
  parallel::MonitorSettings watch;
  watch.timeout_s = cfg.train.timeout_s;
  mpi.monitor().configure(watch);
  // Refused (exit 2) above 4 x the cores, before OpenMP starts a thread (launch/preflight/preflight.h).
  const ThreadChoice threads = preflight_threads(cfg.train.threads, parallel::query_cpu_share(MPI_COMM_WORLD));
  apply_threads(threads);
  // Under mpirun the ranks' numerics are compared as train compares them
  // (launch/preflight/numerics_agreement.h): a difference is a warning on stderr (the report on
  // stdout stays as it is), or a refusal with train.deterministic=true.
  if (mpi.world_size() > 1) {
    const NumericsAgreement numerics =
        agree_on_numerics(mpi, local_numerics(threads.threads, -1), cfg.train.deterministic, cfg.train.timeout_s);
    if (const std::string warning = numerics_warning(numerics); !warning.empty() && mpi.world_rank() == 0)
      std::fprintf(stderr, "brt-dist %s: %s\n", command, warning.c_str());
  }
  return cfg;
}

std::unique_ptr<RunModel<float>> load_checkpoint_model(parallel::MpiSession& mpi, const RunConfig& cfg,
                                                       const parallel::ProcessGroups& groups, int streams,
                                                       const std::string& checkpoint, const char* command) {
  if (cfg.train.precision == "fp64")
    throw std::invalid_argument(std::string(command) + ": train.precision = \"fp64\" is not "
                                "supported here (it computes in fp32, or bf16 on the GPU)");
  int gpu_device = -1;
  if (cfg.train.device == "cuda") {
    const parallel::LaunchInfo where = parallel::query_launch_info(MPI_COMM_WORLD, parallel::process_env());
    gpu_device = bind_gpu_for_local_rank(where.local_rank).device;
  }
  auto run = std::make_unique<RunModel<float>>(cfg, RunPlace{&groups, gpu_device}, RunModelOptions::inference(streams));
  const FaultInjection faults = FaultInjection::from_environment();
  auto watched = mpi.monitor().guard("checkpoint load");
  load_model_parameters(checkpoint, run->model(), [&](const std::string& phase) {
    watched.phase(phase);
    faults.at_phase("checkpoint load: " + phase, mpi.world_rank());
  });
  return run;
}

}  // namespace brt::launch
