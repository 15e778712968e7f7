// Host emulation of the part of NCCL that parallel/nccl_communicator.cpp uses, for the emulated
// CUDA backend under mpirun (tests/cuda_emulation/training_tp.cpp, docs/gpu.md). "Device"
// pointers are host memory in the emulator. Each collective is queued on its stream like a
// kernel and runs, as the matching blocking MPI collective, when the strict emulator runs that
// stream (emu_stream.h): in stream order, after the work it was queued behind, and after the
// communicator's previous collective (NCCL serialises a communicator's operations). A
// communicator made non-blocking (ncclCommInitRankConfig with config.blocking = 0) answers
// ncclInProgress from the init and from the first ncclCommGetAsyncError, and refuses
// collectives (ncclInvalidUsage) until a poll has seen it ready, as NCCL requires.
// Development tool only; never linked into the project.
//
// Faults, for the checks of what a host waiting behind NCCL does (tests/cuda_emulation/stall.cpp):
// EMU_NCCL_STALL_AT=k makes the k-th collective a communicator issues never complete (as when a
// peer died: the stream behind it never drains); EMU_NCCL_ASYNC_ERROR_AT=k makes
// ncclCommGetAsyncError report ncclRemoteError once k collectives were issued;
// EMU_NCCL_IN_PROGRESS=1 makes every collective of a non-blocking communicator return
// ncclInProgress with nothing on its stream yet: the collective is enqueued only when a later
// ncclCommGetAsyncError polls it ready (the second poll), and any other call on the communicator
// before that is ncclInvalidUsage — so an event recorded right after the call would complete
// before the collective ran, as NCCL allows for a non-blocking communicator.
//
// ncclCommInitRank has no MPI communicator to work from (NCCL meets its peers through the
// unique id), so it splits MPI_COMM_WORLD with the id's hash as the colour. That is collective
// over the WORLD: it is valid only when every world rank creates a communicator at the same
// time (one group per rank, e.g. every rank's tp group), as training_tp.cpp does. Two ranks
// must run their communicators' collectives in the same order (true for one communicator;
// the emulator cannot model collectives of different communicators progressing at once).
#pragma once
#include <cuda_runtime.h>
#include <mpi.h>
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

enum ncclResult_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};
enum ncclDataType_t { ncclInt32 = 2, ncclInt64 = 4, ncclFloat32 = 7, ncclFloat64 = 8 };
enum ncclRedOp_t { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3 };
// The API level emulated (NCCL encodes major*10000 + minor*100 + patch).
#define NCCL_VERSION_CODE 22700

constexpr int NCCL_UNIQUE_ID_BYTES = 128;
struct ncclUniqueId {
  char internal[NCCL_UNIQUE_ID_BYTES];
};

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int init_polls_left = 0;            // non-blocking init: ncclInProgress until polled
  bool aborted = false;
  int issued = 0;                     // collectives issued (the fault knobs below count them)
  emu::Dep last{nullptr, 0};          // the previous collective's place in its stream
  bool nonblocking = false;           // made by ncclCommInitRankConfig with config.blocking = 0
  std::function<ncclResult_t()> deferred;  // EMU_NCCL_IN_PROGRESS: the collective not yet enqueued
  int deferred_polls = 0;             // polls that still report it in progress
};
using ncclComm_t = ncclComm*;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
struct ncclConfig_t {
  size_t size;
  unsigned int magic, version;
  int blocking, cgaClusterSize, minCTAs, maxCTAs;
  const char* netName;
  int splitShare;
};
#define NCCL_CONFIG_INITIALIZER                                                                  \
  {sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION_CODE, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, \
   NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, nullptr, NCCL_CONFIG_UNDEF_INT}

namespace emu_nccl {

inline MPI_Datatype mpi_type(ncclDataType_t type) {
  switch (type) {
    case ncclInt32: return MPI_INT32_T;
    case ncclInt64: return MPI_INT64_T;
    case ncclFloat32: return MPI_FLOAT;
    case ncclFloat64: return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}
inline size_t type_bytes(ncclDataType_t type) {
  return type == ncclInt64 || type == ncclFloat64 ? 8 : 4;
}
inline MPI_Op mpi_op(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return MPI_SUM;
    case ncclProd: return MPI_PROD;
    case ncclMax: return MPI_MAX;
    case ncclMin: return MPI_MIN;
  }
  return MPI_OP_NULL;
}
// A non-negative MPI colour from the id's bytes (FNV-1a).
inline int colour_of(const ncclUniqueId& id) {
  uint32_t h = 2166136261u;
  for (char c : id.internal) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return static_cast<int>(h & 0x3fffffffu);
}
inline bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto* pa = static_cast<const char*>(a);
  const auto* pb = static_cast<const char*>(b);
  return pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace emu_nccl

inline ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

inline const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (emulated)";
    case ncclSystemError: return "unhandled system error (emulated: an MPI call failed)";
    case ncclInternalError: return "internal error (emulated)";
    case ncclInvalidArgument: return "invalid argument (emulated)";
    case ncclInvalidUsage: return "invalid usage (emulated)";
    case ncclRemoteError: return "remote process exited or there was a network error (emulated)";
    case ncclInProgress: return "NCCL operation in progress (emulated)";
  }
  return "unknown result code (emulated)";
}

// The process id and this process's count of ids made: distinct for the groups made at the same
// time (each by its own first rank, a process of its own, or one after another by one process),
// and the same from run to run, so an emulated run replays exactly.
inline ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static uint64_t made = 0;
  std::memset(id->internal, 0, sizeof(id->internal));
  const pid_t pid = getpid();
  const uint64_t number = ++made;
  std::memcpy(id->internal, &pid, sizeof(pid));
  std::memcpy(id->internal + sizeof(pid), &number, sizeof(number));
  return ncclSuccess;
}

// Collective over MPI_COMM_WORLD (see the file comment): members of one group pass the same id.
inline ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  MPI_Comm split = MPI_COMM_NULL;
  if (MPI_Comm_split(MPI_COMM_WORLD, emu_nccl::colour_of(id), rank, &split) != MPI_SUCCESS)
    return ncclSystemError;
  int size = 0, got_rank = -1;
  MPI_Comm_size(split, &size);
  MPI_Comm_rank(split, &got_rank);
  if (size != nranks || got_rank != rank) {
    MPI_Comm_free(&split);
    return ncclInvalidUsage;  // not every member joined with this id, or ranks repeat
  }
  *comm = new ncclComm{split};
  return ncclSuccess;
}
// Non-blocking (config->blocking == 0): ncclInProgress now and from the first poll.
inline ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                           ncclConfig_t* config) {
  const ncclResult_t r = ncclCommInitRank(comm, nranks, id, rank);
  if (r != ncclSuccess || config == nullptr || config->blocking != 0) return r;
  (*comm)->init_polls_left = 1;
  (*comm)->nonblocking = true;
  return ncclInProgress;
}

// Waits for the communicator's queued collectives (NCCL flushes them), then frees it.
inline ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (comm->last.stream != nullptr && !comm->aborted) emu::advance(comm->last.stream, comm->last.seq);
  return ncclSuccess;
}
inline ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  ncclCommFinalize(comm);
  if (comm->mpi != MPI_COMM_NULL) MPI_Comm_free(&comm->mpi);
  comm->aborted = true;  // kept (leaked): a queued item of another stream may still name it
  return ncclSuccess;
}
// Queued collectives of an aborted communicator never run.
inline ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  comm->aborted = true;
  return ncclSuccess;
}

namespace emu_nccl {
inline int fault_knob(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? 0 : std::atoi(v);
}
}  // namespace emu_nccl

inline ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr) return ncclInvalidArgument;
  const int error_at = emu_nccl::fault_knob("EMU_NCCL_ASYNC_ERROR_AT");
  if (error_at > 0 && comm->issued >= error_at && comm->init_polls_left == 0) {
    *async_error = ncclRemoteError;
    return ncclSuccess;
  }
  if (comm->deferred) {  // EMU_NCCL_IN_PROGRESS: in progress once more, then on its stream
    if (comm->deferred_polls-- > 0) {
      *async_error = ncclInProgress;
      return ncclSuccess;
    }
    const auto enqueue = std::move(comm->deferred);
    comm->deferred = nullptr;
    *async_error = enqueue();
    return ncclSuccess;
  }
  *async_error = comm->init_polls_left > 0 ? ncclInProgress : ncclSuccess;
  if (comm->init_polls_left > 0) --comm->init_polls_left;
  return ncclSuccess;
}

namespace emu_nccl {
inline ncclResult_t enqueue_now(ncclComm_t comm, cudaStream_t stream, const char* name, std::function<int()> run);
// Queues `run` (the MPI collective) on the stream, after the communicator's previous one.
inline ncclResult_t enqueue(ncclComm_t comm, cudaStream_t stream, const char* name, std::function<int()> run) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (comm->aborted) return ncclInvalidUsage;
  if (comm->init_polls_left > 0) return ncclInvalidUsage;  // a non-blocking init not yet polled
  if (comm->deferred) return ncclInvalidUsage;             // the previous call not yet polled ready
  if (comm->nonblocking && fault_knob("EMU_NCCL_IN_PROGRESS") && !emu::is_capturing(stream)) {
    comm->deferred = [=] {
      comm->deferred = nullptr;
      return enqueue_now(comm, stream, name, run);
    };
    comm->deferred_polls = 1;
    return ncclInProgress;
  }
  return enqueue_now(comm, stream, name, std::move(run));
}
// Puts the collective on its stream, after the communicator's previous one.
inline ncclResult_t enqueue_now(ncclComm_t comm, cudaStream_t stream, const char* name, std::function<int()> run) {
  std::vector<emu::Dep> deps;
  if (comm->last.stream != nullptr && comm->last.stream->done < comm->last.seq) deps.push_back(comm->last);
  const bool stalled = ++comm->issued == fault_knob("EMU_NCCL_STALL_AT");
  const cudaError_t e = emu::enqueue_on(stream, emu::NodeKind::kKernel, name, [comm, name, run = std::move(run)] {
    if (comm->aborted) return;
    if (run() != MPI_SUCCESS) emu::fault(std::string(name) + ": the MPI collective failed");
  }, std::move(deps), true, stalled);
  if (e != cudaSuccess) return ncclUnhandledCudaError;
  if (!emu::is_capturing(stream)) {
    CUstream_st* s = emu::resolve(stream);
    comm->last = {s, s->enqueued};
  }
  return ncclSuccess;
}
}  // namespace emu_nccl

inline ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return emu_nccl::enqueue(comm, stream, "ncclAllReduce", [=] {
    const void* source = send == recv ? MPI_IN_PLACE : send;
    return MPI_Allreduce(source, recv, static_cast<int>(count), emu_nccl::mpi_type(type), emu_nccl::mpi_op(op), comm->mpi);
  });
}

// recv [count] = the sum over ranks of their send block `rank` (send [size * count]). NCCL's
// in-place form (recv = send + rank * count) has no MPI_IN_PLACE equivalent: copy the input.
inline ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count,
                                      ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t stream) {
  return emu_nccl::enqueue(comm, stream, "ncclReduceScatter", [=] {
    int size = 0;
    MPI_Comm_size(comm->mpi, &size);
    const size_t block = count * emu_nccl::type_bytes(type);
    const void* source = send;
    std::vector<char> copy;
    if (emu_nccl::overlaps(send, block * size_t(size), recv, block)) {
      copy.assign(static_cast<const char*>(send), static_cast<const char*>(send) + block * size_t(size));
      source = copy.data();
    }
    return MPI_Reduce_scatter_block(source, recv, static_cast<int>(count), emu_nccl::mpi_type(type),
                                    emu_nccl::mpi_op(op), comm->mpi);
  });
}

// recv [size * count] = every rank's send [count], rank-major. In place when send is recv's
// block `rank` (NCCL's form, and MPI_IN_PLACE's).
inline ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  ncclComm_t comm, cudaStream_t stream) {
  return emu_nccl::enqueue(comm, stream, "ncclAllGather", [=] {
    int rank = 0;
    MPI_Comm_rank(comm->mpi, &rank);
    const size_t block = count * emu_nccl::type_bytes(type);
    const void* source = send == static_cast<char*>(recv) + block * size_t(rank) ? MPI_IN_PLACE : send;
    return MPI_Allgather(source, static_cast<int>(count), emu_nccl::mpi_type(type), recv,
                         static_cast<int>(count), emu_nccl::mpi_type(type), comm->mpi);
  });
}

// Point-to-point (ncclSend / ncclRecv) between ncclGroupStart and ncclGroupEnd: recorded on the
// calling thread and queued at ncclGroupEnd as one node per communicator that posts every
// MPI_Isend / MPI_Irecv and waits for them all, so a group's sends and receives cannot deadlock
// against each other (NCCL's semantics). Outside a group each call is a group of its own.
namespace emu_nccl {
struct PointToPoint {
  bool send;
  void* buf;
  size_t count;
  ncclDataType_t type;
  int peer;
  ncclComm_t comm;
  cudaStream_t stream;
};
struct P2pGroup {
  int depth = 0;
  std::vector<PointToPoint> ops;
};
inline P2pGroup& p2p_group() {
  thread_local P2pGroup group;
  return group;
}
inline ncclResult_t flush_p2p() {
  std::vector<PointToPoint> ops = std::move(p2p_group().ops);
  p2p_group().ops.clear();
  for (size_t first = 0; first < ops.size();) {  // one node per (communicator, stream) run
    size_t last = first;
    while (last < ops.size() && ops[last].comm == ops[first].comm && ops[last].stream == ops[first].stream) ++last;
    std::vector<PointToPoint> mine(ops.begin() + long(first), ops.begin() + long(last));
    const ncclResult_t r = enqueue(ops[first].comm, ops[first].stream, "ncclSend/ncclRecv", [mine] {
      std::vector<MPI_Request> requests(mine.size(), MPI_REQUEST_NULL);
      for (size_t i = 0; i < mine.size(); ++i) {
        const auto& o = mine[i];
        const int n = static_cast<int>(o.count);
        const int rc = o.send ? MPI_Isend(o.buf, n, mpi_type(o.type), o.peer, 7001, o.comm->mpi, &requests[i])
                              : MPI_Irecv(o.buf, n, mpi_type(o.type), o.peer, 7001, o.comm->mpi, &requests[i]);
        if (rc != MPI_SUCCESS) return rc;
      }
      return MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    });
    if (r != ncclSuccess) return r;
    first = last;
  }
  return ncclSuccess;
}
inline ncclResult_t add_p2p(const PointToPoint& op) {
  p2p_group().ops.push_back(op);
  return p2p_group().depth == 0 ? flush_p2p() : ncclSuccess;
}
}  // namespace emu_nccl

inline ncclResult_t ncclGroupStart() {
  ++emu_nccl::p2p_group().depth;
  return ncclSuccess;
}
inline ncclResult_t ncclGroupEnd() {
  if (emu_nccl::p2p_group().depth == 0) return ncclInvalidUsage;
  return --emu_nccl::p2p_group().depth == 0 ? emu_nccl::flush_p2p() : ncclSuccess;
}
inline ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                             cudaStream_t stream) {
  return emu_nccl::add_p2p({true, const_cast<void*>(send), count, type, peer, comm, stream});
}
inline ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                             cudaStream_t stream) {
  return emu_nccl::add_p2p({false, recv, count, type, peer, comm, stream});
}

inline ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  int root, ncclComm_t comm, cudaStream_t stream) {
  return emu_nccl::enqueue(comm, stream, "ncclBroadcast", [=] {
    int rank = 0;
    MPI_Comm_rank(comm->mpi, &rank);
    if (rank == root && send != recv) std::memmove(recv, send, count * emu_nccl::type_bytes(type));
    return MPI_Bcast(recv, static_cast<int>(count), emu_nccl::mpi_type(type), root, comm->mpi);
  });
}
