// The run's process groups (docs/parallelism.md): consecutive ranks of train.tp share a model
// (tensor parallelism), DP = world / tp replicas; every collective on them under train.timeout_s
// and the session's watchdog. The layout is checked first, against every size tensor
// parallelism splits (core/tp_split.h), so a bad --tp is refused on every rank alike (exit 2).
#pragma once

#include "launch/config/config.h"
#include "launch/run/context_parallel_refusal.h"
#include "parallel/process_groups.h"

namespace brt::parallel {
class MpiSession;
}

namespace brt::launch {

// Throws parallel::LayoutError naming every problem and the --tp values that would fit when
// train.tp does not divide `world_size` or one of the model's split sizes, or with
// context_parallel_refusal's reason when train.cp cannot split `work`
// (launch/run/context_parallel_refusal.h). `cfg` is resolved.
void validate_run_layout(int world_size, const RunConfig& cfg, CpWork work);

// validate_run_layout, then the world, dp_cp, tp and cp groups over MPI_COMM_WORLD (collective).
parallel::ProcessGroups make_run_groups(parallel::MpiSession& session, const RunConfig& cfg, CpWork work);

}  // namespace brt::launch
