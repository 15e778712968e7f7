#include "core/tensor_parallel.h"

#include <algorithm>

namespace brt::core {

TensorParallel::TensorParallel(parallel::Communicator& group)
    : comm_(group.size() > 1 ? &group : nullptr), rank_(group.rank()), size_(group.size()) {}

int TensorParallel::local(int n, const std::string& what) const {
  if (n % size_ != 0)
    throw std::invalid_argument(what + " = " + std::to_string(n) + " is not divisible by the "
                                "tensor-parallel size " + std::to_string(size_));
  return n / size_;
}

void require_host_memory(const TensorParallel& tp, const kernels::Memory& memory,
                         const std::string& what) {
  if (!tp.active() || memory.host_accessible()) return;
  throw std::runtime_error(what + ": tensor parallelism (--tp " + std::to_string(tp.size()) +
                           ") is not supported on " + memory.name() +
                           " memory yet (its collectives reorder rows on the host); use --tp 1");
}

template <typename T>
void TensorParallel::all_reduce_sum(T* data, int64_t n) const {
  if (comm_ == nullptr || n == 0) return;
  comm_->all_reduce(std::span<T>(data, size_t(n)), parallel::ReduceOp::kSum);
}

template <typename T>
void TensorParallel::all_reduce_max(T* data, int64_t n) const {
  if (comm_ == nullptr || n == 0) return;
  comm_->all_reduce(std::span<T>(data, size_t(n)), parallel::ReduceOp::kMax);
}

template void TensorParallel::all_reduce_sum<float>(float*, int64_t) const;
template void TensorParallel::all_reduce_sum<double>(double*, int64_t) const;
template void TensorParallel::all_reduce_max<float>(float*, int64_t) const;
template void TensorParallel::all_reduce_max<double>(double*, int64_t) const;

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
    tp_.all_reduce_sum(staging_.data(), int64_t(staging_.size()));
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
