// The collective-communication interface for one process group (world, dp_cp, tp or cp), shaped so
// that the MPI backend (CPU, tests) and the NCCL backend (GPU) fit behind it unchanged:
//  - every collective is non-blocking and returns a Request (NCCL: enqueued on a stream;
//    MPI: point-to-point messages progressed by test()/wait());
//  - a Stream is an opaque execution-queue handle (a cudaStream_t for NCCL; ignored by MPI);
//  - there is no global communicator: a Communicator object is passed to whatever needs it.
// Every collective carries a per-group sequence number so that a stall or a dead peer is
// reported as "op #seq, bytes, group, rank" rather than a silent hang (docs/parallelism.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace brt::parallel {

enum class DataType { kFloat32, kFloat64, kInt64 };
enum class ReduceOp { kSum, kMax };

std::size_t dtype_size(DataType type);
const char* dtype_name(DataType type);
const char* reduce_op_name(ReduceOp op);

template <typename T>
constexpr DataType dtype_of() {
  using U = std::remove_cv_t<T>;
  static_assert(std::is_same_v<U, float> || std::is_same_v<U, double> ||
                    std::is_same_v<U, int64_t>,
                "collectives support float, double and int64_t");
  if constexpr (std::is_same_v<U, float>) return DataType::kFloat32;
  else if constexpr (std::is_same_v<U, double>) return DataType::kFloat64;
  else return DataType::kInt64;
}

// An execution queue the collective is ordered on. Null means "the host": the MPI backend
// only accepts that. A device backend (NCCL) stores a cudaStream_t here; its collectives are
// then ordered on that stream, and work enqueued later on the same stream sees the result
// without a host-side wait().
// With `overlap`, the collective is ordered after the work already enqueued on `handle` but
// runs on the communicator's own stream, so the caller's later kernels overlap it; its result
// may then be used only after the request's wait() (DataParallel's gradient buckets).
struct Stream {
  void* handle = nullptr;
  bool overlap = false;
  bool is_host() const { return handle == nullptr; }
};

class JobMonitor;  // parallel/health/job_monitor.h

// Settings every backend honours.
struct CommOptions {
  // A collective still incomplete this long after it was issued ends the job with a report
  // naming it and the ranks it waits for (parallel/health/comm_error.h). Checked whenever its
  // request is tested or waited on. brt-dist sets it from train.timeout_s.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  // When set: every collective is recorded in its flight recorder, and a timeout ends the job
  // through JobMonitor::fail (flight records of every rank compared in the report).
  JobMonitor* monitor = nullptr;
};

// One in-flight collective. Backends implement it; callers hold it inside a Request.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  // Makes progress without blocking; true once the op is complete (then stays true).
  virtual bool test() = 0;
  // Blocks until complete. A backend with a timeout ends the job from here (see
  // CommOptions) rather than hanging; backend errors are thrown as CommError.
  virtual void wait() = 0;
};

// Owning handle to a collective that may still be running. Its buffers must stay valid and
// unmodified until test() returned true or wait() returned. Destroying (or assigning over)
// a Request that is still pending waits for it, so buffers are never freed under a transfer.
class Request {
 public:
  Request() = default;  // an already-complete request
  explicit Request(std::unique_ptr<PendingOp> op) : op_(std::move(op)) {}
  Request(Request&&) noexcept = default;
  Request& operator=(Request&& other) noexcept;
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  ~Request();

  bool test();
  void wait();
  bool done() const { return op_ == nullptr; }

 private:
  void finish_in_destructor() noexcept;
  std::unique_ptr<PendingOp> op_;  // null once complete
};

// Waits for every request, in order.
void wait_all(std::span<Request> requests);

class Communicator;
// `text` on every rank of `group` becomes root's (blocking; the group's deadline applies).
void broadcast_string(Communicator& group, std::string& text, int root);

// Collectives over one process group. All ranks of the group must issue the same
// collectives in the same order (as in MPI and NCCL). Counts are in elements.
//
// Results are deterministic: the MPI backend sums element-wise in ascending group-rank
// order, ((x0 + x1) + x2) + ..., on every rank, whatever the message sizes — so results are
// bit-identical between runs with the same layout and equal to that serial fold.
class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // A human-readable group name used in error messages, e.g. "tp[2]" or "world".
  virtual const std::string& name() const = 0;
  // World rank of group rank `group_rank` (for messages and layout checks).
  virtual int world_rank_of(int group_rank) const = 0;
  // Number of collectives issued on this group so far (the next one gets this number).
  virtual uint64_t sequence() const = 0;

  // ---- Non-blocking, untyped (what a backend implements; arguments checked here) ----
  // recv[i] = op over ranks of send[i], count elements. send == recv is in place.
  Request all_reduce_async(const void* send, void* recv, int64_t count, DataType type,
                           ReduceOp op = ReduceOp::kSum, Stream stream = {});
  // send holds size() blocks of recv_count elements; rank r receives op over ranks of block r.
  Request reduce_scatter_async(const void* send, void* recv, int64_t recv_count, DataType type,
                               ReduceOp op = ReduceOp::kSum, Stream stream = {});
  // recv (size() * send_count elements) receives rank r's send block at block r. send may
  // alias block rank() of recv (in place).
  Request all_gather_async(const void* send, void* recv, int64_t send_count, DataType type,
                           Stream stream = {});
  // buf on every rank receives root's buf.
  Request broadcast_async(void* buf, int64_t count, DataType type, int root, Stream stream = {});
  // A cyclic shift: recv on rank r receives the send of rank (r − offset) mod size() (offset +1:
  // every rank's block to its right neighbour, the last rank's to rank 0; −1: to the left).
  // Each rank sends and receives one block: the halo exchange of context parallelism
  // (core/sharding/context_parallel.h). send and recv must not overlap; |offset| < size().
  Request shift_async(const void* send, void* recv, int64_t count, DataType type, int offset,
                      Stream stream = {});
  Request barrier_async(Stream stream = {});

  // ---- Typed conveniences ----
  template <typename T>
  Request all_reduce_async(std::span<T> inout, ReduceOp op = ReduceOp::kSum, Stream s = {}) {
    return all_reduce_async(inout.data(), inout.data(), ssize(inout), dtype_of<T>(), op, s);
  }
  template <typename T>
  Request reduce_scatter_async(std::span<const T> send, std::span<T> recv,
                               ReduceOp op = ReduceOp::kSum, Stream s = {}) {
    check_block_sizes("reduce_scatter", ssize(send), ssize(recv));
    return reduce_scatter_async(send.data(), recv.data(), ssize(recv), dtype_of<T>(), op, s);
  }
  template <typename T>
  Request all_gather_async(std::span<const T> send, std::span<T> recv, Stream s = {}) {
    check_block_sizes("all_gather", ssize(recv), ssize(send));
    return all_gather_async(send.data(), recv.data(), ssize(send), dtype_of<T>(), s);
  }
  template <typename T>
  Request broadcast_async(std::span<T> buf, int root, Stream s = {}) {
    return broadcast_async(buf.data(), ssize(buf), dtype_of<T>(), root, s);
  }
  template <typename T>
  void shift(std::span<const T> send, std::span<T> recv, int offset) {
    if (recv.size() != send.size())
      throw std::invalid_argument("shift on group " + name() + ": send has " + std::to_string(send.size()) +
                                  " elements, recv " + std::to_string(recv.size()));
    shift_async(send.data(), recv.data(), ssize(send), dtype_of<T>(), offset).wait();
  }

  // ---- Blocking conveniences (issue, then wait) ----
  template <typename T>
  void all_reduce(std::span<T> inout, ReduceOp op = ReduceOp::kSum) {
    all_reduce_async(inout, op).wait();
  }
  template <typename T>
  void all_reduce(std::vector<T>& inout, ReduceOp op = ReduceOp::kSum) {
    all_reduce(std::span<T>(inout), op);
  }
  template <typename T>
  T all_reduce_value(T value, ReduceOp op = ReduceOp::kSum) {
    all_reduce(std::span<T>(&value, 1), op);
    return value;
  }
  template <typename T>
  void reduce_scatter(std::span<const T> send, std::span<T> recv, ReduceOp op = ReduceOp::kSum) {
    reduce_scatter_async(send, recv, op).wait();
  }
  template <typename T>
  void all_gather(std::span<const T> send, std::span<T> recv) {
    all_gather_async(send, recv).wait();
  }
  template <typename T>
  void broadcast(std::span<T> buf, int root) {
    broadcast_async(buf, root).wait();
  }
  void barrier() { barrier_async().wait(); }

 protected:
  // Backend hooks; arguments are already validated (counts >= 0, root in range, pointers
  // non-null when count > 0).
  virtual Request start_all_reduce(const void* send, void* recv, int64_t count, DataType type,
                                   ReduceOp op, Stream stream) = 0;
  virtual Request start_reduce_scatter(const void* send, void* recv, int64_t recv_count,
                                       DataType type, ReduceOp op, Stream stream) = 0;
  virtual Request start_all_gather(const void* send, void* recv, int64_t send_count,
                                   DataType type, Stream stream) = 0;
  virtual Request start_broadcast(void* buf, int64_t count, DataType type, int root,
                                  Stream stream) = 0;
  virtual Request start_barrier(Stream stream) = 0;
  // Backends that carry context parallelism's halos implement it (MPI, NCCL).
  virtual Request start_shift(const void* send, void* recv, int64_t count, DataType type, int offset,
                              Stream stream);

 private:
  template <typename S>
  static int64_t ssize(const S& s) {
    return static_cast<int64_t>(s.size());
  }
  // big == size() * small, else std::invalid_argument naming the op and group.
  void check_block_sizes(const char* op, int64_t big, int64_t small) const;
  void check_args(const char* op, const void* a, const void* b, int64_t count) const;
};

}  // namespace brt::parallel
