#include "core/sharding/tensor_parallel.h"

#include <algorithm>
#include <cstddef>
#include <deque>

namespace brt::core {

namespace detail {

// Shared by the copies of one bound TensorParallel (the layers keep copies): the memory, the
// device communicator and stream, the host staging and the device collectives in flight.
struct TpLink {
  kernels::Memory* memory = nullptr;
  parallel::Communicator* device = nullptr;  // null: stage through the host
  parallel::Stream stream;
  // Host staging for the staged path: grows to the largest collective in the first step,
  // then a step allocates nothing.
  std::vector<std::byte> staging;
  // Device collectives still running. Each is ordered on the backend's stream, so nothing
  // waits for them; their requests are kept (and tested) so that an NCCL error or timeout is
  // still reported, and so that a Request's destructor does not make the host wait.
  std::deque<parallel::Request> in_flight;

  template <typename T>
  T* host_buffer(int64_t n) {
    const size_t bytes = size_t(n) * sizeof(T);
    if (staging.size() < bytes) staging.resize(bytes);
    return reinterpret_cast<T*>(staging.data());
  }
  void keep(parallel::Request request) {
    // Bounded bookkeeping: completed requests are dropped; a long backlog is waited for.
    constexpr size_t kMaxInFlight = 256;
    while (!in_flight.empty() && in_flight.front().test()) in_flight.pop_front();
    if (in_flight.size() >= kMaxInFlight) {
      in_flight.front().wait();
      in_flight.pop_front();
    }
    in_flight.push_back(std::move(request));
  }
};

}  // namespace detail

TensorParallel::TensorParallel(parallel::Communicator& group)
    : comm_(group.size() > 1 ? &group : nullptr), rank_(group.rank()), size_(group.size()) {}

TensorParallel::TensorParallel(parallel::Communicator& group, kernels::Memory& memory,
                               parallel::Communicator* device_group, parallel::Stream stream)
    : TensorParallel(group) {
  if (device_group != nullptr &&
      (device_group->size() != group.size() || device_group->rank() != group.rank()))
    throw std::invalid_argument("TensorParallel: device group " + device_group->name() +
                                " is not group " + group.name() + " (rank " +
                                std::to_string(device_group->rank()) + " of " +
                                std::to_string(device_group->size()) + " vs " +
                                std::to_string(group.rank()) + " of " +
                                std::to_string(group.size()) + ")");
  link_ = std::make_shared<detail::TpLink>();
  link_->memory = &memory;
  link_->device = memory.host_accessible() ? nullptr : device_group;
  link_->stream = stream;
  link_->stream.overlap = false;  // later kernels on the stream read the result
}

TensorParallel TensorParallel::bound_to(kernels::Memory& memory) const {
  if (comm_ == nullptr) return *this;
  if (link_ != nullptr && link_->memory == &memory) return *this;
  return TensorParallel(*comm_, memory, nullptr, {});
}

bool TensorParallel::on_device_group() const {
  return link_ != nullptr && link_->device != nullptr;
}

int TensorParallel::local(int n, const std::string& what) const {
  if (n % size_ != 0)
    throw std::invalid_argument(what + " = " + std::to_string(n) + " is not divisible by the "
                                "tensor-parallel size " + std::to_string(size_));
  return n / size_;
}

namespace {

bool host_path(const detail::TpLink* link) {
  return link == nullptr || link->memory->host_accessible();
}

}  // namespace

template <typename T>
void TensorParallel::all_reduce(T* data, int64_t n, parallel::ReduceOp op) const {
  if (comm_ == nullptr || n == 0) return;
  if (host_path(link_.get())) {
    comm_->all_reduce(std::span<T>(data, size_t(n)), op);
    return;
  }
  if (link_->device != nullptr)
    return link_->keep(
        link_->device->all_reduce_async(data, data, n, parallel::dtype_of<T>(), op, link_->stream));
  T* host = link_->host_buffer<T>(n);
  link_->memory->to_host(host, data, size_t(n) * sizeof(T));
  comm_->all_reduce(std::span<T>(host, size_t(n)), op);
  link_->memory->from_host(data, host, size_t(n) * sizeof(T));
}

template <typename T>
void TensorParallel::copy_alone(const T* send, T* recv, int64_t n) const {
  if (n == 0 || send == recv) return;
  if (link_ != nullptr) link_->memory->copy(recv, send, size_t(n) * sizeof(T));
  else std::copy(send, send + n, recv);
}

template <typename T>
void TensorParallel::all_gather(const T* send, T* recv, int64_t n) const {
  const size_t total = size_t(n) * size_t(size_);
  if (comm_ == nullptr) return copy_alone(send, recv, n);
  if (n == 0) return;
  if (host_path(link_.get())) {
    comm_->all_gather(std::span<const T>(send, size_t(n)), std::span<T>(recv, total));
    return;
  }
  if (link_->device != nullptr)
    return link_->keep(link_->device->all_gather_async(send, recv, n, parallel::dtype_of<T>(),
                                                       link_->stream));
  T* host = link_->host_buffer<T>(int64_t(total));
  T* mine = host + int64_t(rank_) * n;  // in place: send is block rank() of recv
  link_->memory->to_host(mine, send, size_t(n) * sizeof(T));
  comm_->all_gather(std::span<const T>(mine, size_t(n)), std::span<T>(host, total));
  link_->memory->from_host(recv, host, total * sizeof(T));
}

template <typename T>
void TensorParallel::reduce_scatter(const T* send, T* recv, int64_t n) const {
  const size_t total = size_t(n) * size_t(size_);
  if (comm_ == nullptr) return copy_alone(send, recv, n);
  if (n == 0) return;
  if (host_path(link_.get())) {
    comm_->reduce_scatter(std::span<const T>(send, total), std::span<T>(recv, size_t(n)));
    return;
  }
  if (link_->device != nullptr)
    return link_->keep(link_->device->reduce_scatter_async(
        send, recv, n, parallel::dtype_of<T>(), parallel::ReduceOp::kSum, link_->stream));
  T* host = link_->host_buffer<T>(int64_t(total) + n);
  T* result = host + total;
  link_->memory->to_host(host, send, total * sizeof(T));
  comm_->reduce_scatter(std::span<const T>(host, total), std::span<T>(result, size_t(n)));
  link_->memory->from_host(recv, result, size_t(n) * sizeof(T));
}

template <typename T>
void TensorParallel::shift(const T* send, T* recv, int64_t n, int offset) const {
  if (comm_ == nullptr) return copy_alone(send, recv, n);
  if (n == 0) return;
  if (host_path(link_.get())) {
    comm_->shift(std::span<const T>(send, size_t(n)), std::span<T>(recv, size_t(n)), offset);
    return;
  }
  if (link_->device != nullptr)
    return link_->keep(link_->device->shift_async(send, recv, n, parallel::dtype_of<T>(), offset, link_->stream));
  T* host = link_->host_buffer<T>(2 * n);
  link_->memory->to_host(host, send, size_t(n) * sizeof(T));
  comm_->shift(std::span<const T>(host, size_t(n)), std::span<T>(host + n, size_t(n)), offset);
  link_->memory->from_host(recv, host + n, size_t(n) * sizeof(T));
}

template <typename T>
void TensorParallel::host_all_reduce_sum(T* data, int64_t n) const {
  if (comm_ == nullptr || n == 0) return;
  comm_->all_reduce(std::span<T>(data, size_t(n)), parallel::ReduceOp::kSum);
}

#define BRT_INSTANTIATE_TP_COLLECTIVES(T)                                          \
  template void TensorParallel::all_reduce<T>(T*, int64_t, parallel::ReduceOp) const; \
  template void TensorParallel::all_gather<T>(const T*, T*, int64_t) const;        \
  template void TensorParallel::shift<T>(const T*, T*, int64_t, int) const;         \
  template void TensorParallel::reduce_scatter<T>(const T*, T*, int64_t) const;    \
  template void TensorParallel::host_all_reduce_sum<T>(T*, int64_t) const;

BRT_INSTANTIATE_TP_COLLECTIVES(float)
BRT_INSTANTIATE_TP_COLLECTIVES(double)

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
