// Backend-independent parts of the Communicator interface: argument checks (so every backend
// rejects the same mistakes with the same message) and the Request handle.
#include "parallel/communicator.h"

#include <cstring>

#include <cstdio>
#include <exception>
#include <stdexcept>

namespace brt::parallel {

std::size_t dtype_size(DataType type) {
  switch (type) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat64: return 8;
    case DataType::kInt64: return 8;
  }
  return 0;
}

const char* dtype_name(DataType type) {
  switch (type) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kInt64: return "int64";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "max"; }

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    finish_in_destructor();
    op_ = std::move(other.op_);
  }
  return *this;
}

Request::~Request() { finish_in_destructor(); }

void Request::finish_in_destructor() noexcept {
  if (!op_) return;
  try {
    op_->wait();
  } catch (const std::exception& e) {
    // A destructor cannot throw, and freeing buffers under a live transfer would corrupt
    // memory; so say what happened and stop.
    std::fprintf(stderr, "brt::parallel: collective failed while its Request was destroyed: %s\n",
                 e.what());
    std::terminate();
  }
  op_.reset();
}

// A failed op is dropped before the error propagates: it cannot complete, and the group is
// unusable after a CommError (end the job), so there is nothing left to wait for.
bool Request::test() {
  if (!op_) return true;
  try {
    if (!op_->test()) return false;
  } catch (...) {
    op_.reset();
    throw;
  }
  op_.reset();
  return true;
}

void Request::wait() {
  if (!op_) return;
  try {
    op_->wait();
  } catch (...) {
    op_.reset();
    throw;
  }
  op_.reset();
}

void wait_all(std::span<Request> requests) {
  for (Request& r : requests) r.wait();
}

void Communicator::check_block_sizes(const char* op, int64_t big, int64_t small) const {
  if (big != small * size()) {
    throw std::invalid_argument(std::string(op) + " on group " + name() + ": the larger buffer has " +
                                std::to_string(big) + " elements but must hold group size " +
                                std::to_string(size()) + " x " + std::to_string(small));
  }
}

void Communicator::check_args(const char* op, const void* a, const void* b, int64_t count) const {
  if (count < 0) {
    throw std::invalid_argument(std::string(op) + " on group " + name() + ": negative count " +
                                std::to_string(count));
  }
  if (count > 0 && (a == nullptr || b == nullptr)) {
    throw std::invalid_argument(std::string(op) + " on group " + name() +
                                ": null buffer with count " + std::to_string(count));
  }
}

Request Communicator::all_reduce_async(const void* send, void* recv, int64_t count, DataType type,
                                       ReduceOp op, Stream stream) {
  check_args("all_reduce", send, recv, count);
  return start_all_reduce(send, recv, count, type, op, stream);
}

Request Communicator::reduce_scatter_async(const void* send, void* recv, int64_t recv_count,
                                           DataType type, ReduceOp op, Stream stream) {
  check_args("reduce_scatter", send, recv, recv_count);
  return start_reduce_scatter(send, recv, recv_count, type, op, stream);
}

Request Communicator::all_gather_async(const void* send, void* recv, int64_t send_count,
                                       DataType type, Stream stream) {
  check_args("all_gather", send, recv, send_count);
  return start_all_gather(send, recv, send_count, type, stream);
}

Request Communicator::broadcast_async(void* buf, int64_t count, DataType type, int root,
                                      Stream stream) {
  check_args("broadcast", buf, buf, count);
  if (root < 0 || root >= size()) {
    throw std::invalid_argument("broadcast on group " + name() + ": root " + std::to_string(root) +
                                " is not a rank of this group of size " + std::to_string(size()));
  }
  return start_broadcast(buf, count, type, root, stream);
}

Request Communicator::barrier_async(Stream stream) { return start_barrier(stream); }

Request Communicator::shift_async(const void* send, void* recv, int64_t count, DataType type, int offset,
                                  Stream stream) {
  check_args("shift", send, recv, count);
  if (offset <= -size() || offset >= size())
    throw std::invalid_argument("shift on group " + name() + ": offset " + std::to_string(offset) +
                                " is not within ±(size " + std::to_string(size()) + " − 1)");
  return start_shift(send, recv, count, type, offset, stream);
}

Request Communicator::start_shift(const void*, void*, int64_t, DataType, int, Stream) {
  throw std::logic_error("shift on group " + name() + ": this communicator does not implement it");
}

void broadcast_string(Communicator& group, std::string& text, int root) {
  // The communicator carries numbers: the length, then the bytes packed into int64 words.
  int64_t length = static_cast<int64_t>(text.size());
  group.broadcast(std::span<int64_t>(&length, 1), root);
  std::vector<int64_t> words(static_cast<size_t>((length + 7) / 8), 0);
  if (group.rank() == root) std::memcpy(words.data(), text.data(), text.size());
  group.broadcast(std::span<int64_t>(words), root);
  text.assign(reinterpret_cast<const char*>(words.data()), static_cast<size_t>(length));
}

}  // namespace brt::parallel
