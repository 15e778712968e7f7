// MPI's lifetime as an object: MPI_Init_thread in the constructor (after refusing a plain
// srun without PMI), MPI_Finalize in the destructor. Plus run_mpi_main(), which turns an
// exception escaping the program into a message naming the rank and a clean job end.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>

namespace brt::parallel {

class MpiSession {
 public:
  // Requests MPI_THREAD_MULTIPLE (Open MPI 4.1 provides it), so a communication thread can
  // be added later; accepts whatever level the library grants and reports it.
  MpiSession(int* argc, char*** argv, int requested_thread_level = MPI_THREAD_MULTIPLE);
  // MPI_Finalize. If an exception is unwinding through here, MPI_Finalize could hang waiting
  // for ranks that never arrive, so the job is aborted instead.
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int thread_level() const { return thread_level_; }
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

 private:
  int thread_level_ = MPI_THREAD_SINGLE;
  int world_rank_ = 0;
  int world_size_ = 1;
};

// Runs body(session) inside an MpiSession and returns its exit status. Exceptions:
//  - LayoutError (parallel/layout.h) is thrown identically by every rank before any work:
//    world rank 0 prints it, everyone finalizes, status 2;
//  - anything else may be on one rank only: that rank prints "world rank R (host): what()"
//    and aborts the job (status 1), since the others may be blocked in a collective.
int run_mpi_main(int argc, char** argv, const std::function<int(MpiSession&)>& body);

}  // namespace brt::parallel
