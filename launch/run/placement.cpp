#include "launch/run/placement.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <map>

#include "runtime/numerics.h"

namespace brt::launch {

namespace {

constexpr int kEntryChars = 256;

std::string short_why(const ThreadChoice& threads, const parallel::CpuShare& share) {
  if (threads.why == "train.threads" || threads.why == "OMP_NUM_THREADS") return threads.why;
  return std::to_string(share.cores_in_mask) + " core" + (share.cores_in_mask == 1 ? "" : "s") + " / " +
         std::to_string(share.ranks_sharing) + " rank" + (share.ranks_sharing == 1 ? "" : "s");
}

}  // namespace

std::string rank_ranges(const std::vector<int>& ranks) {
  return runtime::rank_ranges(ranks);
}

std::string format_placement(const std::vector<RankPlace>& ranks) {
  std::vector<std::string> order;  // hosts by their first rank
  std::map<std::string, std::vector<int>> members;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (!members.count(ranks[r].host)) order.push_back(ranks[r].host);
    members[ranks[r].host].push_back(int(r));
  }
  if (order.size() < 2) return "";
  std::string line = "placement: " + std::to_string(ranks.size()) + " ranks on " + std::to_string(order.size()) +
                     " hosts:";
  for (size_t h = 0; h < order.size(); ++h) {
    const std::vector<int>& mine = members[order[h]];
    line.append(h ? "; " : " ").append(order[h]).append(mine.size() > 1 ? " ranks " : " rank ");
    line.append(rank_ranges(mine)).append(", ");
    const RankPlace& first = ranks[size_t(mine[0])];
    bool uniform = true;
    for (int r : mine) uniform = uniform && ranks[size_t(r)].threads == first.threads && ranks[size_t(r)].why == first.why;
    if (uniform) {
      line.append(std::to_string(first.threads)).append(first.threads == 1 ? " thread" : " threads");
      line.append(mine.size() > 1 ? " each (" : " (").append(first.why).append(")");
    } else {
      line.append("threads");
      for (int r : mine)
        line.append(" ").append(std::to_string(ranks[size_t(r)].threads)).append(" (").append(ranks[size_t(r)].why).append(")");
    }
  }
  return line;
}

std::string describe_placement(MPI_Comm world, const ThreadChoice& threads, const parallel::CpuShare& share) {
  int rank = 0, size = 1;
  MPI_Comm_rank(world, &rank);
  MPI_Comm_size(world, &size);
  char host[kEntryChars] = {};
  ::gethostname(host, sizeof host - 1);
  char mine[kEntryChars] = {};
  std::snprintf(mine, sizeof mine, "%s\t%d\t%s", host, threads.threads, short_why(threads, share).c_str());
  std::vector<char> all(rank == 0 ? size_t(size) * kEntryChars : 0);
  MPI_Gather(mine, kEntryChars, MPI_CHAR, all.data(), kEntryChars, MPI_CHAR, 0, world);
  if (rank != 0) return "";
  std::vector<RankPlace> places(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    const std::string entry(&all[size_t(r) * kEntryChars]);
    const size_t a = entry.find('\t'), b = entry.find('\t', a + 1);
    places[size_t(r)] = {entry.substr(0, a), std::atoi(entry.substr(a + 1, b - a - 1).c_str()), entry.substr(b + 1)};
  }
  return format_placement(places);
}

}  // namespace brt::launch
