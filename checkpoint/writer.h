// Writing one checkpoint: every rank writes its own slices of each tensor into one HDF5 file
// with collective MPI-IO (or POSIX for a single process), every dataset gets slice-combinable
// checksums (checksum.h), and commit() makes the file appear atomically under its final name,
// moves `latest` and prunes old checkpoints. docs/checkpoint-format.md.
#pragma once

#include <mpi.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/types.h"

namespace brt::checkpoint {

class GoodCheckpoints;  // checkpoint/retention.h

// Called with what the save is doing now ("creating", "writing /model/embed", "syncing",
// "renaming", "pointing latest", "pruning"), on every rank, as each phase begins: a watchdog
// puts a deadline on it (a stalled peer blocks the collective HDF5 calls), tests inject faults.
using PhaseCallback = std::function<void(const std::string& phase)>;

struct WriterOptions {
  int keep_last = 3;           // good checkpoints kept after a save; <= 0 keeps all
  bool update_latest = true;   // point `latest` at the new checkpoint
  Driver driver = Driver::kAuto;
  size_t alignment = 64 * 1024;  // datasets of at least this many bytes start at a multiple of it
  // The run's known-good checkpoints (retention.h): the new file is added and pruning counts
  // only good files. Null: only the new file is known good, older ones are verified as needed.
  GoodCheckpoints* good = nullptr;
  PhaseCallback on_phase;
  // After each dataset: the tensor bytes written so far (progress of a long save).
  std::function<void(int64_t bytes)> on_bytes;
};

struct SaveResult {
  std::filesystem::path path;         // the committed file
  IoStats stats;                      // whole save, slowest rank, all tensor bytes
  std::vector<std::string> warnings;  // e.g. an old checkpoint that could not be pruned
};

// Usage (every call is collective over `comm`: all ranks make the same calls, in the same order,
// with the same names, shapes and attribute values; only the slices and data differ):
//   CheckpointWriter writer(dir, step, comm, options);   // creates <dir>/ckpt-<step>.h5.tmp
//   writer.set_metadata(meta);
//   writer.write<float>("/model/embed", {V, D}, Slice::along({V, D}, 0, row0, rows), my_rows);
//   writer.write_whole<float>("/model/final_norm.scale", {D}, gains, /*this_rank_writes=*/dp_cp_rank == 0);
//   writer.write<float>("/state/x", shape, std::nullopt, {});  // this rank holds none of it
//   SaveResult result = writer.commit();
// Each element must be written by exactly one rank (replicated tensors: one owner); the writer
// checks that the slices add up to the tensor's size. On any failure every rank throws SaveError
// naming the file, the temporary file is removed, and the previous checkpoints and `latest` are
// untouched. Destroying a writer without commit() abandons the save the same way. A save
// removes only the temporary file it created (checked by device and inode), never another
// *.tmp: leftovers of crashed saves are the directory lock holder's to remove
// (remove_abandoned_partials, launch/preflight/run_lock.h).
class CheckpointWriter {
 public:
  CheckpointWriter(const std::filesystem::path& dir, int64_t step, MPI_Comm comm = MPI_COMM_SELF,
                   WriterOptions options = {});
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Root attributes. metadata.step must equal the constructor's step.
  void set_metadata(const Metadata& metadata);
  void set_attr_string(const std::string& name, std::string_view value);
  void set_attr_int(const std::string& name, int64_t value);
  void set_attr_double(const std::string& name, double value);  // e.g. LR schedule state

  // `path` is an absolute dataset path ("/model/layers.0.attn.wq"); intermediate groups are
  // created. `mine` is this rank's slice (nullopt: none) and `data` its elements, row-major.
  template <typename T>
  void write(const std::string& path, const Shape& shape, const std::optional<Slice>& mine,
             std::span<const T> data) {
    write_raw(path, shape, mine ? &*mine : nullptr, data.data(), data.size(), DTypeOf<T>::value);
  }
  // A tensor every rank holds whole (replicated); exactly one rank passes this_rank_writes.
  template <typename T>
  void write_whole(const std::string& path, const Shape& shape, std::span<const T> data,
                   bool this_rank_writes = true) {
    write<T>(path, shape, this_rank_writes ? std::optional<Slice>(Slice::whole(shape)) : std::nullopt,
             this_rank_writes ? data : std::span<const T>());
  }

  // Writes the tensor manifest and the attribute checksums (docs/checkpoint-format.md §4b),
  // then flush, close, fsync, rename to ckpt-<step>.h5, fsync the directory, update `latest`,
  // prune (retention.h).
  SaveResult commit();

  const std::filesystem::path& final_path() const;
  const std::filesystem::path& temporary_path() const;

  struct Impl;  // implementation detail (writer.cpp)

 private:
  void write_raw(const std::string& path, const Shape& shape, const Slice* mine, const void* data,
                 size_t n_elements, DType dtype);
  std::unique_ptr<Impl> impl_;
};

}  // namespace brt::checkpoint
