#include "parallel/layout.h"

#include <sstream>

namespace brt::parallel {

std::vector<int> GridLayout::tp_group_members(int world_rank) const {
  std::vector<int> members;
  for (int t = 0; t < tp; ++t) members.push_back(dp_cp_rank(world_rank) * tp + t);
  return members;
}

std::vector<int> GridLayout::dp_cp_group_members(int world_rank) const {
  std::vector<int> members;
  for (int d = 0; d < dp_cp(); ++d) members.push_back(d * tp + tp_rank(world_rank));
  return members;
}

std::vector<int> GridLayout::cp_group_members(int world_rank) const {
  std::vector<int> members;
  for (int c = 0; c < cp; ++c) members.push_back((data_rank(world_rank) * cp + c) * tp + tp_rank(world_rank));
  return members;
}

std::string GridLayout::cp_group_name(int world_rank) const {
  return "cp[" + std::to_string(data_rank(world_rank)) + "," + std::to_string(tp_rank(world_rank)) + "]";
}

std::string GridLayout::tp_group_name(int world_rank) const {
  return "tp[" + std::to_string(dp_cp_rank(world_rank)) + "]";
}

std::string GridLayout::dp_cp_group_name(int world_rank) const {
  return "dp_cp[" + std::to_string(tp_rank(world_rank)) + "]";
}

namespace {

bool fits(int world, int tp, std::span<const SplitByTp> split) {
  if (tp < 1 || world < 1 || world % tp != 0) return false;
  for (const auto& q : split) {
    if (q.value % tp != 0) return false;
  }
  return true;
}

}  // namespace

std::string layout_problem(int world, int tp, std::span<const SplitByTp> split) {
  if (fits(world, tp, split)) return {};
  std::ostringstream s;
  s << "--tp " << tp << " does not fit: ";
  if (world < 1) {
    s << "the world has " << world << " ranks; start at least one rank.";
    return s.str();
  }
  if (tp < 1) {
    s << "--tp must be at least 1 (1 = no tensor parallelism).";
    return s.str();
  }
  bool first = true;
  auto add = [&](const std::string& problem) {
    s << (first ? "" : "; ") << problem;
    first = false;
  };
  if (world % tp != 0) {
    add(std::to_string(world) + " ranks are not divisible by " + std::to_string(tp) +
        " (data-parallel size = ranks / tp must be whole; start a multiple of " +
        std::to_string(tp) + " ranks)");
  }
  for (const auto& q : split) {
    if (q.value % tp != 0) {
      add(q.name + " = " + std::to_string(q.value) + " is not divisible by " + std::to_string(tp));
    }
  }
  std::vector<int> good;
  for (int t = 1; t <= world; ++t) {
    if (fits(world, t, split)) good.push_back(t);
  }
  s << ". Values of --tp that fit " << world << " ranks" << (split.empty() ? "" : " and these sizes")
    << ": ";
  for (size_t i = 0; i < good.size(); ++i) s << (i ? ", " : "") << good[i];
  s << ".";
  return s.str();
}

void validate_layout(int world, int tp, std::span<const SplitByTp> split) {
  std::string problem = layout_problem(world, tp, split);
  if (!problem.empty()) throw LayoutError(problem);
}

std::string cp_layout_problem(int world, int tp, int cp) {
  if (cp < 1) return "--cp " + std::to_string(cp) + " must be at least 1 (1 = no context parallelism)";
  if (tp >= 1 && world % tp == 0 && (world / tp) % cp == 0) return {};
  std::string good;
  for (int c = 1; tp >= 1 && c <= world / tp; ++c)
    if ((world / tp) % c == 0) good += (good.empty() ? "" : ", ") + std::to_string(c);
  return "--cp " + std::to_string(cp) + " does not fit: " + std::to_string(world) + " ranks / --tp " +
         std::to_string(tp) + " = " + std::to_string(tp >= 1 ? world / tp : 0) +
         " ranks per tensor-parallel position are not divisible by " + std::to_string(cp) +
         " (world = DP x CP x TP). Values of --cp that fit: " + good + ".";
}

}  // namespace brt::parallel
