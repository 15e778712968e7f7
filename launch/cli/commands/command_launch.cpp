// `brt-dist launch [--grace-s S] [--kill-after-s S] [--heartbeat-timeout-s S] [--restarts N
// [--spare-hosts H:S,...] [--min-dp M] [--no-progress-restarts K] [--restart-log FILE]] [--] LAUNCHER ARGS...`: the job's launcher
// under the supervisor (launch/supervise/supervisor.h). Its own flags come first; everything
// from the first word that is not one (or after `--`) is the launcher's command line, untouched.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "launch/cli/cli.h"
#include "launch/cli/commands/commands.h"
#include "launch/supervise/host_list.h"
#include "launch/supervise/supervisor.h"
#include "parallel/mpi/launch_env.h"

namespace brt::launch {

namespace {

double seconds_value(const std::string& flag, const char* text, bool zero_allowed = false) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(v > 0 || (zero_allowed && v == 0)) || v > 86400)
    throw parallel::UsageError(flag + " needs a number of seconds in " + (zero_allowed ? "[0" : "(0") +
                               ", 86400], got '" + text + "'");
  return v;
}

int count_value(const std::string& flag, const char* text, int low, int high) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < low || v > high)
    throw parallel::UsageError(flag + " needs a whole number in [" + std::to_string(low) + ", " + std::to_string(high) +
                               "], got '" + text + "'");
  return int(v);
}

// The run the launcher starts, as its `brt-dist train` reads its config file, overrides and
// flags: no config when the command starts none; a failure kept to be raised where it matters.
struct LaunchedRun {
  std::optional<RunConfig> config;
  std::exception_ptr failure;
  std::string failure_text;
};

LaunchedRun launched_run(const std::vector<std::string>& command) {
  LaunchedRun run;
  size_t at = 0;
  while (at + 1 < command.size() &&
         !(std::filesystem::path(command[at]).filename() == "brt-dist" && command[at + 1] == "train"))
    ++at;
  if (at + 1 >= command.size()) return run;
  std::vector<char*> argv;
  for (size_t i = at; i < command.size(); ++i) argv.push_back(const_cast<char*>(command[i].c_str()));
  argv.push_back(nullptr);
  try {
    run.config = train_config_of(int(argv.size()) - 1, argv.data());
  } catch (const std::exception& e) {
    run.failure = std::current_exception();
    run.failure_text = e.what();
  }
  return run;
}

// --min-dp: the sizes a shrink keeps, read from the `brt-dist train` the launcher starts.
ShrinkOptions shrink_options(const std::vector<std::string>& command, int min_dp, const LaunchedRun& run) {
  if (run.failure) std::rethrow_exception(run.failure);
  if (!run.config)
    throw parallel::UsageError("--min-dp needs the launcher to start `brt-dist train` (none in the command)");
  const RunConfig& config = *run.config;
  ShrinkOptions k;
  k.min_dp = min_dp;
  k.replica_ranks = config.train.tp * config.train.cp;
  k.batch = config.train.batch;
  if (const auto ranks = find_command_ranks(command)) {
    k.ranks = ranks->ranks;
  } else if (const auto hosts = find_command_hosts(command)) {
    for (const HostSlots& h : hosts->hosts) k.ranks += h.slots;
  } else if (const auto shape = find_srun_shape(command); shape && shape->ranks() > 0) {
    k.ranks = shape->ranks();
  } else {
    throw parallel::UsageError("--min-dp needs mpirun's -np or --host list, or srun's -N or -n, in the command, "
                               "to count its ranks");
  }
  const int dp = k.ranks / k.replica_ranks;
  if (dp < min_dp)
    throw parallel::UsageError("--min-dp " + std::to_string(min_dp) + " is above the launch's " + std::to_string(dp) +
                               " data-parallel ranks");
  k.global_streams = int64_t(k.batch) * config.train.grad_accum * dp;
  return k;
}

// The restart flags (launch/supervise/restarts.h); false when `arg` is none of them.
bool restart_flag(const std::string& arg, const char* value, RestartOptions& r) {
  if (arg == "--restarts") {
    r.restarts = count_value(arg, value, 0, 1000);
  } else if (arg == "--no-progress-restarts") {
    r.no_progress_limit = count_value(arg, value, 1, 1000);
  } else if (arg == "--spare-hosts") {
    try {
      r.spares = parse_host_list(value);
    } catch (const std::invalid_argument& e) {
      throw parallel::UsageError("--spare-hosts: " + std::string(e.what()));
    }
  } else if (arg == "--restart-log") {
    r.log_path = value;
  } else if (arg == "--min-dp") {
    r.shrink.min_dp = count_value(arg, value, 1, 1 << 20);
  } else {
    return false;
  }
  return true;
}

}  // namespace

int command_launch(int argc, char** argv) {
  SupervisorOptions options;
  bool heartbeat_flag = false;
  int i = 2;
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "--grace-s" || arg == "--kill-after-s") {
      if (i + 1 >= argc) throw parallel::UsageError(arg + " needs a value");
      (arg == "--grace-s" ? options.grace_s : options.kill_after_s) = seconds_value(arg, argv[++i]);
      continue;
    }
    if (arg == "--heartbeat-timeout-s") {  // 0: no heartbeats
      if (i + 1 >= argc) throw parallel::UsageError(arg + " needs a value");
      options.heartbeat_timeout_s = seconds_value(arg, argv[++i], true);
      heartbeat_flag = true;
      if (options.heartbeat_timeout_s > 0 && options.heartbeat_timeout_s < 1)
        throw parallel::UsageError(arg + " must be 0 (off) or at least 1 s, got '" + argv[i] + "'");
      continue;
    }
    if (arg == "--restarts" || arg == "--no-progress-restarts" || arg == "--spare-hosts" || arg == "--restart-log" ||
        arg == "--min-dp") {
      if (i + 1 >= argc) throw parallel::UsageError(arg + " needs a value");
      restart_flag(arg, argv[++i], options.restart);
      continue;
    }
    if (arg.rfind("--", 0) == 0)
      throw parallel::UsageError("unknown flag " + arg + " (launch's flags come before the launcher's command; see "
                                 "brt-dist launch --help)");
    break;
  }
  for (; i < argc; ++i) options.command.emplace_back(argv[i]);
  RestartOptions& r = options.restart;
  if (r.restarts == 0 && (!r.spares.empty() || !r.log_path.empty() || r.shrink.min_dp > 0))
    throw parallel::UsageError("--spare-hosts, --min-dp and --restart-log need --restarts N (N >= 1)");
  if (options.command.empty())
    throw parallel::UsageError("no launcher command: brt-dist launch [flags] mpirun|srun|brt-dist ...");
  const LaunchedRun run = launched_run(options.command);
  if (r.shrink.min_dp > 0) r.shrink = shrink_options(options.command, r.shrink.min_dp, run);
  // The run's launch.heartbeat_timeout_s unless the flag set it; a config the supervisor cannot
  // read (the ranks will say why) leaves the default.
  if (!heartbeat_flag && run.config) options.heartbeat_timeout_s = run.config->launch.heartbeat_timeout_s;
  if (!heartbeat_flag && run.failure)
    std::fprintf(stderr, "brt-dist launch: warning: cannot read the launched run's config (%s); heartbeat timeout "
                 "%g s\n", run.failure_text.c_str(), options.heartbeat_timeout_s);
  return supervise(options);
}

}  // namespace brt::launch
