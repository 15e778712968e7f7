#include "parallel/mpi_session.h"

#include <cstdio>
#include <exception>

#include "parallel/comm_error.h"
#include "parallel/launch_env.h"
#include "parallel/layout.h"

namespace brt::parallel {

MpiSession::MpiSession(int* argc, char*** argv, int requested_thread_level) {
  exit_if_started_without_pmi(process_env());
  MPI_Init_thread(argc, argv, requested_thread_level, &thread_level_);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
}

MpiSession::~MpiSession() {
  if (std::uncaught_exceptions() > 0) {
    abort_job("brt::parallel: world rank " + std::to_string(world_rank_) +
                  " is leaving MPI with an exception in flight; aborting the job so the other "
                  "ranks do not wait for it (use run_mpi_main to have the message printed)\n",
              1);
  }
  MPI_Finalize();
}

namespace {

std::string host_name() {
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  return std::string(host, static_cast<size_t>(len));
}

}  // namespace

int run_mpi_main(int argc, char** argv, const std::function<int(MpiSession&)>& body) {
  MpiSession session(&argc, &argv);
  try {
    return body(session);
  } catch (const LayoutError& e) {
    if (session.world_rank() == 0) std::fprintf(stderr, "error: %s\n", e.what());
    return kLaunchRefusedExitCode;
  } catch (const std::exception& e) {
    abort_job("error on world rank " + std::to_string(session.world_rank()) + " (host " +
                  host_name() + "): " + e.what() + "\n",
              1);
  }
}

}  // namespace brt::parallel
