#include "parallel/process_groups.h"

#include <stdexcept>

namespace brt::parallel {

ProcessGroups::ProcessGroups(GridLayout layout, int world_rank, std::unique_ptr<Communicator> world,
                             std::unique_ptr<Communicator> dp_cp, std::unique_ptr<Communicator> tp,
                             std::unique_ptr<Communicator> cp)
    : layout_(layout),
      world_rank_(world_rank),
      world_(std::move(world)),
      dp_cp_(std::move(dp_cp)),
      tp_(std::move(tp)),
      cp_(std::move(cp)) {
  if (!cp_) {
    if (layout_.cp != 1) throw std::logic_error("ProcessGroups: CP > 1 needs a cp group");
    cp_ = std::make_unique<MpiCommunicator>(MPI_COMM_SELF, "cp[self]");
  }
  if (cp_->size() != layout_.cp || cp_->rank() != cp_rank())
    throw std::logic_error("ProcessGroups: the cp group does not match the grid layout on world rank " +
                           std::to_string(world_rank));
  if (world_->size() != layout_.world || dp_cp_->size() != layout_.dp_cp() ||
      tp_->size() != layout_.tp || tp_->rank() != tp_rank() || dp_cp_->rank() != dp_cp_rank()) {
    throw std::logic_error("ProcessGroups: communicators do not match the grid layout on world rank " +
                           std::to_string(world_rank));
  }
}

ProcessGroups make_mpi_process_groups(MPI_Comm world, int tp, CommOptions options, int cp) {
  int world_size = 0, world_rank = 0;
  MPI_Comm_size(world, &world_size);
  MPI_Comm_rank(world, &world_rank);
  validate_layout(world_size, tp);
  if (const std::string problem = cp_layout_problem(world_size, tp, cp); !problem.empty()) throw LayoutError(problem);
  const GridLayout layout{world_size, tp, cp};

  // Colors pick the group, keys the rank order inside it (parallel/layout.h).
  MPI_Comm tp_comm = MPI_COMM_NULL, dp_cp_comm = MPI_COMM_NULL;
  MPI_Comm_split(world, layout.dp_cp_rank(world_rank), layout.tp_rank(world_rank), &tp_comm);
  MPI_Comm_split(world, layout.tp_rank(world_rank), layout.dp_cp_rank(world_rank), &dp_cp_comm);
  auto world_group = std::make_unique<MpiCommunicator>(world, "world", options);
  auto tp_group = std::make_unique<MpiCommunicator>(tp_comm, layout.tp_group_name(world_rank), options);
  auto dp_cp_group = std::make_unique<MpiCommunicator>(dp_cp_comm, layout.dp_cp_group_name(world_rank), options);
  // CP: the same data rank and TP rank, in chunk order.
  MPI_Comm cp_comm = MPI_COMM_NULL;
  MPI_Comm_split(world, layout.data_rank(world_rank) * tp + layout.tp_rank(world_rank),
                 layout.cp_rank(world_rank), &cp_comm);
  auto cp_group = std::make_unique<MpiCommunicator>(cp_comm, layout.cp_group_name(world_rank), options);
  MPI_Comm_free(&tp_comm);  // the communicators hold their own duplicates
  MPI_Comm_free(&dp_cp_comm);
  MPI_Comm_free(&cp_comm);
  return ProcessGroups(layout, world_rank, std::move(world_group), std::move(dp_cp_group),
                       std::move(tp_group), std::move(cp_group));
}

}  // namespace brt::parallel
