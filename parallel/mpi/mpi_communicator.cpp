#include "parallel/mpi/mpi_communicator.h"

#include <unistd.h>

#include <cstring>
#include <stdexcept>

#include "parallel/mpi/mpi_ops.h"

namespace brt::parallel {
namespace detail {

MpiGroup::~MpiGroup() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm);
}

void check_mpi(int rc, const char* what, const MpiGroup& group, const CollectiveInfo& info) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw CommError(std::string(what) + " failed on world rank " +
                  std::to_string(group.world_ranks[group.rank]) + " (host " +
                  group.hosts[group.rank] + ") in " + describe(info) + ": " +
                  std::string(text, static_cast<size_t>(len)));
}

}  // namespace detail

namespace {

void check_setup(int rc, const char* what, const std::string& group) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw CommError(std::string(what) + " failed while creating group '" + group +
                  "': " + std::string(text, static_cast<size_t>(len)));
}

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string name, CommOptions options)
    : group_(std::make_shared<detail::MpiGroup>()) {
  auto& g = *group_;
  g.name = std::move(name);
  g.options = options;
  check_setup(MPI_Comm_dup(comm, &g.comm), "MPI_Comm_dup", g.name);
  check_setup(MPI_Comm_set_errhandler(g.comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
              g.name);
  check_setup(MPI_Comm_rank(g.comm, &g.rank), "MPI_Comm_rank", g.name);
  check_setup(MPI_Comm_size(g.comm, &g.size), "MPI_Comm_size", g.name);
  void* tag_ub = nullptr;
  int has_tag_ub = 0;
  check_setup(MPI_Comm_get_attr(g.comm, MPI_TAG_UB, &tag_ub, &has_tag_ub), "MPI_Comm_get_attr",
              g.name);
  if (has_tag_ub) g.tag_ub = *static_cast<int*>(tag_ub);

  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  g.world_ranks.resize(static_cast<size_t>(g.size));
  check_setup(MPI_Allgather(&world_rank, 1, MPI_INT, g.world_ranks.data(), 1, MPI_INT, g.comm),
              "MPI_Allgather", g.name);

  char host[MPI_MAX_PROCESSOR_NAME] = {};
  int host_len = 0;
  MPI_Get_processor_name(host, &host_len);
  std::vector<char> hosts(static_cast<size_t>(g.size) * MPI_MAX_PROCESSOR_NAME);
  check_setup(MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts.data(),
                            MPI_MAX_PROCESSOR_NAME, MPI_CHAR, g.comm),
              "MPI_Allgather", g.name);
  for (int r = 0; r < g.size; ++r) {
    const char* h = hosts.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    g.hosts.emplace_back(h, strnlen(h, MPI_MAX_PROCESSOR_NAME));
  }
}

MpiCommunicator::~MpiCommunicator() = default;

int MpiCommunicator::rank() const { return group_->rank; }
int MpiCommunicator::size() const { return group_->size; }
const std::string& MpiCommunicator::name() const { return group_->name; }
int MpiCommunicator::world_rank_of(int group_rank) const {
  return group_->world_ranks.at(static_cast<size_t>(group_rank));
}
const std::string& MpiCommunicator::host_of(int group_rank) const {
  return group_->hosts.at(static_cast<size_t>(group_rank));
}
const CommOptions& MpiCommunicator::options() const { return group_->options; }
MPI_Comm MpiCommunicator::mpi_comm() const { return group_->comm; }

uint64_t MpiCommunicator::next_sequence(Stream stream, const char* op) {
  if (!stream.is_host()) {
    throw std::invalid_argument(std::string(op) + " on group " + name() +
                                ": the MPI backend runs on the host and takes no device stream");
  }
  return sequence_++;
}

Request MpiCommunicator::start_all_reduce(const void* send, void* recv, int64_t count,
                                          DataType type, ReduceOp op, Stream stream) {
  const uint64_t seq = next_sequence(stream, "all_reduce");
  return Request(detail::start_all_reduce_op(group_, seq, send, recv, count, type, op));
}

Request MpiCommunicator::start_reduce_scatter(const void* send, void* recv, int64_t recv_count,
                                              DataType type, ReduceOp op, Stream stream) {
  const uint64_t seq = next_sequence(stream, "reduce_scatter");
  return Request(detail::start_reduce_scatter_op(group_, seq, send, recv, recv_count, type, op));
}

Request MpiCommunicator::start_all_gather(const void* send, void* recv, int64_t send_count,
                                          DataType type, Stream stream) {
  const uint64_t seq = next_sequence(stream, "all_gather");
  return Request(detail::start_all_gather_op(group_, seq, send, recv, send_count, type));
}

Request MpiCommunicator::start_broadcast(void* buf, int64_t count, DataType type, int root,
                                         Stream stream) {
  const uint64_t seq = next_sequence(stream, "broadcast");
  return Request(detail::start_broadcast_op(group_, seq, buf, count, type, root));
}

Request MpiCommunicator::start_shift(const void* send, void* recv, int64_t count, DataType type,
                                     int offset, Stream stream) {
  const uint64_t seq = next_sequence(stream, "shift");
  return Request(detail::start_shift_op(group_, seq, send, recv, count, type, offset));
}

Request MpiCommunicator::start_barrier(Stream stream) {
  const uint64_t seq = next_sequence(stream, "barrier");
  return Request(detail::start_barrier_op(group_, seq));
}

}  // namespace brt::parallel
