// The DP x CP x TP grid as plain arithmetic (no MPI), and the checks that refuse an
// inconsistent layout before any work starts. TP groups are consecutive world ranks (so a TP
// group sits on one node when TP <= ranks per node, where its frequent collectives are
// cheapest), CP groups next (context parallelism's halo and state exchanges), DP outermost.
//
//   world rank r:  tp_rank = r % tp,  dp_cp_rank = r / tp  (its place in the dp_cp group),
//                  cp_rank = dp_cp_rank % cp,  data_rank = dp_cp_rank / cp
//   TP group of r:    { dp_cp_rank*tp + t : t in [0, tp) }       named "tp[dp_cp_rank]"
//   dp_cp group of r: { d*tp + tp_rank : d in [0, world/tp) }    named "dp_cp[tp_rank]"
//   CP group of r:    { (data_rank*cp + c)*tp + tp_rank : c in [0, cp) }  named "cp[data_rank,tp_rank]"
// The dp_cp group is every replica of this rank's parameter shard: the data-parallel replicas
// and the chunks of a context-parallel segment alike, DP x CP (Megatron's data-parallel group
// with context parallelism, which it too calls dp_cp). Gradients are summed and ZeRO-1 shards
// owned over it; the data (streams) is split over its world / (tp·cp) data ranks (data_*: DP
// alone), the cp ranks of one data rank reading the same streams. Without CP it is DP.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "parallel/launch_refused.h"

namespace brt::parallel {

class LayoutError : public LaunchRefused {
 public:
  using LaunchRefused::LaunchRefused;
};

struct GridLayout {
  int world = 1;
  int tp = 1;
  int cp = 1;

  int dp_cp() const { return world / tp; }            // the dp_cp group's size: DP x CP
  int data_parallel() const { return dp_cp() / cp; }  // DP: replicas reading different streams
  int cp_rank(int world_rank) const { return dp_cp_rank(world_rank) % cp; }
  int data_rank(int world_rank) const { return dp_cp_rank(world_rank) / cp; }
  std::vector<int> cp_group_members(int world_rank) const;  // ascending world ranks
  std::string cp_group_name(int world_rank) const;          // "cp[<data_rank>,<tp_rank>]"
  int tp_rank(int world_rank) const { return world_rank % tp; }
  int dp_cp_rank(int world_rank) const { return world_rank / tp; }
  std::vector<int> tp_group_members(int world_rank) const;  // ascending world ranks
  std::vector<int> dp_cp_group_members(int world_rank) const;  // ascending world ranks
  std::string tp_group_name(int world_rank) const;             // "tp[<dp_cp_rank>]"
  std::string dp_cp_group_name(int world_rank) const;          // "dp_cp[<tp_rank>]"
};

// A model quantity that tensor parallelism splits evenly, named as the user sets it, e.g.
// {"model.heads", 12} or {"model.d_ff", 3072}.
struct SplitByTp {
  std::string name;
  int64_t value = 0;
};

// Empty when (world, tp) and every quantity are consistent; otherwise one message listing
// every problem and the --tp values that would work, e.g.
//   "--tp 4 does not fit: 6 ranks are not divisible by 4; model.heads = 6 is not divisible
//    by 4. Values of --tp that fit 6 ranks and these sizes: 1, 2, 3, 6."
std::string layout_problem(int world, int tp, std::span<const SplitByTp> split = {});

// Throws LayoutError with layout_problem()'s message when it is not empty.
void validate_layout(int world, int tp, std::span<const SplitByTp> split = {});

// Empty when `cp` (train.cp) divides the ranks left after TP; otherwise why not, with the values
// that would fit.
std::string cp_layout_problem(int world, int tp, int cp);

}  // namespace brt::parallel
