#include "parallel/nccl_communicator.h"

#include "parallel/health/job_monitor.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "parallel/health/comm_error.h"

namespace brt::parallel {
namespace detail {

// A collective in flight on the device: the event recorded after it, for the deadline.
struct InFlight {
  cudaEvent_t done = nullptr;
  CollectiveInfo info;
  std::chrono::steady_clock::time_point started;
  ~InFlight() {
    if (done != nullptr) cudaEventDestroy(done);
  }
};

struct NcclGroup {
  std::string name;
  CommOptions options;
  int rank = 0, size = 1;
  std::vector<int> world_ranks;
  std::vector<std::string> hosts;
  ncclComm_t comm = nullptr;
  cudaStream_t own_stream = nullptr;  // for collectives issued on a host Stream
  cudaEvent_t order_event = nullptr;  // orders own_stream after a caller's stream (Stream::overlap)
  int* barrier_word = nullptr;        // device int for barrier()'s one-element all-reduce
  bool aborted = false;
  // Collectives issued and not yet seen complete, oldest first (check_health's deadline; the
  // collectives of the tensor-parallel layers are never waited on by a Request).
  std::deque<std::shared_ptr<InFlight>> in_flight;

  RankLocation self() const { return {world_ranks[rank], hosts[rank]}; }
  std::string where() const {
    return "world rank " + std::to_string(world_ranks[rank]) + " (host " + hosts[rank] + ")";
  }
  double limit_seconds() const { return std::chrono::duration<double>(options.timeout).count(); }

  void abort_comm() {
    if (comm != nullptr) ncclCommAbort(comm);
    comm = nullptr;
    aborted = true;
  }
  // Past the deadline: abort first so no kernel stays blocked on a dead peer, then end the job
  // with the timeout report. NCCL cannot say which peer stalled: every other member is named.
  [[noreturn]] void time_out(const CollectiveInfo& info, double waited) {
    abort_comm();
    std::vector<RankLocation> peers;
    for (int r = 0; r < size; ++r)
      if (r != rank) peers.push_back({world_ranks[r], hosts[r]});
    const std::string report = describe_timeout(info, self(), waited, limit_seconds(), peers);
    if (JobMonitor* monitor = options.monitor) monitor->fail(report, kCollectiveTimeoutExitCode);
    abort_job(report, kCollectiveTimeoutExitCode);
  }
  // Drops the completed collectives at the front of in_flight.
  void prune() {
    while (!in_flight.empty() && cudaEventQuery(in_flight.front()->done) == cudaSuccess)
      in_flight.pop_front();
  }
  // Waits (polling, up to the timeout) while the communicator is still busy with a
  // non-blocking operation (init, finalize). False when the deadline passed.
  bool settle(const char* what) {
    const auto start = std::chrono::steady_clock::now();
    ncclResult_t state = ncclInProgress;
    while (ncclCommGetAsyncError(comm, &state) == ncclSuccess && state == ncclInProgress) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit_seconds())
        return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (state != ncclSuccess && state != ncclInProgress)
      throw CommError(std::string(what) + " failed for NCCL group '" + name + "' on " + where() +
                      ": " + ncclGetErrorString(state));
    return true;
  }

  ~NcclGroup() {
    in_flight.clear();
    if (comm != nullptr) {
      if (aborted) {
        ncclCommAbort(comm);
      } else {
        // A non-blocking communicator finishes its outstanding work before it is destroyed.
        bool settled = false;
        try {
          settled = ncclCommFinalize(comm) == ncclSuccess && settle("ncclCommFinalize");
        } catch (const CommError&) {
        }
        if (settled) ncclCommDestroy(comm);
        else ncclCommAbort(comm);
      }
    }
    if (barrier_word != nullptr) cudaFree(barrier_word);
    if (order_event != nullptr) cudaEventDestroy(order_event);
    if (own_stream != nullptr) cudaStreamDestroy(own_stream);
  }
};

}  // namespace detail

namespace {

using detail::InFlight;
using detail::NcclGroup;

void check_setup(bool ok, const std::string& what, const std::string& group,
                 const std::string& detail_text) {
  if (!ok) {
    throw CommError(what + " failed while creating NCCL group '" + group + "': " + detail_text);
  }
}

ncclDataType_t to_nccl(DataType type) {
  switch (type) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kInt64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t to_nccl(ReduceOp op) { return op == ReduceOp::kMax ? ncclMax : ncclSum; }

// One collective in flight: complete when its event (the group's in-flight record) has fired.
class NcclPendingOp final : public PendingOp {
 public:
  NcclPendingOp(std::shared_ptr<NcclGroup> group, std::shared_ptr<InFlight> record)
      : group_(std::move(group)), record_(std::move(record)), info_(record_->info),
        started_(record_->started) {
    if (JobMonitor* monitor = group_->options.monitor)
      flight_ = monitor->recorder().begin(info_.op, info_.group, info_.sequence, info_.bytes);
  }

  bool test() override {
    if (done_) return true;
    if (group_->aborted) fail("the communicator was aborted by another collective's failure");
    const cudaError_t status = cudaEventQuery(record_->done);
    if (status == cudaSuccess) {
      done_ = true;
      if (JobMonitor* monitor = group_->options.monitor) monitor->recorder().end(flight_);
      return true;
    }
    if (status != cudaErrorNotReady) fail(std::string("CUDA: ") + cudaGetErrorString(status));
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(group_->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      fail(std::string("NCCL: ") + ncclGetErrorString(async));
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    if (waited > group_->limit_seconds()) group_->time_out(info_, waited);
    return false;
  }

  void wait() override {
    while (!test()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    group_->abort_comm();
    throw CommError(describe(info_) + " failed on " + group_->where() + ": " + why);
  }

  std::shared_ptr<NcclGroup> group_;
  std::shared_ptr<InFlight> record_;  // shared with the group's in-flight list
  CollectiveInfo info_;
  std::chrono::steady_clock::time_point started_;
  bool done_ = false;
  uint64_t flight_ = 0;  // the flight recorder's token (options.monitor)
};

}  // namespace

std::string nccl_version_string() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown (ncclGetVersion failed)";
  // NCCL >= 2.9 encodes major*10000 + minor*100 + patch.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

int select_gpu_for_local_rank(int local_rank) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    throw CommError("local rank " + std::to_string(local_rank) + " sees no CUDA device");
  }
  const int device = local_rank % count;
  const cudaError_t status = cudaSetDevice(device);
  if (status != cudaSuccess) {
    throw CommError("local rank " + std::to_string(local_rank) + ": cudaSetDevice(" +
                    std::to_string(device) + ") failed: " + cudaGetErrorString(status));
  }
  return device;
}

NcclCommunicator::NcclCommunicator(MPI_Comm comm, std::string name, CommOptions options)
    : group_(std::make_shared<NcclGroup>()) {
  auto& g = *group_;
  g.name = std::move(name);
  g.options = options;
  MPI_Comm_rank(comm, &g.rank);
  MPI_Comm_size(comm, &g.size);
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  g.world_ranks.resize(static_cast<size_t>(g.size));
  check_setup(MPI_Allgather(&world_rank, 1, MPI_INT, g.world_ranks.data(), 1, MPI_INT, comm) ==
                  MPI_SUCCESS,
              "MPI_Allgather", g.name, "world ranks");
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int host_len = 0;
  MPI_Get_processor_name(host, &host_len);
  std::vector<char> hosts(static_cast<size_t>(g.size) * MPI_MAX_PROCESSOR_NAME);
  check_setup(MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts.data(),
                            MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm) == MPI_SUCCESS,
              "MPI_Allgather", g.name, "host names");
  for (int r = 0; r < g.size; ++r) {
    const char* h = hosts.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    g.hosts.emplace_back(h, strnlen(h, MPI_MAX_PROCESSOR_NAME));
  }

  // Rank 0's unique id reaches every member over MPI. Every member reports whether it could
  // make one, so a failure on rank 0 does not leave the others in ncclCommInitRank.
  ncclUniqueId id{};
  int id_ok = 1;
  if (g.rank == 0) id_ok = ncclGetUniqueId(&id) == ncclSuccess ? 1 : 0;
  check_setup(MPI_Bcast(&id_ok, 1, MPI_INT, 0, comm) == MPI_SUCCESS, "MPI_Bcast", g.name, "id");
  check_setup(id_ok == 1, "ncclGetUniqueId", g.name, "on group rank 0");
  check_setup(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm) == MPI_SUCCESS, "MPI_Bcast", g.name,
              "unique id");
  // Non-blocking, so a member that never joins ends in the timeout report, not a hang.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t init = ncclCommInitRankConfig(&g.comm, g.size, id, g.rank, &config);
  check_setup(init == ncclSuccess || init == ncclInProgress, "ncclCommInitRankConfig", g.name,
              g.where() + ": " + ncclGetErrorString(init));
  const auto init_start = std::chrono::steady_clock::now();
  bool joined = false;
  try {
    joined = g.settle("ncclCommInitRankConfig");
  } catch (const CommError&) {
    g.abort_comm();  // a communicator that failed to start is aborted, not finalized
    throw;
  }
  if (!joined) {
    CollectiveInfo info;
    info.op = "ncclCommInitRank";
    info.group = g.name;
    info.group_size = g.size;
    g.time_out(info, std::chrono::duration<double>(std::chrono::steady_clock::now() - init_start).count());
  }
  const cudaError_t s1 = cudaStreamCreateWithFlags(&g.own_stream, cudaStreamNonBlocking);
  check_setup(s1 == cudaSuccess, "cudaStreamCreate", g.name, cudaGetErrorString(s1));
  const cudaError_t s4 = cudaEventCreateWithFlags(&g.order_event, cudaEventDisableTiming);
  check_setup(s4 == cudaSuccess, "cudaEventCreate", g.name, cudaGetErrorString(s4));
  const cudaError_t s2 = cudaMalloc(&g.barrier_word, sizeof(int));
  check_setup(s2 == cudaSuccess, "cudaMalloc", g.name, cudaGetErrorString(s2));
  // On the communicator's stream, which the barrier's all-reduce may run on (not the legacy one).
  cudaError_t s3 = cudaMemsetAsync(g.barrier_word, 0, sizeof(int), g.own_stream);
  if (s3 == cudaSuccess) s3 = cudaStreamSynchronize(g.own_stream);
  check_setup(s3 == cudaSuccess, "cudaMemsetAsync", g.name, cudaGetErrorString(s3));
}

NcclCommunicator::~NcclCommunicator() = default;

int NcclCommunicator::rank() const { return group_->rank; }
int NcclCommunicator::size() const { return group_->size; }
const std::string& NcclCommunicator::name() const { return group_->name; }
int NcclCommunicator::world_rank_of(int group_rank) const {
  return group_->world_ranks.at(static_cast<size_t>(group_rank));
}
bool NcclCommunicator::aborted() const { return group_->aborted; }

void NcclCommunicator::check_health(const std::string& waiter) {
  NcclGroup& g = *group_;
  if (g.aborted || g.comm == nullptr) return;
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(g.comm, &async);
  g.prune();
  if (async != ncclSuccess && async != ncclInProgress) {
    const std::string op = g.in_flight.empty() ? "a collective" : describe(g.in_flight.front()->info);
    g.abort_comm();
    throw CommError(op + " failed on " + g.where() + ": NCCL: " + ncclGetErrorString(async) +
                    " (found while the host waited for " + waiter + ")");
  }
  if (g.in_flight.empty()) return;
  const InFlight& oldest = *g.in_flight.front();
  const double age =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - oldest.started).count();
  if (age > g.limit_seconds()) g.time_out(oldest.info, age);
}

namespace {

// Issues one collective: checks the group is alive, runs `call` on the stream, checks the
// launch, and wraps the completion event in a Request.
template <typename Call>
Request issue(const std::shared_ptr<NcclGroup>& group, uint64_t& sequence, const char* op,
              ReduceOp* reduce, int64_t count, DataType type, Stream stream, Call call) {
  CollectiveInfo info;
  info.op = reduce ? std::string(op) + "(" + reduce_op_name(*reduce) + ")" : std::string(op);
  info.type = dtype_name(type);
  info.bytes = count * static_cast<int64_t>(dtype_size(type));
  info.group = group->name;
  info.group_size = group->size;
  info.sequence = sequence++;
  if (group->aborted) {
    throw CommError(describe(info) + " on " + group->where() +
                    ": the NCCL communicator was aborted by an earlier error or timeout");
  }
  cudaStream_t s = stream.is_host() ? group->own_stream : static_cast<cudaStream_t>(stream.handle);
  if (!stream.is_host() && stream.overlap) {
    // After everything already enqueued on the caller's stream (the kernels that produced the
    // buffer), but on our own stream, so the caller's later kernels overlap the collective.
    const cudaError_t e1 = cudaEventRecord(group->order_event, s);
    const cudaError_t e2 = e1 == cudaSuccess ? cudaStreamWaitEvent(group->own_stream, group->order_event, 0) : e1;
    if (e2 != cudaSuccess)
      throw CommError(describe(info) + " on " + group->where() + ": ordering after the caller's stream failed: " +
                      cudaGetErrorString(e2));
    s = group->own_stream;
  }
  const ncclResult_t rc = call(s);
  if (rc != ncclSuccess && rc != ncclInProgress) {
    throw CommError(describe(info) + " failed on " + group->where() + ": " +
                    ncclGetErrorString(rc));
  }
  // A non-blocking communicator may return before the collective is on the stream: the event
  // below must come after it, so the call is settled first (polled, up to the timeout).
  if (rc == ncclInProgress && !group->settle(describe(info).c_str())) group->time_out(info, group->limit_seconds());
  // The event after it serves its Request and, until seen complete, host waits on the stream
  // (check_health): the tensor-parallel layers never wait on their requests.
  group->prune();
  auto record = std::make_shared<InFlight>();
  record->info = info;
  record->started = std::chrono::steady_clock::now();
  cudaError_t status = cudaEventCreateWithFlags(&record->done, cudaEventDisableTiming);
  if (status == cudaSuccess) status = cudaEventRecord(record->done, s);
  if (status != cudaSuccess) {
    if (record->done != nullptr) cudaEventDestroy(record->done);
    record->done = nullptr;
    throw CommError(describe(info) + " on " + group->where() +
                    ": recording its completion event failed: " + cudaGetErrorString(status));
  }
  group->in_flight.push_back(record);
  return Request(std::make_unique<NcclPendingOp>(group, std::move(record)));
}

}  // namespace

Request NcclCommunicator::start_all_reduce(const void* send, void* recv, int64_t count,
                                           DataType type, ReduceOp op, Stream stream) {
  auto* comm = group_->comm;
  return issue(group_, sequence_, "all_reduce", &op, count, type, stream, [&](cudaStream_t s) {
    return ncclAllReduce(send, recv, static_cast<size_t>(count), to_nccl(type), to_nccl(op), comm,
                         s);
  });
}

Request NcclCommunicator::start_reduce_scatter(const void* send, void* recv, int64_t recv_count,
                                               DataType type, ReduceOp op, Stream stream) {
  auto* comm = group_->comm;
  return issue(group_, sequence_, "reduce_scatter", &op, recv_count, type, stream,
               [&](cudaStream_t s) {
                 return ncclReduceScatter(send, recv, static_cast<size_t>(recv_count),
                                          to_nccl(type), to_nccl(op), comm, s);
               });
}

Request NcclCommunicator::start_all_gather(const void* send, void* recv, int64_t send_count,
                                           DataType type, Stream stream) {
  auto* comm = group_->comm;
  return issue(group_, sequence_, "all_gather", nullptr, send_count, type, stream,
               [&](cudaStream_t s) {
                 return ncclAllGather(send, recv, static_cast<size_t>(send_count), to_nccl(type),
                                      comm, s);
               });
}

Request NcclCommunicator::start_broadcast(void* buf, int64_t count, DataType type, int root,
                                          Stream stream) {
  auto* comm = group_->comm;
  return issue(group_, sequence_, "broadcast", nullptr, count, type, stream, [&](cudaStream_t s) {
    return ncclBroadcast(buf, buf, static_cast<size_t>(count), to_nccl(type), root, comm, s);
  });
}

// One grouped send and receive (NCCL's point-to-point): a ring step of the cp group.
Request NcclCommunicator::start_shift(const void* send, void* recv, int64_t count, DataType type, int offset,
                                      Stream stream) {
  auto* comm = group_->comm;
  const int size = group_->size, rank = group_->rank;
  const int to = ((rank + offset) % size + size) % size, from = ((rank - offset) % size + size) % size;
  return issue(group_, sequence_, "shift", nullptr, count, type, stream, [&](cudaStream_t s) {
    const ncclDataType_t t = to_nccl(type);
    const size_t n = static_cast<size_t>(count);
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) r = ncclSend(send, n, t, to, comm, s);
    if (r == ncclSuccess) r = ncclRecv(recv, n, t, from, comm, s);
    const ncclResult_t end = ncclGroupEnd();
    return r != ncclSuccess ? r : end;
  });
}

Request NcclCommunicator::start_barrier(Stream stream) {
  auto* comm = group_->comm;
  int* word = group_->barrier_word;
  // NCCL has no barrier: a one-element all-reduce completes only when every rank joined.
  return issue(group_, sequence_, "barrier", nullptr, 0, DataType::kInt64, stream,
               [&](cudaStream_t s) {
                 return ncclAllReduce(word, word, 1, ncclInt32, ncclSum, comm, s);
               });
}

}  // namespace brt::parallel
