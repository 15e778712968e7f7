#include "core/sharding/tensor_parallel.h"

#include <algorithm>
#include <cstddef>

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
void TensorParallelStatReducer<T>::reduce(StatKind kind, std::span<double> sums,
                                          std::span<const StatBlock> blocks) {
  if (tp_.active()) {
    const auto partial = [&](const StatBlock& b) {
      return b.spans_shard && store_[b.param].spec.shard.sharded();
    };
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

template class TensorParallelStatReducer<float>;
template class TensorParallelStatReducer<double>;

}  // namespace brt::core
