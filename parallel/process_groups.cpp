#include "parallel/process_groups.h"

#include <stdexcept>

namespace brt::parallel {

ProcessGroups::ProcessGroups(GridLayout layout, int world_rank, std::unique_ptr<Communicator> world,
                             std::unique_ptr<Communicator> dp, std::unique_ptr<Communicator> tp)
    : layout_(layout),
      world_rank_(world_rank),
      world_(std::move(world)),
      dp_(std::move(dp)),
      tp_(std::move(tp)) {
  if (world_->size() != layout_.world || dp_->size() != layout_.dp() ||
      tp_->size() != layout_.tp || tp_->rank() != tp_rank() || dp_->rank() != dp_rank()) {
    throw std::logic_error("ProcessGroups: communicators do not match the grid layout on world rank " +
                           std::to_string(world_rank));
  }
}

ProcessGroups make_mpi_process_groups(MPI_Comm world, int tp, CommOptions options) {
  int world_size = 0, world_rank = 0;
  MPI_Comm_size(world, &world_size);
  MPI_Comm_rank(world, &world_rank);
  validate_layout(world_size, tp);
  const GridLayout layout{world_size, tp};

  // Colors pick the group, keys the rank order inside it (parallel/layout.h).
  MPI_Comm tp_comm = MPI_COMM_NULL, dp_comm = MPI_COMM_NULL;
  MPI_Comm_split(world, layout.dp_rank(world_rank), layout.tp_rank(world_rank), &tp_comm);
  MPI_Comm_split(world, layout.tp_rank(world_rank), layout.dp_rank(world_rank), &dp_comm);
  auto world_group = std::make_unique<MpiCommunicator>(world, "world", options);
  auto tp_group = std::make_unique<MpiCommunicator>(tp_comm, layout.tp_group_name(world_rank), options);
  auto dp_group = std::make_unique<MpiCommunicator>(dp_comm, layout.dp_group_name(world_rank), options);
  MPI_Comm_free(&tp_comm);  // the communicators hold their own duplicates
  MPI_Comm_free(&dp_comm);
  return ProcessGroups(layout, world_rank, std::move(world_group), std::move(dp_group),
                       std::move(tp_group));
}

}  // namespace brt::parallel
