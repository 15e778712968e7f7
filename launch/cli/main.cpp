// brt-dist: one binary for training, data preparation, evaluation and checkpoint tools.
#include <cstdio>
#include <exception>
#include <string>

#include "checkpoint/types.h"
#include "launch/cli/commands/commands.h"
#include "launch/cli/crash_report.h"
#include "launch/cli/help.h"
#include "launch/cli/version.h"
#include "parallel/mpi/launch_env.h"
#include "runtime/blas_env.h"

int main(int argc, char** argv) {
  // First: a crash from here on prints the rank, host and stack (launch/cli/crash_report.h).
  brt::launch::install_crash_report(argc >= 2 ? std::string("brt-dist ") + argv[1] : std::string("brt-dist"));
  brt::runtime::ensure_blas_core_type(argc, argv, /*passive_waiting=*/true);
  brt::checkpoint::silence_hdf5_diagnostics();
  // The log is read as it is written — by people tailing a batch log, by mpirun's and srun's
  // forwarding, by brt-dist launch timing a restart (launch/supervise/job_signs.h): a line
  // leaves the process when it ends, not when a pipe's block buffer fills.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    std::fputs(brt::launch::overview_text().c_str(), stderr);
    return 2;
  }
  const std::string command = argv[1];
  try {
    // Help before anything else (no MPI, no config): `help [COMMAND]`, `COMMAND --help|-h`.
    if (command == "--help" || command == "-h" || (command == "help" && argc == 2)) {
      std::fputs(brt::launch::overview_text().c_str(), stdout);
      return 0;
    }
    const bool help_topic = command == "help";
    if (help_topic || brt::launch::wants_help(argc, argv)) {
      const std::string topic = help_topic ? std::string(argv[2]) : command;
      try {
        std::fputs(brt::launch::help_text(topic == "--help" || topic == "-h" ? "help" : topic).c_str(), stdout);
      } catch (const std::invalid_argument& e) {
        throw brt::parallel::UsageError(e.what());  // an unknown topic is a usage error
      }
      return 0;
    }
    if (command == "version" || command == "--version") {
      std::printf("brt-dist %s\n", brt::launch::version());
      return 0;
    }
    if (command == "train") return brt::launch::command_train(argc, argv);
    if (command == "prepare") return brt::launch::command_prepare(argc, argv);
    if (command == "eval") return brt::launch::command_eval(argc, argv);
    if (command == "ckpt") return brt::launch::command_ckpt(argc, argv);
    if (command == "generate") return brt::launch::command_generate(argc, argv);
    if (command == "plan") return brt::launch::command_plan(argc, argv);
    if (command == "doctor") return brt::launch::command_doctor(argc, argv);
    if (command == "config") return brt::launch::command_config(argc, argv);
    if (command == "launch") return brt::launch::command_launch(argc, argv);
    if (command == "export") return brt::launch::command_export(argc, argv);
    std::fprintf(stderr, "brt-dist: unknown command '%s' (see brt-dist --help)\n",
                 command.c_str());
    return brt::parallel::kLaunchRefusedExitCode;
  } catch (const brt::parallel::UsageError& e) {  // a bad command line: exit 2, as the help says
    std::fprintf(stderr, "brt-dist %s: error: %s\n", command.c_str(), e.what());
    return brt::parallel::kLaunchRefusedExitCode;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "brt-dist %s: error: %s\n", command.c_str(), e.what());
    return 1;
  }
}
