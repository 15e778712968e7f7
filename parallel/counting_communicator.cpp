#include "parallel/counting_communicator.h"

namespace brt::parallel {

namespace {
int64_t bytes_of(int64_t count, DataType type) { return count * int64_t(dtype_size(type)); }
}  // namespace

Request CountingCommunicator::start_all_reduce(const void* send, void* recv, int64_t count, DataType type,
                                               ReduceOp op, Stream s) {
  ++calls_[{'r', bytes_of(count, type)}];
  return inner_.all_reduce_async(send, recv, count, type, op, s);
}

Request CountingCommunicator::start_reduce_scatter(const void* send, void* recv, int64_t recv_count,
                                                   DataType type, ReduceOp op, Stream s) {
  ++calls_[{'s', bytes_of(recv_count, type) * size()}];
  return inner_.reduce_scatter_async(send, recv, recv_count, type, op, s);
}

Request CountingCommunicator::start_all_gather(const void* send, void* recv, int64_t send_count,
                                               DataType type, Stream s) {
  ++calls_[{'g', bytes_of(send_count, type) * size()}];
  sent_ += bytes_of(send_count, type) * (size() - 1);
  return inner_.all_gather_async(send, recv, send_count, type, s);
}

Request CountingCommunicator::start_broadcast(void* buf, int64_t count, DataType type, int root, Stream s) {
  ++calls_[{'b', bytes_of(count, type)}];
  return inner_.broadcast_async(buf, count, type, root, s);
}

Request CountingCommunicator::start_shift(const void* send, void* recv, int64_t count, DataType type,
                                          int offset, Stream s) {
  ++calls_[{'x', bytes_of(count, type)}];
  if (size() > 1) sent_ += bytes_of(count, type);
  return inner_.shift_async(send, recv, count, type, offset, s);
}

}  // namespace brt::parallel
