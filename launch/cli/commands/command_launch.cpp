// `brt-dist launch [--grace-s S] [--kill-after-s S] [--heartbeat-timeout-s S] [--restarts N
// [--spare-hosts H:S,...] [--no-progress-restarts K] [--restart-log FILE]] [--] LAUNCHER ARGS...`: the job's launcher
// under the supervisor (launch/supervise/supervisor.h). Its own flags come first; everything
// from the first word that is not one (or after `--`) is the launcher's command line, untouched.
#include <cstdlib>
#include <string>
#include <vector>

#include "launch/cli/cli.h"
#include "launch/cli/commands/commands.h"
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
  } else {
    return false;
  }
  return true;
}

}  // namespace

int command_launch(int argc, char** argv) {
  SupervisorOptions options;
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
      if (options.heartbeat_timeout_s > 0 && options.heartbeat_timeout_s < 1)
        throw parallel::UsageError(arg + " must be 0 (off) or at least 1 s, got '" + argv[i] + "'");
      continue;
    }
    if (arg == "--restarts" || arg == "--no-progress-restarts" || arg == "--spare-hosts" || arg == "--restart-log") {
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
  if (options.restart.restarts == 0 && (!options.restart.spares.empty() || !options.restart.log_path.empty()))
    throw parallel::UsageError("--spare-hosts and --restart-log need --restarts N (N >= 1)");
  if (options.command.empty())
    throw parallel::UsageError("no launcher command: brt-dist launch [flags] mpirun|srun|brt-dist ...");
  return supervise(options);
}

}  // namespace brt::launch
