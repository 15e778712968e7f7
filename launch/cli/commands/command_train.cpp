#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "launch/cli/cli.h"
#include "launch/cli/commands/commands.h"
#include "launch/config/config.h"
#include "launch/preflight/config_agreement.h"
#include "launch/preflight/numerics_agreement.h"
#include "launch/preflight/preflight.h"
#include "launch/run/gpu_binding.h"
#include "launch/run/placement.h"
#include "launch/run/run_groups.h"
#include "launch/process/stop_signal.h"
#include "launch/train/trainer.h"
#include "parallel/cpu_share.h"
#include "parallel/mpi/launch_env.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/process_groups.h"

namespace brt::launch {

namespace {

// The command line and config of a training run. Inside run_mpi_main, so a bad key or flag is
// printed once for the whole job, not once per rank.
TrainOptions train_options(int argc, char** argv) {
  const CommandLine cl = parse_command_line(
      argc, argv, {{"steps", "train.steps"}, {"peak-gflops", "train.peak_gflops"},
                   {"seed", "train.seed"}, {"threads", "train.threads"},
                   {"precision", "train.precision"}, {"checkpoint-dir", "checkpoint.dir"},
                   {"tp", "train.tp"}, {"cp", "train.cp"}, {"device", "train.device"}},
      {"no-overlap", "deterministic"});
  std::string config_path = "configs/tiny.toml";
  if (auto it = cl.flags.find("config"); it != cl.flags.end()) config_path = it->second;
  if (!cl.positional.empty()) config_path = cl.positional[0];
  if (cl.positional.size() > 1)
    throw UsageError("command line: unexpected argument '" + cl.positional[1] + "' (see brt-dist train --help)");
  std::vector<std::string> overrides = cl.overrides;
  // --resume FILE|DIR: continue from exactly that checkpoint, or DIR's newest good one; it must
  // exist (launch/train/checkpoint/resume.h). Saves go to checkpoint.dir, by default the checkpoint's directory.
  if (auto it = cl.flags.find("resume"); it != cl.flags.end()) overrides.push_back("checkpoint.resume_from=" + it->second);
  // --no-overlap: reduce gradients only after backward (the data-parallel benchmark's reference).
  if (cl.flags.count("no-overlap")) overrides.push_back("train.overlap=false");
  if (cl.flags.count("deterministic")) overrides.push_back("train.deterministic=true");
  reject_unknown_flags(cl, {"config", "resume", "no-overlap", "deterministic"});
  TrainOptions options;
  // A bad key=value or --steps is a usage error (exit 2); a bad key in the file is not (exit 1).
  options.config = with_command_line_config(cl, [&] { return load_run_config(config_path, overrides); });
  options.config_path = config_path;
  CheckpointConfig& ck = options.config.checkpoint;
  if (!ck.resume_from.empty() && ck.dir.empty()) {
    std::error_code ec;
    const std::filesystem::path from = ck.resume_from;
    const std::filesystem::path dir = std::filesystem::is_regular_file(from, ec) ? from.parent_path() : from;
    ck.dir = (dir.empty() ? std::filesystem::path(".") : dir).string();
  }
  options.faults = FaultInjection::from_environment();
  return options;
}

}  // namespace

RunConfig train_config_of(int argc, char** argv) { return train_options(argc, argv).config; }

int command_train(int argc, char** argv) {
  // Handle SIGINT/SIGTERM/SIGUSR1 from the very start: a signal that arrives while the model is
  // being built is honoured at the first step boundary (after any resume) instead of killing
  // the rank before it can checkpoint.
  StopSignal::install();
  // One process per rank under mpirun/srun; a plain start is a 1-rank world (Open MPI
  // singleton). DP = ranks / tp (docs/parallelism.md).
  return parallel::run_mpi_main(argc, argv, [&](parallel::MpiSession& session) {
    TrainOptions options = train_options(argc, argv);
    // Before anything whose sizes depend on the config: every rank runs the same one (exit 2
    // naming the differing keys otherwise; launch/preflight/config_agreement.h).
    agree_on_config(session, options.config);
    const CheckpointConfig& ck = options.config.checkpoint;
    // --tp against the ranks and everything tensor parallelism splits (launch/run/run_groups.h).
    validate_run_layout(session.world_size(), options.config, CpWork::kTrain);
    // Every wait of the run has a deadline (docs/reliability.md): collectives through the
    // communicators' timeout, checkpoint I/O through the monitor's guards.
    parallel::MonitorSettings watch;
    watch.timeout_s = options.config.train.timeout_s;
    watch.flight_dir = std::filesystem::path(ck.dir.empty() ? "." : ck.dir) / "flight";
    session.monitor().configure(watch);
    options.monitor = &session.monitor();
    const parallel::CpuShare cores = parallel::query_cpu_share(MPI_COMM_WORLD);
    options.threads = choose_threads(options.config.train.threads, cores);
    // With ranks on several hosts, which host runs which ranks with how many threads (each
    // host fits its own cores and ranks; launch/run/placement.h).
    const std::string placement = describe_placement(MPI_COMM_WORLD, options.threads, cores);
    // Locations, memory, threads and checkpoint.dir's lock, before any model or thread exists
    // (launch/preflight/preflight.h); the lock is held until the run ends.
    const TrainPreflight preflight = preflight_train(session, options.config, options.threads, command_line_text(argc, argv));
    {
      const parallel::ProcessGroups groups = make_run_groups(session, options.config, CpWork::kTrain);
      options.groups = &groups;
      if (groups.world_rank() == 0) std::printf("config: %s\n", options.config_path.c_str());
      if (!placement.empty()) std::printf("%s\n", placement.c_str());
      // One GPU per rank by local rank (docs/gpu.md); train.device = "cuda" trains on it.
      const parallel::LaunchInfo where = parallel::query_launch_info(MPI_COMM_WORLD, parallel::process_env());
      const GpuBinding gpu = bind_gpu_for_local_rank(where.local_rank);
      options.gpu_device = gpu.device;
      if (gpu.device >= 0)
        std::printf("rank %d (local rank %d): bound to GPU %d, %s\n", groups.world_rank(), where.local_rank,
                    gpu.device, gpu.description.c_str());
      // Every rank's numerics (BLAS core, GEMM probe bits, CPU, compiler; GPU libraries), compared:
      // a difference is a warning, or under train.deterministic a refusal (exit 2).
      runtime::Numerics mine = local_numerics(options.threads.threads, gpu.device);
      if (options.faults.wrong_blas_on(groups.world_rank())) inject_wrong_blas(mine);
      const NumericsAgreement numerics = agree_on_numerics(session, mine, options.config.train.deterministic,
                                                           options.config.train.timeout_s);
      options.numerics_record = numerics.record;
      if (groups.world_rank() == 0) {
        std::printf("%s\n", numerics_start_lines(numerics).c_str());
        if (const std::string warning = numerics_warning(numerics); !warning.empty())
          std::fprintf(stderr, "%s\n", warning.c_str());
      }
      const TrainResult result = run_training(options);
      // A run stopped by a signal before its last step exits with EX_TEMPFAIL (75), so batch
      // scripts requeue only unfinished runs; a finished run exits 0.
      return result.stopped_by_signal && result.steps_done < options.config.train.steps
                 ? kStoppedBySignalExitCode
                 : 0;
    }
  }, "brt-dist train");
}

}  // namespace brt::launch
