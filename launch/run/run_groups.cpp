#include "launch/run/run_groups.h"

#include <chrono>
#include <vector>

#include "core/tp_split.h"
#include "parallel/layout.h"
#include "parallel/mpi/mpi_session.h"

namespace brt::launch {

void validate_run_layout(int world_size, const RunConfig& cfg, CpWork work) {
  const std::vector<parallel::SplitByTp> split = core::tensor_parallel_splits(cfg.model);
  parallel::validate_layout(world_size, cfg.train.tp, split);
  if (const std::string p = context_parallel_refusal(cfg, world_size, work); !p.empty())
    throw parallel::LayoutError(p);
}

parallel::ProcessGroups make_run_groups(parallel::MpiSession& session, const RunConfig& cfg, CpWork work) {
  validate_run_layout(session.world_size(), cfg, work);
  parallel::CommOptions comm;
  comm.timeout = std::chrono::milliseconds(int64_t(cfg.train.timeout_s * 1000));
  comm.monitor = &session.monitor();
  return parallel::make_mpi_process_groups(MPI_COMM_WORLD, cfg.train.tp, comm, cfg.train.cp);
}

}  // namespace brt::launch
