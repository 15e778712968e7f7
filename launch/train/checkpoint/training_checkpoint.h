// Maps a training run onto the checkpoint format (docs/checkpoint-format.md): parameters
// under /model/<model.md §9 name>, optimizer state under /optim/<state name>, every stream's
// carried caches and recurrent states under /state/<name>, the data cursor under /data/cursor,
// plus step, tokens seen, the full config and the tokenizer hash. Everything needed to
// continue a run exactly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/model.h"
#include "core/optim/optimizer.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"
#include "launch/train/checkpoint/train_state.h"
#include "launch/train/run_position.h"
#include "launch/train/step_guard.h"

namespace brt::launch {

// The data-parallel layout a run saves from or loads into. `dp_cp_rank`/`dp_cp_size` are the
// ranks of the group gradients are summed over: DP x CP under context parallelism
// (parallel/layout.h), DP alone without. Each data rank (data_rank(): dp_cp_rank / cp_size) holds B streams, global
// streams [data_rank*B, (data_rank+1)*B): its carried state and data cursor are that slice
// along dim 0 of the global [data_size*B, ...] datasets. Parameters and optimizer state are
// replicated (or, under ZeRO-1, sharded by whole parameters over the dp_cp group): parameter p and
// its state are written once, by dp_cp rank param_owner[p] (empty: rank 0).
struct CheckpointRanks {
  MPI_Comm comm = MPI_COMM_SELF;  // the dp_cp group (collective saves, MPI-IO)
  int dp_cp_rank = 0, dp_cp_size = 1;
  int world = 1, tp = 1;          // recorded as the writing layout
  std::vector<int> param_owner;
  // Tensor parallelism: sharded tensors are gathered over the TP group and written whole by
  // the dp_cp group of TP rank 0, so a checkpoint does not depend on the layout; loading reads the
  // whole tensor and keeps this rank's slice.
  core::TensorParallel tensor_parallel;
  // Context parallelism: the dp_cp group spans DP x CP; the cp ranks of one data rank hold the same
  // streams and the same carried state, which chunk 0 writes.
  int cp_rank = 0, cp_size = 1;
  // The job's numerics record (runtime/numerics.h), written as the `numerics` attribute.
  std::string numerics;
  int data_rank() const { return dp_cp_rank / cp_size; }
  int data_size() const { return dp_cp_size / cp_size; }
};

// What a save or load reports and shares beyond the tensors.
struct CheckpointIo {
  // The run's known-good checkpoints (checkpoint/retention.h): saves add theirs, pruning counts
  // only good files. Null: only the new save is known good.
  checkpoint::GoodCheckpoints* good = nullptr;
  // Each phase of the save or load as it begins ("writing /model/embed", "reading /optim/...").
  checkpoint::PhaseCallback on_phase;
  // Tensor bytes written or read so far (progress of a long save or load).
  std::function<void(int64_t bytes)> on_bytes;
};

// Everything a save writes, copied to the host (asynchronous checkpoints):
// taken on the training thread between steps (collective: the TP gathers and the data-cursor
// gather), then written by any thread while training goes on. A snapshot reuses its buffers
// from one save to the next.
template <typename T>
struct TrainingSnapshot {
  bool writes = true;  // false on TP ranks other than 0: they only took part in the gathers
  int dp_cp_rank = 0;  // dp_cp rank 0 writes the replicated integer arrays
  checkpoint::Metadata meta;
  int64_t optimizer_step = 0;
  std::string model_variant, precision;
  struct Tensor {
    std::string path;
    checkpoint::Shape shape;
    std::optional<checkpoint::Slice> mine;  // this rank's part (nullopt: none)
    std::vector<T> data;
  };
  std::vector<Tensor> tensors;  // in the order written: /model, /optim, /state
  struct Ints {
    std::string path;
    std::vector<int64_t> values;
  };
  std::vector<Ints> ints;  // /data/cursor, the guard's counters and batches to skip
  bool has_guard = false;
  std::vector<double> guard_windows;
  int64_t bytes() const;  // tensor bytes held
};

// Copies everything a save of `state` at `pos` writes into `out` (its buffers reused): the
// parameters, the optimizer state, the carried state, the data cursor and the step guard's state
// (/data/guard_*, /data/skip_batches). Collective over the TP group (the gathers) and the dp_cp group
// (the cursors).
template <typename T>
void take_training_snapshot(TrainingSnapshot<T>& out, const TrainState<T>& state, const RunPosition& pos,
                            const CheckpointRanks& ranks);
// A save refused because what it would write holds NaN or inf values (diverged parameters,
// optimizer state or carried state): nothing was written, earlier checkpoints are untouched.
// The message names the tensors and how many of their values are not finite.
class NonFiniteStateError : public checkpoint::SaveError {
 public:
  using checkpoint::SaveError::SaveError;
};

// Collective over `comm` (the writing dp_cp group's; a thread of its own may do this while the
// training thread uses the others). Returns {} on ranks that do not write. Checks every tensor
// of the snapshot first and throws NonFiniteStateError (on every writing rank alike) before
// creating any file if one holds a NaN or inf.
// Writes into where.dir, keeping where.keep checkpoints.
template <typename T>
checkpoint::SaveResult write_training_snapshot(const TrainingSnapshot<T>& snapshot, const CheckpointConfig& where,
                                               MPI_Comm comm, const CheckpointIo& io = {});

// take_training_snapshot + write_training_snapshot on this thread: the synchronous save.
template <typename T>
checkpoint::SaveResult save_training_checkpoint(const TrainState<T>& state, const RunPosition& pos,
                                                const CheckpointRanks& ranks, const CheckpointIo& io = {});

// What a load returns beside the state it filled.
struct LoadedCheckpoint {
  RunPosition position;        // where the run stood
  checkpoint::IoStats stats;   // bytes read and the time it took
  std::string numerics;        // the numerics record of the job that wrote it ("": none)
};

// Loads `file` into `state` (model, optimizer, carried state, data cursor, step guard).
// Refuses (checkpoint::MismatchError / CheckpointError naming the file and what differs) a
// checkpoint of another model shape, another tokenizer or a newer format. Any DP size loads a
// checkpoint of any other as long as the global stream count data_size*B is the same.
template <typename T>
LoadedCheckpoint load_training_checkpoint(const std::filesystem::path& file, const TrainState<T>& state,
                                          const CheckpointRanks& ranks, const CheckpointIo& io = {});

// Loads only the model parameters (evaluation, generation, checkpoint.init_from): any layout,
// each process reads what it holds. A non-empty tokenizer_hash must be the file's.
template <typename T>
void load_model_parameters(const std::filesystem::path& file, core::Model<T>& model,
                           const checkpoint::PhaseCallback& on_phase = {},
                           const std::string& tokenizer_hash = {});

// The resolved config stored in a checkpoint (for eval/inspect).
RunConfig config_of_checkpoint(const std::filesystem::path& file);

}  // namespace brt::launch
