// Is a host fit to run ranks again after a fault (launch/supervise/restarts.h)? Through the
// launcher's own way in, bounded: ssh for mpirun (its default agent), a one-task srun step on the
// node for srun inside an allocation. The host answers within the timeout, the checkpoint
// directory (when the command names one) is a readable directory there, and it reports its
// available memory. Never throws.
#pragma once

#include <string>
#include <vector>

namespace brt::launch {

struct HostHealth {
  bool ok = false;
  std::string detail;  // "reachable, 12.3 GB available, c readable" or why not
  double seconds = 0;
};

HostHealth check_host(const std::string& host, const std::string& checkpoint_dir, double timeout_s);
// The same through `srun --overlap -w NODE` in the allocation the supervisor runs in.
HostHealth check_slurm_node(const std::string& node, const std::string& checkpoint_dir, double timeout_s);

// The nodes of the Slurm allocation the supervisor runs in (SLURM_JOB_NODELIST expanded by
// `scontrol show hostnames`, bounded); empty, with the reason in `why_none`, outside one.
std::vector<std::string> slurm_allocation_nodes(double timeout_s, std::string& why_none);

// The checkpoint directory a brt-dist command line sets (`checkpoint.dir=DIR` or
// `--checkpoint.dir DIR`), "" when it sets none.
std::string command_checkpoint_dir(const std::vector<std::string>& command);

}  // namespace brt::launch
