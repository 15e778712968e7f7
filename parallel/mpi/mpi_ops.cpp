// The MPI backend's collectives as small state machines over point-to-point messages
// (why point-to-point: parallel/mpi/mpi_communicator.h). Each op posts one phase of Isend/Irecv
// at a time; test() advances it; a phase's still-open requests name the peers being waited
// for when the timeout fires.
#include "parallel/mpi/mpi_ops.h"

#include "parallel/health/job_monitor.h"
#include "parallel/rank_order_reduce.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>

namespace brt::parallel::detail {
namespace {

using Clock = std::chrono::steady_clock;

// Polls before wait() starts yielding the core (ranks oversubscribed on few cores must let
// their peers run, or a wait costs whole scheduler slices).
constexpr int kSpinPollsBeforeYield = 200;
// Element range [begin(r), begin(r+1)) of chunk r when n elements are split over p ranks.
int64_t chunk_begin(int64_t n, int p, int r) { return n * r / p; }

// Which collective a message belongs to is part of its tag, so different collectives never
// match each other's messages (a rank in the wrong collective then shows up as a timeout
// naming it, or — same collective, other size — as a size mismatch).
enum class OpKind { kAllReduce = 0, kReduceScatter = 1, kAllGather = 2, kBroadcast = 3, kBarrier = 4, kShift = 5 };

class P2pOp : public PendingOp {
 public:
  P2pOp(std::shared_ptr<const MpiGroup> group, CollectiveInfo info, OpKind kind)
      : group_(std::move(group)), info_(std::move(info)), kind_(kind), started_(Clock::now()) {}

  // Only reached with requests still open after an error (Request waits otherwise): cancel
  // the receives so they cannot write into freed buffers; the job is ending anyway.
  ~P2pOp() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (requests_[i] == MPI_REQUEST_NULL) continue;
      if (expected_bytes_[i] >= 0) MPI_Cancel(&requests_[i]);
      MPI_Request_free(&requests_[i]);
    }
  }

  // Posts phase 0; called by the factory once the derived object exists.
  void start() {
    if (JobMonitor* monitor = group_->options.monitor)
      flight_ = monitor->recorder().begin(info_.op, info_.group, info_.sequence, info_.bytes);
    if (!post_phase(0)) finished_ = true;
    progress();
  }

  bool test() override {
    if (finished_) return true;
    progress();
    if (!finished_) check_deadline();
    return finished_;
  }

  void wait() override {
    int polls = 0;
    while (!test()) {
      if (++polls > kSpinPollsBeforeYield) std::this_thread::yield();
    }
  }

 protected:
  // Posts the requests of `phase` (all earlier phases are complete); false when the op has
  // no such phase, i.e. it is finished.
  virtual bool post_phase(int phase) = 0;

  const MpiGroup& group() const { return *group_; }
  int rank() const { return group_->rank; }
  int size() const { return group_->size; }

  void post_recv(void* buf, int64_t bytes, int peer) {
    requests_.push_back(MPI_REQUEST_NULL);
    peers_.push_back(peer);
    expected_bytes_.push_back(bytes);
    check_mpi(MPI_Irecv(buf, message_bytes(bytes), MPI_BYTE, peer, tag(), group_->comm,
                        &requests_.back()),
              "MPI_Irecv", *group_, info_);
  }
  void post_send(const void* buf, int64_t bytes, int peer) {
    requests_.push_back(MPI_REQUEST_NULL);
    peers_.push_back(peer);
    expected_bytes_.push_back(-1);
    check_mpi(MPI_Isend(buf, message_bytes(bytes), MPI_BYTE, peer, tag(), group_->comm,
                        &requests_.back()),
              "MPI_Isend", *group_, info_);
  }

 private:
  // Distinct per (sequence number, kind, phase), so ops in flight together on one group
  // never match each other's messages, and neither do different collectives.
  int tag() const {
    const uint64_t space = static_cast<uint64_t>(group_->tag_ub) + 1;
    const uint64_t t = info_.sequence * 32 + static_cast<uint64_t>(kind_) * 4 +
                       static_cast<uint64_t>(phase_);
    return static_cast<int>(t % space);
  }

  [[noreturn]] void throw_mismatch(int request, const std::string& what) const {
    const RankLocation peer = group_->location(peers_[static_cast<size_t>(request)]);
    const RankLocation self = group_->location(group_->rank);
    throw CommError("collective mismatch on world rank " + std::to_string(self.world_rank) +
                    " (host " + self.host + ") in " + describe(info_) + ": world rank " +
                    std::to_string(peer.world_rank) + " (host " + peer.host + ") " + what +
                    " — the ranks of this group issued different collectives (or sizes) as #" +
                    std::to_string(info_.sequence));
  }

  // Checks the completed receives: an error (e.g. truncation) or a size other than expected
  // means the peer is in a different collective of the same kind.
  void check_completed(int rc, int completed) {
    for (int k = 0; k < completed; ++k) {
      const int i = indices_[static_cast<size_t>(k)];
      const int64_t expected = expected_bytes_[static_cast<size_t>(i)];
      const MPI_Status& st = statuses_[static_cast<size_t>(k)];
      if (rc == MPI_ERR_IN_STATUS && st.MPI_ERROR != MPI_SUCCESS) {
        if (expected >= 0 && st.MPI_ERROR == MPI_ERR_TRUNCATE) {
          throw_mismatch(i, "sent more than the " + std::to_string(expected) + " bytes expected");
        }
        check_mpi(st.MPI_ERROR, expected >= 0 ? "MPI_Irecv" : "MPI_Isend", *group_, info_);
      }
      if (expected < 0) continue;
      int got = 0;
      MPI_Get_count(&st, MPI_BYTE, &got);
      if (got != expected) {
        throw_mismatch(i, "sent " + std::to_string(got) + " bytes where " +
                              std::to_string(expected) + " were expected");
      }
    }
    if (rc != MPI_ERR_IN_STATUS) check_mpi(rc, "MPI_Testsome", *group_, info_);
  }

  // Sizes were checked against INT_MAX when the op was created (check_message_size).
  static int message_bytes(int64_t bytes) { return static_cast<int>(bytes); }

  void progress() {
    while (!finished_) {
      if (!requests_.empty()) {
        int completed = 0;
        indices_.resize(requests_.size());
        statuses_.resize(requests_.size());
        const int rc = MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(),
                                    &completed, indices_.data(), statuses_.data());
        check_completed(rc, completed == MPI_UNDEFINED ? 0 : completed);
        const bool all_done = std::all_of(requests_.begin(), requests_.end(),
                                          [](MPI_Request r) { return r == MPI_REQUEST_NULL; });
        if (!all_done) return;
        requests_.clear();
        peers_.clear();
        expected_bytes_.clear();
      }
      ++phase_;
      if (!post_phase(phase_)) finished_ = true;
    }
    if (JobMonitor* monitor = group_->options.monitor) monitor->recorder().end(flight_);
  }

  void check_deadline() const {
    const auto waited = Clock::now() - started_;
    if (waited <= group_->options.timeout) return;
    std::vector<int> missing;
    for (size_t i = 0; i < requests_.size(); ++i) {
      if (requests_[i] != MPI_REQUEST_NULL &&
          std::find(missing.begin(), missing.end(), peers_[i]) == missing.end()) {
        missing.push_back(peers_[i]);
      }
    }
    std::sort(missing.begin(), missing.end());
    std::vector<RankLocation> where;
    for (int peer : missing) where.push_back(group_->location(peer));
    const std::string report = describe_timeout(info_, group_->location(group_->rank),
                                                std::chrono::duration<double>(waited).count(),
                                                std::chrono::duration<double>(group_->options.timeout).count(),
                                                where);
    if (JobMonitor* monitor = group_->options.monitor) monitor->fail(report, kCollectiveTimeoutExitCode);
    abort_job(report, kCollectiveTimeoutExitCode);
  }

  std::shared_ptr<const MpiGroup> group_;
  CollectiveInfo info_;
  OpKind kind_;
  Clock::time_point started_;
  std::vector<MPI_Request> requests_;
  std::vector<int> peers_;  // group rank of each request's partner
  std::vector<int64_t> expected_bytes_;  // per request: bytes a receive expects; -1 for sends
  std::vector<int> indices_;             // MPI_Testsome's outputs, kept to avoid an
  std::vector<MPI_Status> statuses_;     // allocation per poll
  int phase_ = 0;
  bool finished_ = false;
  uint64_t flight_ = 0;  // the flight recorder's token (options.monitor)
};

CollectiveInfo make_info(const MpiGroup& group, uint64_t seq, std::string op, DataType type,
                         int64_t bytes) {
  CollectiveInfo info;
  info.op = std::move(op);
  info.type = dtype_name(type);
  info.bytes = bytes;
  info.group = group.name;
  info.group_size = group.size;
  info.sequence = seq;
  return info;
}

std::string reduce_label(const char* op, ReduceOp reduce) {
  return std::string(op) + "(" + reduce_op_name(reduce) + ")";
}

// Pairwise-exchange reduce-scatter of `count` elements (chunk r to rank r), then, for
// all-reduce, an all-gather of the reduced chunks.
class ReduceOpBase : public P2pOp {
 public:
  ReduceOpBase(std::shared_ptr<const MpiGroup> group, CollectiveInfo info, OpKind kind,
               const void* send, void* recv, DataType type, ReduceOp op)
      : P2pOp(std::move(group), std::move(info), kind),
        send_(static_cast<const std::byte*>(send)),
        recv_(static_cast<std::byte*>(recv)),
        type_(type),
        op_(op),
        elem_(static_cast<int64_t>(dtype_size(type))) {}

 protected:
  // Phase "exchange": rank j's contribution to my chunk lands in scratch slot j.
  // Chunk r of the input (in elements) is the part rank r reduces.
  virtual int64_t chunk_begin_of(int r) const = 0;
  virtual int64_t chunk_len_of(int r) const = 0;

  void post_exchange() {
    const int64_t my_len = chunk_len_of(rank());
    scratch_.resize(static_cast<size_t>(my_len * elem_ * size()));
    for (int k = 1; k < size(); ++k) {
      const int from = (rank() - k + size()) % size();
      post_recv(scratch_.data() + from * my_len * elem_, my_len * elem_, from);
    }
    for (int k = 1; k < size(); ++k) {
      const int to = (rank() + k) % size();
      post_send(send_ + chunk_begin_of(to) * elem_, chunk_len_of(to) * elem_, to);
    }
  }
  // Reduces my chunk (my own part read from `mine`) into `out`.
  void reduce_mine(const std::byte* mine, std::byte* out, int64_t my_len) {
    std::vector<const std::byte*> sources(size());
    for (int j = 0; j < size(); ++j) {
      sources[j] = j == rank() ? mine : scratch_.data() + j * my_len * elem_;
    }
    reduce_in_rank_order(type_, op_, sources, out, my_len);  // the determinism guarantee
    std::vector<std::byte>().swap(scratch_);
  }

  const std::byte* send_;
  std::byte* recv_;
  DataType type_;
  ReduceOp op_;
  int64_t elem_;
  std::vector<std::byte> scratch_;
};

class AllReduceOp final : public ReduceOpBase {
 public:
  AllReduceOp(std::shared_ptr<const MpiGroup> group, CollectiveInfo info, const void* send,
              void* recv, int64_t count, DataType type, ReduceOp op)
      : ReduceOpBase(std::move(group), std::move(info), OpKind::kAllReduce, send, recv, type, op),
        n_(count) {}

 protected:
  bool post_phase(int phase) override {
    if (phase == 0) {
      if (size() == 1) {
        if (send_ != recv_) std::memmove(recv_, send_, static_cast<size_t>(n_ * elem_));
        return false;
      }
      post_exchange();
      return true;
    }
    if (phase == 1) {
      const int64_t b = chunk_begin_of(rank()) * elem_;
      reduce_mine(send_ + b, recv_ + b, chunk_len_of(rank()));
      for (int k = 1; k < size(); ++k) {
        const int from = (rank() - k + size()) % size();
        post_recv(recv_ + chunk_begin_of(from) * elem_, chunk_len_of(from) * elem_, from);
      }
      for (int k = 1; k < size(); ++k) {
        post_send(recv_ + b, chunk_len_of(rank()) * elem_, (rank() + k) % size());
      }
      return true;
    }
    return false;
  }

  int64_t chunk_begin_of(int r) const override { return chunk_begin(n_, size(), r); }
  int64_t chunk_len_of(int r) const override {
    return chunk_begin(n_, size(), r + 1) - chunk_begin(n_, size(), r);
  }

 private:
  int64_t n_;
};

class ReduceScatterOp final : public ReduceOpBase {
 public:
  ReduceScatterOp(std::shared_ptr<const MpiGroup> group, CollectiveInfo info, const void* send,
                  void* recv, int64_t recv_count, DataType type, ReduceOp op)
      : ReduceOpBase(std::move(group), std::move(info), OpKind::kReduceScatter, send, recv, type,
                     op),
        m_(recv_count) {}

 protected:
  bool post_phase(int phase) override {
    if (phase == 0) {
      if (size() == 1) {
        if (send_ != recv_) std::memmove(recv_, send_, static_cast<size_t>(m_ * elem_));
        return false;
      }
      post_exchange();
      return true;
    }
    if (phase == 1) reduce_mine(send_ + chunk_begin_of(rank()) * elem_, recv_, m_);
    return false;
  }
  int64_t chunk_begin_of(int r) const override { return m_ * r; }
  int64_t chunk_len_of(int) const override { return m_; }

 private:
  int64_t m_;
};

class AllGatherOp final : public P2pOp {
 public:
  AllGatherOp(std::shared_ptr<const MpiGroup> group, CollectiveInfo info, const void* send,
              void* recv, int64_t block_bytes)
      : P2pOp(std::move(group), std::move(info), OpKind::kAllGather),
        send_(static_cast<const std::byte*>(send)),
        recv_(static_cast<std::byte*>(recv)),
        block_(block_bytes) {}

 protected:
  bool post_phase(int phase) override {
    if (phase != 0) return false;
    std::byte* mine = recv_ + rank() * block_;
    if (mine != send_) std::memmove(mine, send_, static_cast<size_t>(block_));
    for (int k = 1; k < size(); ++k) {
      const int from = (rank() - k + size()) % size();
      post_recv(recv_ + from * block_, block_, from);
    }
    for (int k = 1; k < size(); ++k) post_send(mine, block_, (rank() + k) % size());
    return true;
  }

 private:
  const std::byte* send_;
  std::byte* recv_;
  int64_t block_;
};

// One block to rank (r + offset) mod size, one from rank (r − offset) mod size.
class ShiftOp final : public P2pOp {
 public:
  ShiftOp(std::shared_ptr<const MpiGroup> group, CollectiveInfo info, const void* send, void* recv,
          int64_t bytes, int offset)
      : P2pOp(std::move(group), std::move(info), OpKind::kShift), send_(send), recv_(recv), bytes_(bytes),
        offset_(offset) {}

 protected:
  bool post_phase(int phase) override {
    if (phase != 0) return false;
    const int to = ((rank() + offset_) % size() + size()) % size();
    const int from = ((rank() - offset_) % size() + size()) % size();
    if (to == rank()) {  // a group of one (or a whole-turn offset): the block stays
      std::memmove(recv_, send_, static_cast<size_t>(bytes_));
      return true;
    }
    post_recv(recv_, bytes_, from);
    post_send(send_, bytes_, to);
    return true;
  }

 private:
  const void* send_;
  void* recv_;
  int64_t bytes_;
  int offset_;
};

class BroadcastOp final : public P2pOp {
 public:
  BroadcastOp(std::shared_ptr<const MpiGroup> group, CollectiveInfo info, void* buf,
              int64_t bytes, int root)
      : P2pOp(std::move(group), std::move(info), OpKind::kBroadcast),
        buf_(buf),
        bytes_(bytes),
        root_(root) {}

 protected:
  bool post_phase(int phase) override {
    if (phase != 0) return false;
    if (rank() == root_) {
      for (int k = 1; k < size(); ++k) post_send(buf_, bytes_, (root_ + k) % size());
    } else {
      post_recv(buf_, bytes_, root_);
    }
    return true;
  }

 private:
  void* buf_;
  int64_t bytes_;
  int root_;
};

// Every rank exchanges an empty message with every other: complete only once all have
// arrived, and the open requests name whoever has not.
class BarrierOp final : public P2pOp {
 public:
  BarrierOp(std::shared_ptr<const MpiGroup> group, CollectiveInfo info)
      : P2pOp(std::move(group), std::move(info), OpKind::kBarrier) {}

 protected:
  bool post_phase(int phase) override {
    if (phase != 0) return false;
    for (int k = 1; k < size(); ++k) post_recv(nullptr, 0, (rank() - k + size()) % size());
    for (int k = 1; k < size(); ++k) post_send(nullptr, 0, (rank() + k) % size());
    return true;
  }
};

// MPI counts are int: refuse a message over 2 GiB before allocating or sending anything.
void check_message_size(const CollectiveInfo& info, int64_t largest_message_bytes) {
  if (largest_message_bytes > INT_MAX) {
    throw CommError(describe(info) + ": one message would carry " +
                    std::to_string(largest_message_bytes) +
                    " bytes, more than MPI's int count allows; split the buffer into "
                    "collectives of at most 2 GiB per message");
  }
}

int64_t largest_chunk(int64_t n, int p) { return (n + p - 1) / p; }

template <typename Op, typename... Args>
std::unique_ptr<PendingOp> launch(Args&&... args) {
  auto op = std::make_unique<Op>(std::forward<Args>(args)...);
  op->start();
  return op;
}

}  // namespace

std::unique_ptr<PendingOp> start_all_reduce_op(std::shared_ptr<const MpiGroup> group,
                                               uint64_t seq, const void* send, void* recv,
                                               int64_t count, DataType type, ReduceOp op) {
  auto info = make_info(*group, seq, reduce_label("all_reduce", op), type,
                        count * static_cast<int64_t>(dtype_size(type)));
  check_message_size(info, largest_chunk(count, group->size) * static_cast<int64_t>(dtype_size(type)));
  return launch<AllReduceOp>(std::move(group), std::move(info), send, recv, count, type, op);
}

std::unique_ptr<PendingOp> start_reduce_scatter_op(std::shared_ptr<const MpiGroup> group,
                                                   uint64_t seq, const void* send, void* recv,
                                                   int64_t recv_count, DataType type,
                                                   ReduceOp op) {
  auto info = make_info(*group, seq, reduce_label("reduce_scatter", op), type,
                        recv_count * group->size * static_cast<int64_t>(dtype_size(type)));
  check_message_size(info, recv_count * static_cast<int64_t>(dtype_size(type)));
  return launch<ReduceScatterOp>(std::move(group), std::move(info), send, recv, recv_count, type,
                                 op);
}

std::unique_ptr<PendingOp> start_all_gather_op(std::shared_ptr<const MpiGroup> group,
                                               uint64_t seq, const void* send, void* recv,
                                               int64_t send_count, DataType type) {
  const int64_t block = send_count * static_cast<int64_t>(dtype_size(type));
  auto info = make_info(*group, seq, "all_gather", type, block);
  check_message_size(info, block);
  return launch<AllGatherOp>(std::move(group), std::move(info), send, recv, block);
}

std::unique_ptr<PendingOp> start_shift_op(std::shared_ptr<const MpiGroup> group, uint64_t seq,
                                          const void* send, void* recv, int64_t count, DataType type,
                                          int offset) {
  const int64_t bytes = count * static_cast<int64_t>(dtype_size(type));
  auto info = make_info(*group, seq, "shift(" + std::to_string(offset) + ")", type, bytes);
  check_message_size(info, bytes);
  return launch<ShiftOp>(std::move(group), std::move(info), send, recv, bytes, offset);
}

std::unique_ptr<PendingOp> start_broadcast_op(std::shared_ptr<const MpiGroup> group,
                                              uint64_t seq, void* buf, int64_t count,
                                              DataType type, int root) {
  const int64_t bytes = count * static_cast<int64_t>(dtype_size(type));
  auto info = make_info(*group, seq, "broadcast(root " + std::to_string(root) + ")", type, bytes);
  check_message_size(info, bytes);
  return launch<BroadcastOp>(std::move(group), std::move(info), buf, bytes, root);
}

std::unique_ptr<PendingOp> start_barrier_op(std::shared_ptr<const MpiGroup> group, uint64_t seq) {
  auto info = make_info(*group, seq, "barrier", DataType::kInt64, 0);
  info.type = "none";
  return launch<BarrierOp>(std::move(group), std::move(info));
}

}  // namespace brt::parallel::detail
