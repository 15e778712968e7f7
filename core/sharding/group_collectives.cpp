#include "core/sharding/group_collectives.h"

#include <algorithm>
#include <cstddef>
#include <deque>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace brt::core {

namespace detail {

// Shared by the copies of one bound GroupCollectives (the layers keep copies): the memory, the
// device communicator and stream, the host staging and the device collectives in flight.
struct GroupLink {
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

GroupCollectives::GroupCollectives(parallel::Communicator& group)
    : comm_(group.size() > 1 ? &group : nullptr), rank_(group.rank()), size_(group.size()) {}

GroupCollectives::GroupCollectives(parallel::Communicator& group, kernels::Memory& memory,
                                   parallel::Communicator* device_group, parallel::Stream stream)
    : GroupCollectives(group) {
  if (device_group != nullptr &&
      (device_group->size() != group.size() || device_group->rank() != group.rank()))
    throw std::invalid_argument("GroupCollectives: device group " + device_group->name() +
                                " is not group " + group.name() + " (rank " +
                                std::to_string(device_group->rank()) + " of " +
                                std::to_string(device_group->size()) + " vs " +
                                std::to_string(group.rank()) + " of " +
                                std::to_string(group.size()) + ")");
  link_ = std::make_shared<detail::GroupLink>();
  link_->memory = &memory;
  link_->device = memory.host_accessible() ? nullptr : device_group;
  link_->stream = stream;
  link_->stream.overlap = false;  // later kernels on the stream read the result
}

GroupCollectives GroupCollectives::bound_to(kernels::Memory& memory) const {
  if (comm_ == nullptr) return *this;
  if (link_ != nullptr && link_->memory == &memory) return *this;
  return GroupCollectives(*comm_, memory, nullptr, {});
}

bool GroupCollectives::on_device_group() const {
  return link_ != nullptr && link_->device != nullptr;
}

namespace {

bool host_path(const detail::GroupLink* link) {
  return link == nullptr || link->memory->host_accessible();
}

}  // namespace

template <typename T>
void GroupCollectives::all_reduce(T* data, int64_t n, parallel::ReduceOp op) const {
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
void GroupCollectives::copy_alone(const T* send, T* recv, int64_t n) const {
  if (n == 0 || send == recv) return;
  if (link_ != nullptr) link_->memory->copy(recv, send, size_t(n) * sizeof(T));
  else std::copy(send, send + n, recv);
}

template <typename T>
void GroupCollectives::all_gather(const T* send, T* recv, int64_t n) const {
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
void GroupCollectives::reduce_scatter(const T* send, T* recv, int64_t n) const {
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
void GroupCollectives::shift(const T* send, T* recv, int64_t n, int offset) const {
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
void GroupCollectives::host_all_reduce_sum(T* data, int64_t n) const {
  if (comm_ == nullptr || n == 0) return;
  comm_->all_reduce(std::span<T>(data, size_t(n)), parallel::ReduceOp::kSum);
}

#define BRT_INSTANTIATE_GROUP_COLLECTIVES(T)                                          \
  template void GroupCollectives::all_reduce<T>(T*, int64_t, parallel::ReduceOp) const; \
  template void GroupCollectives::all_gather<T>(const T*, T*, int64_t) const;        \
  template void GroupCollectives::shift<T>(const T*, T*, int64_t, int) const;         \
  template void GroupCollectives::reduce_scatter<T>(const T*, T*, int64_t) const;    \
  template void GroupCollectives::host_all_reduce_sum<T>(T*, int64_t) const;

BRT_INSTANTIATE_GROUP_COLLECTIVES(float)
BRT_INSTANTIATE_GROUP_COLLECTIVES(double)

}  // namespace brt::core
