// Host emulation of the part of NCCL that parallel/nccl_communicator.cpp uses, for the emulated
// CUDA backend under mpirun (tools/cuda_emulation/training_tp.cpp, docs/gpu.md). "Device"
// pointers are host memory in the emulator and every stream runs its work when it is
// enqueued, so each collective is the matching blocking MPI collective, complete on return.
// Development tool only; never linked into the project.
//
// ncclCommInitRank has no MPI communicator to work from (NCCL meets its peers through the
// unique id), so it splits MPI_COMM_WORLD with the id's hash as the colour. That is collective
// over the WORLD: it is valid only when every world rank creates a communicator at the same
// time (one group per rank, e.g. every rank's tp group), as training_tp.cpp does.
#pragma once
#include <cuda_runtime.h>
#include <mpi.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
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
};
using ncclComm_t = ncclComm*;

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
inline ncclResult_t result(int mpi_status) {
  return mpi_status == MPI_SUCCESS ? ncclSuccess : ncclSystemError;
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

// Random bytes and the process id: distinct for the groups made at the same time.
inline ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::random_device entropy;
  std::memset(id->internal, 0, sizeof(id->internal));
  for (size_t i = 0; i + sizeof(unsigned) <= sizeof(id->internal); i += sizeof(unsigned)) {
    const unsigned word = entropy();
    std::memcpy(id->internal + i, &word, sizeof(word));
  }
  const pid_t pid = getpid();
  std::memcpy(id->internal, &pid, sizeof(pid));
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

inline ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (comm->mpi != MPI_COMM_NULL) MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}
inline ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

// Every collective has completed when it returns: nothing is ever pending.
inline ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr) return ncclInvalidArgument;
  *async_error = ncclSuccess;
  return ncclSuccess;
}

inline ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t) {
  if (comm == nullptr) return ncclInvalidArgument;
  const void* source = send == recv ? MPI_IN_PLACE : send;
  return emu_nccl::result(MPI_Allreduce(source, recv, static_cast<int>(count),
                                        emu_nccl::mpi_type(type), emu_nccl::mpi_op(op), comm->mpi));
}

// recv [count] = the sum over ranks of their send block `rank` (send [size * count]). NCCL's
// in-place form (recv = send + rank * count) has no MPI_IN_PLACE equivalent: copy the input.
inline ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count,
                                      ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                                      cudaStream_t) {
  if (comm == nullptr) return ncclInvalidArgument;
  int size = 0;
  MPI_Comm_size(comm->mpi, &size);
  const size_t block = count * emu_nccl::type_bytes(type);
  std::vector<char> copy;
  if (emu_nccl::overlaps(send, block * size_t(size), recv, block)) {
    copy.assign(static_cast<const char*>(send), static_cast<const char*>(send) + block * size_t(size));
    send = copy.data();
  }
  return emu_nccl::result(MPI_Reduce_scatter_block(send, recv, static_cast<int>(count),
                                                   emu_nccl::mpi_type(type), emu_nccl::mpi_op(op),
                                                   comm->mpi));
}

// recv [size * count] = every rank's send [count], rank-major. In place when send is recv's
// block `rank` (NCCL's form, and MPI_IN_PLACE's).
inline ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  ncclComm_t comm, cudaStream_t) {
  if (comm == nullptr) return ncclInvalidArgument;
  int rank = 0;
  MPI_Comm_rank(comm->mpi, &rank);
  const size_t block = count * emu_nccl::type_bytes(type);
  const void* source = send == static_cast<char*>(recv) + block * size_t(rank) ? MPI_IN_PLACE : send;
  return emu_nccl::result(MPI_Allgather(source, static_cast<int>(count), emu_nccl::mpi_type(type),
                                        recv, static_cast<int>(count), emu_nccl::mpi_type(type),
                                        comm->mpi));
}

inline ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type,
                                  int root, ncclComm_t comm, cudaStream_t) {
  if (comm == nullptr) return ncclInvalidArgument;
  int rank = 0;
  MPI_Comm_rank(comm->mpi, &rank);
  if (rank == root && send != recv) std::memmove(recv, send, count * emu_nccl::type_bytes(type));
  return emu_nccl::result(MPI_Bcast(recv, static_cast<int>(count), emu_nccl::mpi_type(type), root,
                                    comm->mpi));
}
