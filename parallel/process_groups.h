// The process groups a training run uses — world, dp_cp (DP x CP), tp and cp — as Communicator objects
// passed explicitly to whatever needs them (docs/parallelism.md). Layout arithmetic:
// parallel/layout.h.
#pragma once

#include <mpi.h>

#include <memory>

#include "parallel/communicator.h"
#include "parallel/layout.h"
#include "parallel/mpi/mpi_communicator.h"

namespace brt::parallel {

class ProcessGroups {
 public:
  // cp: the context-parallel group (null: CP = 1, a group of this rank alone is made).
  ProcessGroups(GridLayout layout, int world_rank, std::unique_ptr<Communicator> world,
                std::unique_ptr<Communicator> dp_cp, std::unique_ptr<Communicator> tp,
                std::unique_ptr<Communicator> cp = nullptr);

  Communicator& world() const { return *world_; }
  Communicator& dp_cp() const { return *dp_cp_; }
  Communicator& tp() const { return *tp_; }
  // The chunks of one segment (context parallelism); size 1 without it. Its ranks are also
  // members of dp_cp() (which spans DP x CP for the gradients).
  Communicator& cp() const { return *cp_; }
  const GridLayout& layout() const { return layout_; }
  int world_rank() const { return world_rank_; }
  int dp_cp_rank() const { return layout_.dp_cp_rank(world_rank_); }
  int tp_rank() const { return layout_.tp_rank(world_rank_); }
  int cp_rank() const { return layout_.cp_rank(world_rank_); }
  // The streams this rank reads: data_rank() of data_size() (DP alone: dp_cp_rank() and the
  // dp_cp size without CP).
  int data_rank() const { return layout_.data_rank(world_rank_); }
  int data_size() const { return layout_.data_parallel(); }

 private:
  GridLayout layout_;
  int world_rank_;
  std::unique_ptr<Communicator> world_, dp_cp_, tp_, cp_;
};

// Builds the groups over `world` (collective over it) with the MPI backend. The layout is
// checked first, with no communication, so every rank refuses a bad one with the same
// LayoutError (parallel/layout.h) before any work.
ProcessGroups make_mpi_process_groups(MPI_Comm world, int tp, CommOptions options = {}, int cp = 1);

}  // namespace brt::parallel
