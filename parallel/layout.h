// The DP x TP grid as plain arithmetic (no MPI), and the checks that refuse an inconsistent
// layout before any work starts. TP groups are consecutive world ranks (so a TP group sits
// on one node when TP <= ranks per node, where its frequent collectives are cheapest); DP
// groups are strided by TP.
//
//   world rank r:  tp_rank = r % tp,  dp_rank = r / tp
//   TP group of r: { dp_rank*tp + t : t in [0, tp) }       named "tp[dp_rank]"
//   DP group of r: { d*tp + tp_rank : d in [0, world/tp) }  named "dp[tp_rank]"
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

  int dp() const { return world / tp; }
  int tp_rank(int world_rank) const { return world_rank % tp; }
  int dp_rank(int world_rank) const { return world_rank / tp; }
  std::vector<int> tp_group_members(int world_rank) const;  // ascending world ranks
  std::vector<int> dp_group_members(int world_rank) const;  // ascending world ranks
  std::string tp_group_name(int world_rank) const;          // "tp[<dp_rank>]"
  std::string dp_group_name(int world_rank) const;          // "dp[<tp_rank>]"
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

}  // namespace brt::parallel
