// Saving a training run (training_checkpoint.h): its state copied into a host snapshot,
// then written collectively by the writing group (docs/checkpoint-format.md).
#include "launch/train/checkpoint/training_checkpoint.h"

#include <algorithm>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "launch/config/config_keys.h"
#include "launch/process/checkpoint_space.h"
#include "launch/train/checkpoint/training_checkpoint_layout.h"

namespace brt::launch {

namespace ck = brt::checkpoint;

using namespace training_layout;

namespace {

template <typename T>
std::span<const T> view(const T* data, const std::vector<int64_t>& shape) {
  return {data, size_t(ck::shape_numel(shape))};
}

bool writes_param(const CheckpointRanks& ranks, int param) {
  const int owner = ranks.param_owner.empty() ? 0 : ranks.param_owner[size_t(param)];
  return owner == ranks.dp_cp_rank;
}

// The data ranks' cursors from every dp_cp rank's (in dp_cp order d·CP + c): under context
// parallelism the cp ranks of one data rank read the same streams, so chunk 0's stands for them.
std::vector<std::vector<int64_t>> chunk_zero_cursors(std::vector<std::vector<int64_t>> all,
                                                     const CheckpointRanks& ranks) {
  if (ranks.cp_size == 1) return all;
  std::vector<std::vector<int64_t>> out;
  for (size_t g = 0; g < all.size(); g += size_t(ranks.cp_size)) out.push_back(std::move(all[g]));
  return out;
}

std::vector<std::vector<int64_t>> gather_cursors(const std::vector<int64_t>& mine, MPI_Comm comm) {
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  if (ranks == 1) return {mine};
  const int64_t my_size = int64_t(mine.size());
  std::vector<int64_t> sizes(static_cast<size_t>(ranks), 0);
  MPI_Allgather(&my_size, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, comm);
  std::vector<int> counts(static_cast<size_t>(ranks), 0), displs(static_cast<size_t>(ranks), 0);
  int total = 0;
  for (int r = 0; r < ranks; ++r) {
    counts[size_t(r)] = int(sizes[size_t(r)]);
    displs[size_t(r)] = total;
    total += counts[size_t(r)];
  }
  std::vector<int64_t> all(size_t(total), 0);
  MPI_Allgatherv(mine.data(), int(mine.size()), MPI_INT64_T, all.data(), counts.data(), displs.data(),
                 MPI_INT64_T, comm);
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < ranks; ++r)
    out.emplace_back(all.begin() + displs[size_t(r)], all.begin() + displs[size_t(r)] + counts[size_t(r)]);
  return out;
}

// Every rank's text, in rank order, on every rank.
std::vector<std::string> gather_texts(const std::string& mine, MPI_Comm comm) {
  std::vector<int64_t> bytes(mine.begin(), mine.end());
  std::vector<std::string> out;
  for (const auto& part : gather_cursors(bytes, comm)) out.emplace_back(part.begin(), part.end());
  return out;
}

// The tensors of the snapshot that hold NaN or inf values ("/model/embed (2048 of 2048)", at
// most a few named), and how many values in all. A diverged state is refused before any file
// is created: otherwise its checksums would vouch for it and resume would call it good.
constexpr int64_t kNamedTensors = 4;  // a refusal names at most this many tensors per rank

template <typename T>
std::string non_finite_tensors(const TrainingSnapshot<T>& snap, int64_t& values, int64_t& tensors) {
  std::string text;
  for (const auto& t : snap.tensors) {
    const int64_t n = ck::count_non_finite(t.path, ck::DTypeOf<T>::value, t.data.data(), t.data.size() * sizeof(T));
    if (n == 0) continue;
    if (tensors < kNamedTensors)
      text += (tensors ? ", " : "") + t.path + " (" + std::to_string(n) + " of " + std::to_string(t.data.size()) + ")";
    ++tensors;
    values += n;
  }
  return text;
}

template <typename T>
void refuse_non_finite(const TrainingSnapshot<T>& snap, MPI_Comm comm) {
  int64_t values = 0, tensors = 0;
  const std::string mine = non_finite_tensors(snap, values, tensors);
  int initialized = 0;
  MPI_Initialized(&initialized);
  int64_t totals[3] = {values, tensors, std::min(tensors, kNamedTensors)};  // the last: tensors named
  if (initialized) MPI_Allreduce(MPI_IN_PLACE, totals, 3, MPI_INT64_T, MPI_SUM, comm);
  if (totals[0] == 0) return;
  std::string named;
  for (const auto& part : initialized ? gather_texts(mine, comm) : std::vector<std::string>{mine})
    if (!part.empty()) named += (named.empty() ? "" : ", ") + part;
  throw NonFiniteStateError("step " + std::to_string(snap.meta.step) + " holds " + std::to_string(totals[0]) +
                            " non-finite values (NaN or inf) in " + std::to_string(totals[1]) + " tensors: " + named +
                            (totals[1] > totals[2] ? ", ..." : "") + "; the save is refused, nothing was written");
}

// The tensors of a snapshot, each buffer reused from the last save. Parameters, optimizer state
// and carried state live in backend memory (device memory under CUDA): every copy to the host is
// collected first and made as one batch (Memory::to_host_batch: one pinned staging buffer on a
// GPU), then sharded ones are gathered whole over TP, in the same order on every TP rank.
template <typename T>
class SnapshotTensors {
 public:
  explicit SnapshotTensors(TrainingSnapshot<T>& out) : out_(out) {}

  // A tensor at `path` of the checkpoint's `shape`: `mine` the part this rank writes (nullopt:
  // none), `spec` its layout on this rank, `local` its data in backend memory.
  void add(const std::string& path, const ck::Shape& shape, std::optional<ck::Slice> mine,
           const core::ParamSpec& spec, const T* local) {
    if (next_ == out_.tensors.size()) out_.tensors.emplace_back();
    auto& t = out_.tensors[next_++];
    t.path = path;
    t.shape = shape;
    t.mine = std::move(mine);
    if (!t.mine || (!spec.shard.sharded() && !out_.writes)) {
      t.data.clear();  // not this rank's, or a TP rank other than 0 (writes and gathers nothing)
      return;
    }
    if (!spec.shard.sharded()) {
      t.data.resize(size_t(spec.numel()));
      pending_.push_back({next_ - 1, -1, local});
      return;
    }
    sharded_.push_back({spec, std::vector<T>(size_t(spec.numel()))});
    pending_.push_back({next_ - 1, int(sharded_.size()) - 1, local});
  }

  // Every buffer exists now (no vector grows any more): one batch of copies, then the gathers.
  void copy_and_gather(kernels::Memory& memory, const core::TensorParallel& tp) {
    out_.tensors.resize(next_);
    std::vector<kernels::HostCopy> copies;
    for (const Pending& p : pending_) {
      std::vector<T>& dst = p.sharded < 0 ? out_.tensors[p.tensor].data : sharded_[size_t(p.sharded)].local;
      copies.push_back({dst.data(), p.src, dst.size() * sizeof(T)});
    }
    memory.to_host_batch(copies);
    std::vector<T> staging;
    for (const Pending& p : pending_) {
      if (p.sharded < 0) continue;
      const Sharded& part = sharded_[size_t(p.sharded)];
      auto& whole = out_.tensors[p.tensor].data;
      whole.resize(size_t(part.spec.global_numel()));
      core::gather_shards(tp, part.spec, part.local.data(), whole.data(), staging);
    }
  }

 private:
  struct Pending {  // a copy to the host, into the tensor's data or (sharded >= 0) a local part
    size_t tensor;
    int sharded;
    const T* src;
  };
  struct Sharded {
    core::ParamSpec spec;
    std::vector<T> local;
  };
  TrainingSnapshot<T>& out_;
  size_t next_ = 0;
  std::vector<Pending> pending_;
  std::vector<Sharded> sharded_;
};

// /model (parameters), /optim (optimizer state) and /state (the carried state: this rank's
// streams are its slice along dim 0, model.md §8), in the order written.
template <typename T>
void add_run_tensors(SnapshotTensors<T>& tensors, core::Model<T>& model, core::Optimizer<T>& optimizer,
                     const CheckpointRanks& ranks, const CarriedTensors<T>& carried) {
  const auto& params = model.params().params();
  for (size_t p = 0; p < params.size(); ++p) {
    const bool mine = writes_param(ranks, int(p));
    const auto& spec = params[p].spec;
    tensors.add(ck::join_path(ck::kModelGroup, spec.name), spec.shape,
                mine ? std::optional<ck::Slice>(ck::Slice::whole(spec.shape)) : std::nullopt, spec, params[p].value);
  }
  for (const auto& st : optimizer.state()) {
    const bool mine = writes_param(ranks, st.param);
    if (mine && st.data == nullptr)
      throw std::logic_error("checkpoint: DP rank " + std::to_string(ranks.dp_cp_rank) + " writes " + st.name +
                             " but holds no optimizer state for it (ZeRO-1 owner mismatch)");
    const core::ParamSpec spec = optimizer_state_spec(st, params[size_t(st.param)].spec);
    tensors.add(ck::join_path(ck::kOptimGroup, st.name), spec.shape,
                mine ? std::optional<ck::Slice>(ck::Slice::whole(spec.shape)) : std::nullopt, spec, st.data);
  }
  for (const auto& ref : carried) {
    const core::ParamSpec spec = full_spec_of(ref.name, ref.shape, ref.shard);
    // Under CP every chunk carries the same state: chunk 0 writes it.
    tensors.add(ck::join_path(ck::kStateGroup, ref.name), global_shape(spec.shape, ranks.data_size()),
                ranks.cp_rank == 0 ? std::optional<ck::Slice>(stream_slice(spec.shape, ranks)) : std::nullopt,
                spec, ref.data);
  }
}

}  // namespace

template <typename T>
int64_t TrainingSnapshot<T>::bytes() const {
  int64_t n = 0;
  for (const auto& t : tensors) n += int64_t(t.data.size() * sizeof(T));
  return n;
}

template <typename T>
void take_training_snapshot(TrainingSnapshot<T>& out, const TrainState<T>& state, const RunPosition& pos,
                            const CheckpointRanks& ranks) {
  core::Model<T>& model = state.model;
  const BatchSource& data = state.data;
  const StepGuard& guard = state.guard;
  // Under TP the dp_cp group of TP rank 0 writes; every TP rank takes part in the gathers, in the
  // same order (collective over the TP group), and every DP rank in the cursor gather.
  out.writes = ranks.tensor_parallel.rank() == 0;
  out.dp_cp_rank = ranks.dp_cp_rank;
  out.meta.step = pos.step;
  out.meta.tokens_seen = pos.tokens_seen;
  out.meta.config_toml = render_toml(state.config);
  out.meta.tokenizer_hash = state.tokenizer_hash;
  out.meta.layout = {ranks.world, ranks.data_size(), ranks.tp};
  out.meta.numerics = ranks.numerics;
  out.optimizer_step = state.optimizer.step_count();
  out.model_variant = model.config().variant;
  out.precision = state.config.train.precision;
  SnapshotTensors<T> tensors(out);
  add_run_tensors(tensors, model, state.optimizer, ranks, state.carried.empty() ? model.carried_state() : state.carried);
  tensors.copy_and_gather(model.memory(), ranks.tensor_parallel);
  // The data cursor of every global stream, merged from all data ranks (written by dp_cp rank 0).
  out.ints.clear();
  out.ints.push_back({ck::join_path(ck::kDataGroup, "cursor"),
                      data.merge_cursors(chunk_zero_cursors(gather_cursors(data.cursor(), ranks.comm), ranks))});
  // The step guard's state, the same on every rank (every decision is on global values);
  // skip_batches as [n, step...]: never zero-size (MPI-IO cannot write an empty dataset).
  std::vector<int64_t> skips = guard.skip_batches();
  skips.insert(skips.begin(), int64_t(skips.size()));
  out.ints.push_back({ck::join_path(ck::kDataGroup, "guard_counters"), guard.counters()});
  out.ints.push_back({ck::join_path(ck::kDataGroup, "skip_batches"), std::move(skips)});
  out.has_guard = true;
  out.guard_windows = guard.windows();
}

namespace {

// The file a snapshot makes on disk: every tensor whole (each writing rank holds its part), the
// integer arrays and HDF5's own structure.
template <typename T>
int64_t snapshot_file_bytes(const TrainingSnapshot<T>& snap) {
  int64_t n = 0;
  for (const auto& t : snap.tensors) {
    int64_t elems = 1;
    for (const int64_t d : t.shape) elems *= d;
    n += elems * int64_t(sizeof(T));
  }
  for (const auto& i : snap.ints) n += int64_t(i.values.size() * sizeof(int64_t));
  return checkpoint_bytes_on_disk(n + int64_t(snap.guard_windows.size() * sizeof(double)));
}

// A save that cannot fit fails before writing a byte, naming both sizes and the folder (the
// failure path of a full disk: checkpoint.on_error decides), instead of filling the file system
// and failing at ENOSPC. Rank 0 of `comm` measures: one answer for every writing rank.
template <typename T>
void refuse_without_space(const TrainingSnapshot<T>& snap, const std::string& dir, MPI_Comm comm) {
  int rank = 0, size = 1;
  if (comm != MPI_COMM_NULL) {
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
  }
  int64_t free_bytes = rank == 0 ? free_bytes_at(dir) : -1;
  if (size > 1) MPI_Bcast(&free_bytes, 1, MPI_INT64_T, 0, comm);
  const std::string file = (std::filesystem::path(dir) / ck::checkpoint_file_name(snap.meta.step)).string();
  if (auto p = checkpoint_space_problem(dir, file, snapshot_file_bytes(snap), free_bytes); !p.empty())
    throw ck::SaveError(p);
}

}  // namespace

template <typename T>
ck::SaveResult write_training_snapshot(const TrainingSnapshot<T>& snap, const CheckpointConfig& where,
                                       MPI_Comm comm, const CheckpointIo& io) {
  if (!snap.writes) return {};
  const std::string& dir = where.dir;
  refuse_non_finite(snap, comm);
  refuse_without_space(snap, dir, comm);
  ck::WriterOptions options;
  options.keep_last = where.keep;
  options.good = io.good;
  options.on_phase = io.on_phase;
  options.on_bytes = io.on_bytes;
  ck::CheckpointWriter writer(dir, snap.meta.step, comm, options);
  writer.set_metadata(snap.meta);
  writer.set_attr_int("optimizer_step", snap.optimizer_step);
  writer.set_attr_string("model_variant", snap.model_variant);
  writer.set_attr_string("precision", snap.precision);
  for (const auto& t : snap.tensors) writer.write<T>(t.path, t.shape, t.mine, std::span<const T>(t.data));
  const bool ints_writer = snap.dp_cp_rank == 0;
  for (const auto& i : snap.ints)
    writer.write_whole<int64_t>(i.path, {int64_t(i.values.size())}, std::span<const int64_t>(i.values), ints_writer);
  if (snap.has_guard)
    writer.write_whole<double>(ck::join_path(ck::kDataGroup, "guard_windows"), {int64_t(snap.guard_windows.size())},
                               std::span<const double>(snap.guard_windows), ints_writer);
  return writer.commit();
}

template <typename T>
ck::SaveResult save_training_checkpoint(const TrainState<T>& state, const RunPosition& pos,
                                        const CheckpointRanks& ranks, const CheckpointIo& io) {
  TrainingSnapshot<T> snap;
  take_training_snapshot(snap, state, pos, ranks);
  return write_training_snapshot(snap, state.config.checkpoint, ranks.comm, io);
}

#define BRT_INSTANTIATE_CKPT_SAVE(T)                                                           \
  template struct TrainingSnapshot<T>;                                                         \
  template void take_training_snapshot<T>(TrainingSnapshot<T>&, const TrainState<T>&, const RunPosition&, \
                                          const CheckpointRanks&);                              \
  template ck::SaveResult write_training_snapshot<T>(const TrainingSnapshot<T>&, const CheckpointConfig&, \
                                                     MPI_Comm, const CheckpointIo&);            \
  template ck::SaveResult save_training_checkpoint<T>(const TrainState<T>&, const RunPosition&, \
                                                      const CheckpointRanks&, const CheckpointIo&);

BRT_INSTANTIATE_CKPT_SAVE(float)
BRT_INSTANTIATE_CKPT_SAVE(double)

}  // namespace brt::launch
