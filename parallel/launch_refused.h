// A refusal to start: the job did nothing yet (a bad layout, ranks started with different
// configs, a checkpoint.dir in use or unusable, not enough memory, too many threads).
// run_mpi_main (parallel/mpi/mpi_session.h) exits with kLaunchRefusedExitCode (2) for it, so a
// batch script can tell "never started" from "failed while running" (1).
#pragma once

#include <stdexcept>

namespace brt::parallel {

class LaunchRefused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace brt::parallel
