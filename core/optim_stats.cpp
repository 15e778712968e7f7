#include "core/optim_stats.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace brt::core {

template <typename T>
ChunkTable::ChunkTable(const ParamStore<T>& store, int64_t chunk_elems, const std::vector<bool>& include) {
  if (chunk_elems < 1) throw std::invalid_argument("ChunkTable: chunk size must be >= 1");
  if (!include.empty() && include.size() != static_cast<size_t>(store.size()))
    throw std::invalid_argument("ChunkTable: the parameter mask has " + std::to_string(include.size()) +
                                " entries for " + std::to_string(store.size()) + " parameters");
  first_.reserve(static_cast<size_t>(store.size()) + 1);
  for (int p = 0; p < store.size(); ++p) {
    first_.push_back(static_cast<int64_t>(chunks_.size()));
    per_param_blocks_.push_back({p, p, 1});
    const int64_t n = include.empty() || include[static_cast<size_t>(p)] ? store[p].numel() : 0;
    for (int64_t b = 0; b < n; b += chunk_elems) chunks_.push_back({p, b, std::min(n, b + chunk_elems)});
  }
  first_.push_back(static_cast<int64_t>(chunks_.size()));
}

void ChunkTable::sum_per_param(std::span<const double> partial, std::span<double> per_param) const {
  for (int p = 0; p < params(); ++p) {
    double s = 0.0;
    for (int64_t c = first_[p]; c < first_[p + 1]; ++c) s += partial[c];
    per_param[p] = s;
  }
}

template ChunkTable::ChunkTable(const ParamStore<float>&, int64_t, const std::vector<bool>&);
template ChunkTable::ChunkTable(const ParamStore<double>&, int64_t, const std::vector<bool>&);

}  // namespace brt::core
