#include "core/sharding/tensor_parallel.h"

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace brt::core {

TensorParallel::TensorParallel(parallel::Communicator& group) : GroupCollectives(group) {}

TensorParallel::TensorParallel(parallel::Communicator& group, kernels::Memory& memory,
                               parallel::Communicator* device_group, parallel::Stream stream)
    : GroupCollectives(group, memory, device_group, stream) {}

TensorParallel TensorParallel::bound_to(kernels::Memory& memory) const {
  return TensorParallel(GroupCollectives::bound_to(memory));
}

int TensorParallel::local(int n, const std::string& what) const {
  if (n % size() != 0)
    throw std::invalid_argument(what + " = " + std::to_string(n) + " is not divisible by the "
                                "tensor-parallel size " + std::to_string(size()));
  return n / size();
}


template <typename T>
void gather_shards(const TensorParallel& tp, const ParamSpec& spec, const T* local, T* full,
                   std::vector<T>& staging) {
  const int64_t n = spec.numel();
  if (!spec.shard.sharded()) {
    std::copy(local, local + n, full);
    return;
  }
  if (tp.size() != spec.shard.size || tp.rank() != spec.shard.rank)
    throw std::logic_error("gather_shards: " + spec.name + " is sharded " +
                           std::to_string(spec.shard.size) + " ways, the TP group has " +
                           std::to_string(tp.size()) + " ranks");
  staging.resize(size_t(n) * size_t(tp.size()));
  tp.group()->all_gather(std::span<const T>(local, size_t(n)), std::span<T>(staging));
  ParamSpec other = spec;
  for (int r = 0; r < tp.size(); ++r) {
    other.shard.rank = r;
    const T* part = staging.data() + int64_t(r) * n;
    for (int64_t i = 0; i < n; ++i) full[other.global_index(i)] = part[i];
  }
}

template <typename T>
void extract_shard(const ParamSpec& spec, const T* full, T* local) {
  const int64_t n = spec.numel();
  for (int64_t i = 0; i < n; ++i) local[i] = full[spec.global_index(i)];
}

template void gather_shards<float>(const TensorParallel&, const ParamSpec&, const float*, float*,
                                   std::vector<float>&);
template void gather_shards<double>(const TensorParallel&, const ParamSpec&, const double*,
                                    double*, std::vector<double>&);
template void extract_shard<float>(const ParamSpec&, const float*, float*);
template void extract_shard<double>(const ParamSpec&, const double*, double*);

template <typename T>
TensorParallelStatReducer<T>::TensorParallelStatReducer(const ParamStore<T>& store,
                                                        const TensorParallel& tp,
                                                        StatReducer* next)
    : store_(store), tp_(tp), next_(next) {}

template <typename T>
bool TensorParallelStatReducer<T>::partial(const StatBlock& b) const {
  return b.spans_shard && store_[b.param].spec.shard.sharded();
}

template <typename T>
void TensorParallelStatReducer<T>::reduce(StatKind kind, std::span<double> sums,
                                          std::span<const StatBlock> blocks) {
  if (tp_.active()) {
    // Gather the partial entries, sum them over TP in one message, put them back.
    staging_.clear();
    for (const auto& b : blocks)
      if (partial(b))
        staging_.insert(staging_.end(), sums.begin() + b.offset, sums.begin() + b.offset + b.count);
    tp_.host_all_reduce_sum(staging_.data(), int64_t(staging_.size()));
    size_t k = 0;
    for (const auto& b : blocks) {
      if (!partial(b)) continue;
      std::copy(staging_.begin() + int64_t(k), staging_.begin() + int64_t(k) + b.count,
                sums.begin() + b.offset);
      k += size_t(b.count);
    }
  }
  if (next_ != nullptr) next_->reduce(kind, sums, blocks);
}

namespace {
bool same_blocks(const std::vector<StatBlock>& a, std::span<const StatBlock> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].param != b[i].param || a[i].offset != b[i].offset || a[i].count != b[i].count ||
        a[i].spans_shard != b[i].spans_shard)
      return false;
  return true;
}
}  // namespace

template <typename T>
typename TensorParallelStatReducer<T>::DeviceRun& TensorParallelStatReducer<T>::device_run(
    StatKind kind, int64_t n, std::span<const StatBlock> blocks, kernels::Memory& memory) {
  DeviceRun& r = device_runs_[kind];
  if (r.n == n && same_blocks(r.blocks, blocks) && (r.index.empty() || r.index.memory() == &memory)) return r;
  std::vector<int64_t> index;
  for (const StatBlock& b : blocks) {
    if (b.offset < 0 || b.count < 0 || b.offset + b.count > n)
      throw std::logic_error("TensorParallelStatReducer: a statistic block runs past its " + std::to_string(n) +
                             " sums");
    if (partial(b))
      for (int64_t i = 0; i < b.count; ++i) index.push_back(b.offset + i);
  }
  r.blocks.assign(blocks.begin(), blocks.end());
  r.n = n;
  r.index.allocate(memory, index.size(), "TP statistics: partial entries");
  r.index.from_host(index);
  r.run.allocate(memory, index.size(), "TP statistics: the summed run");
  return r;
}

template <typename T>
void TensorParallelStatReducer<T>::reduce_on_device(StatKind kind, double* sums, int64_t n,
                                                    std::span<const StatBlock> blocks, kernels::StatKernels& moves) {
  if (tp_.active()) {
    kernels::Memory& memory = moves.memory();
    if (!device_tp_) device_tp_ = tp_.bound_to(memory);
    DeviceRun& r = device_run(kind, n, blocks, memory);
    const auto count = static_cast<int64_t>(r.index.size());
    if (count > 0) {
      moves.gather_stats(count, r.index.data(), sums, r.run.data());
      device_tp_->all_reduce_sum(r.run.data(), count);
      moves.scatter_stats(count, r.index.data(), r.run.data(), sums);
    }
  }
  if (next_ != nullptr) next_->reduce_on_device(kind, sums, n, blocks, moves);
}

template class TensorParallelStatReducer<float>;
template class TensorParallelStatReducer<double>;

}  // namespace brt::core
