#include "parallel/mpi/mpi_session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <set>
#include <thread>
#include <vector>

#include "parallel/health/comm_error.h"
#include "parallel/mpi/launch_env.h"
#include "parallel/layout.h"

namespace brt::parallel {

namespace {

std::string host_name() {
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(host, &len);
  return std::string(host, static_cast<size_t>(len));
}

// An MPI call on MPI_COMM_WORLD (or a communicator derived from it that keeps its handler)
// failed. MPI's default, MPI_ERRORS_ARE_FATAL, ends the job with Open MPI's banner and nothing
// of ours; instead the rank, host and MPI's reason are printed and the process aborts, so the
// crash report (launch/cli/crash_report.h, when installed) adds the stack of the failing call.
// Communicators that turn errors into CommError (mpi_communicator.h) set MPI_ERRORS_RETURN.
extern "C" void on_world_mpi_error(MPI_Comm*, int* code, ...) {
  char reason[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(*code, reason, &length);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "brt-dist: MPI error on world rank %d (host %s): %s; aborting this rank\n", rank,
               host_name().c_str(), reason);
  std::fflush(stderr);
  std::abort();
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv, int requested_thread_level) {
  exit_if_started_without_pmi(process_env());
  MPI_Init_thread(argc, argv, requested_thread_level, &thread_level_);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  MPI_Errhandler on_error;
  MPI_Comm_create_errhandler(on_world_mpi_error, &on_error);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, on_error);
  MPI_Errhandler_free(&on_error);  // MPI_COMM_WORLD keeps it
  host_ = host_name();
  MPI_Comm_dup(MPI_COMM_WORLD, &error_comm_);
  monitor_ = std::make_unique<JobMonitor>(RankLocation{world_rank_, host_}, world_size_);
  start_heartbeat();
}

// Under brt-dist launch: this process's heartbeat, its step and activity from the monitor. A
// malformed interval is a warning, not a failure: the job runs, unwatched by heartbeats.
void MpiSession::start_heartbeat() {
  std::optional<double> interval;
  try {
    interval = heartbeat_interval_from(std::getenv(kHeartbeatEnv));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "brt-dist: warning: world rank %d: %s; no heartbeat\n", world_rank_, e.what());
  }
  if (!interval) return;
  JobMonitor* monitor = monitor_.get();
  heartbeat_ = std::make_unique<HeartbeatEmitter>(RankLocation{world_rank_, host_}, *interval,
                                                  [monitor](int64_t& step, std::string& activity) {
                                                    step = monitor->step();
                                                    activity = monitor->activity();
                                                  });
}

MpiSession::~MpiSession() {
  if (std::uncaught_exceptions() > 0) {
    abort_job("brt::parallel: world rank " + std::to_string(world_rank_) +
                  " is leaving MPI with an exception in flight; aborting the job so the other "
                  "ranks do not wait for it (use run_mpi_main to have the message printed)\n",
              1);
  }
  heartbeat_.reset();  // its last line says this rank ends normally
  monitor_.reset();    // the watchdog thread stops before MPI does
  if (error_comm_ != MPI_COMM_NULL) MPI_Comm_free(&error_comm_);
  MPI_Finalize();
}

namespace {

// True when every rank of the session arrives here within kErrorAgreementSeconds (or half the
// timeout, if shorter: the healthy ranks' collectives must not time out first).
bool every_rank_failed(MpiSession& session) {
  MPI_Request request;
  MPI_Ibarrier(session.error_comm(), &request);
  const double window = std::min(kErrorAgreementSeconds, session.monitor().settings().timeout_s / 2);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(window);
  int done = 0;
  while (true) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The distinct messages of all ranks, on world rank 0 ("" elsewhere). Every rank calls it.
std::string agreed_message(MpiSession& session, const std::string& mine) {
  constexpr int kLength = 4096;
  std::vector<char> buffer(kLength, 0), all;
  std::memcpy(buffer.data(), mine.data(), std::min<size_t>(mine.size(), kLength - 1));
  if (session.world_rank() == 0) all.resize(size_t(kLength) * size_t(session.world_size()));
  MPI_Gather(buffer.data(), kLength, MPI_CHAR, all.data(), kLength, MPI_CHAR, 0, session.error_comm());
  if (session.world_rank() != 0) return "";
  std::vector<std::string> messages;
  std::vector<std::vector<int>> ranks;
  for (int r = 0; r < session.world_size(); ++r) {
    const std::string text(all.data() + size_t(r) * kLength);
    size_t k = 0;
    while (k < messages.size() && messages[k] != text) ++k;
    if (k == messages.size()) {
      messages.push_back(text);
      ranks.emplace_back();
    }
    ranks[k].push_back(r);
  }
  if (messages.size() == 1) return messages[0];
  std::string out;
  for (size_t k = 0; k < messages.size(); ++k) {
    out += "\n  world rank" + std::string(ranks[k].size() > 1 ? "s " : " ");
    for (size_t i = 0; i < ranks[k].size(); ++i) out += (i ? "," : "") + std::to_string(ranks[k][i]);
    out += ": " + messages[k];
  }
  return out;
}

}  // namespace

int run_mpi_main(int argc, char** argv, const std::function<int(MpiSession&)>& body,
                 const std::string& program) {
  MpiSession session(&argc, &argv);
  std::string error;
  int status = 1;
  try {
    return body(session);
  } catch (const LaunchRefused& e) {  // a bad layout, preflight refusals
    error = e.what();
    status = kLaunchRefusedExitCode;
  } catch (const UsageError& e) {
    error = e.what();
    status = kLaunchRefusedExitCode;
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (session.world_size() == 1) {
    std::fprintf(stderr, "%s: error: %s\n", program.c_str(), error.c_str());
    return status;
  }
  if (every_rank_failed(session)) {
    const std::string message = agreed_message(session, error);
    if (session.world_rank() == 0) std::fprintf(stderr, "%s: error: %s\n", program.c_str(), message.c_str());
    return status;
  }
  session.monitor().fail(program + ": error on world rank " + std::to_string(session.world_rank()) + " (host " +
                             session.host() + "): " + error,
                         1);
}

}  // namespace brt::parallel
