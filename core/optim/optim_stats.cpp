#include "core/optim/optim_stats.h"

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

void StatReducer::reduce_on_device(StatKind, double*, int64_t, std::span<const StatBlock>, kernels::StatKernels&) {
  throw std::logic_error("StatReducer::reduce_on_device: this reducer sums on the host; use reduce()");
}

DeviceParamTotals::DeviceParamTotals(const ChunkTable& table, kernels::Memory& memory)
    : blocks_(table.per_param_blocks()) {
  const auto n = static_cast<size_t>(table.params());
  first_chunk_.allocate(memory, n + 1, "per-parameter totals: first chunk");
  first_chunk_.from_host(table.first_chunks());
  std::vector<int64_t> one_each(n + 1);
  for (size_t p = 0; p <= n; ++p) one_each[p] = static_cast<int64_t>(p);
  one_each_.allocate(memory, n + 1, "per-parameter totals: one chunk each");
  one_each_.from_host(one_each);
  totals_.allocate(memory, n, "per-parameter totals");
}

void DeviceParamTotals::reduce(StatKind kind, const double* partial, StatReducer& reducer, kernels::StatKernels& k) {
  const auto n = static_cast<int32_t>(totals_.size());
  k.segment_sums(n, first_chunk_.data(), partial, totals_.data());
  reducer.reduce_on_device(kind, totals_.data(), n, blocks_, k);
}

kernels::Buffer<kernels::OptimChunk> upload_chunks(const ChunkTable& table, kernels::Memory& memory) {
  std::vector<kernels::OptimChunk> host;
  host.reserve(table.chunks().size());
  for (const ParamChunk& c : table.chunks()) host.push_back({c.begin, c.end, c.param, 0});
  kernels::Buffer<kernels::OptimChunk> out(memory, host.size(), "optimizer chunk list");
  out.from_host(host);
  return out;
}

template <typename T>
kernels::OptimizerKernels<T>& resolve_optimizer_kernels(kernels::OptimizerKernels<T>* given,
                                                        const ParamStore<T>& store,
                                                        std::unique_ptr<kernels::OptimizerKernels<T>>& owned,
                                                        const char* who) {
  if (given != nullptr) {
    // Device kernels run on their backend's stream and memory: a store elsewhere (another
    // device, or host memory) would be read out of order or not at all.
    if (!given->memory().host_accessible() && &given->memory() != &store.memory())
      throw std::runtime_error(std::string(who) + ": the " + given->name() + " optimizer kernels work on " +
                               given->memory().name() + " memory but the parameters live in " +
                               store.memory().name() + " memory");
    return *given;
  }
  if (!store.memory().host_accessible())
    throw std::runtime_error(std::string(who) + ": the parameters live in " + store.memory().name() +
                             " memory, which the host cannot read; pass that backend's optimizer "
                             "kernels (e.g. kernels::cuda::make_cuda_optimizer_kernels)");
  owned = kernels::make_cpu_optimizer_kernels<T>();
  return *owned;
}

void stats_to_host(kernels::Memory& memory, const kernels::Buffer<double>& src, std::vector<double>& dst) {
  if (dst.size() != src.size()) throw std::logic_error("stats_to_host: size mismatch");
  if (!dst.empty()) memory.to_host(dst.data(), src.data(), dst.size() * sizeof(double));
}

void stats_from_host(kernels::Memory& memory, const std::vector<double>& src, kernels::Buffer<double>& dst) {
  if (dst.size() != src.size()) throw std::logic_error("stats_from_host: size mismatch");
  if (!src.empty()) memory.from_host(dst.data(), src.data(), src.size() * sizeof(double));
}

template kernels::OptimizerKernels<float>& resolve_optimizer_kernels(
    kernels::OptimizerKernels<float>*, const ParamStore<float>&, std::unique_ptr<kernels::OptimizerKernels<float>>&,
    const char*);
template kernels::OptimizerKernels<double>& resolve_optimizer_kernels(
    kernels::OptimizerKernels<double>*, const ParamStore<double>&,
    std::unique_ptr<kernels::OptimizerKernels<double>>&, const char*);
template ChunkTable::ChunkTable(const ParamStore<float>&, int64_t, const std::vector<bool>&);
template ChunkTable::ChunkTable(const ParamStore<double>&, int64_t, const std::vector<bool>&);

}  // namespace brt::core
