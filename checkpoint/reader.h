// Reading a checkpoint on one process or many, in any layout: each rank reads exactly the
// hyperslabs it needs, and what it reads is checked against the per-chunk checksums
// (checksum.h). docs/checkpoint-format.md.
#pragma once

#include <mpi.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/types.h"

namespace brt::checkpoint {

struct ReaderOptions {
  Driver driver = Driver::kAuto;
  // Called with "opening FILE" before the collective open (writer.h, PhaseCallback); callers
  // report their own later phases (reading, verifying) around the reads they make.
  std::function<void(const std::string&)> on_phase;
};

struct TensorInfo {
  std::string path;  // "/model/embed"
  DType dtype = DType::kF32;
  Shape shape;
  bool has_checksum = false;
  int64_t n_chunks = 0;         // checksum chunks along the leading dimension
  int64_t rows_per_chunk = 0;
};

enum class Verify {
  kNone,           // trust the data (e.g. after verify_all() passed)
  kTouchedChunks,  // verify every checksum chunk the slice touches (reads those chunks whole)
};

struct VerifyReport {
  bool ok = true;
  std::vector<std::string> problems;  // each names the file and dataset (and chunk)
  int64_t datasets = 0;
  int64_t chunks = 0;
  int64_t bytes = 0;  // bytes read to verify (this rank)
};

class CheckpointReader {
 public:
  // Collective over comm (MPI-IO open when it has several ranks; POSIX otherwise). Throws
  // CorruptCheckpointError (missing, truncated, not HDF5, damaged structure, a root attribute
  // that fails its checksum, a dataset that disagrees with the manifest) or FormatVersionError
  // (not a brt-dist checkpoint, or a newer format version), naming the file and what is wrong.
  explicit CheckpointReader(const std::filesystem::path& file, MPI_Comm comm = MPI_COMM_SELF,
                            ReaderOptions options = {});
  ~CheckpointReader();  // collective when opened with MPI-IO
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::filesystem::path& path() const;
  int64_t format_version() const;
  Metadata metadata() const;  // missing attributes read as defaults
  // False only for format version 1 files, whose root attributes carry no checksums.
  bool attributes_verified() const;

  std::vector<std::string> attr_names() const;  // root attributes, sorted
  bool has_attr(const std::string& name) const;
  std::optional<std::string> attr_string(const std::string& name) const;
  std::optional<int64_t> attr_int(const std::string& name) const;
  std::optional<double> attr_double(const std::string& name) const;

  const std::vector<TensorInfo>& tensors() const;  // every dataset, sorted by path
  bool has(const std::string& path) const;
  const TensorInfo& info(const std::string& path) const;  // throws MismatchError if absent

  // Reads `slice` of dataset `path` into `out` (slice.numel() elements, row-major). Independent
  // (not collective): each rank reads what it needs. The element type must match the dataset's.
  // Throws CorruptCheckpointError naming file, dataset and chunk on a checksum mismatch.
  template <typename T>
  void read(const std::string& path, const Slice& slice, std::span<T> out,
            Verify verify = Verify::kTouchedChunks) {
    read_raw(path, slice, out.data(), out.size(), DTypeOf<T>::value, verify);
  }
  template <typename T>
  std::vector<T> read_whole(const std::string& path, Verify verify = Verify::kTouchedChunks) {
    const Shape& shape = info(path).shape;
    std::vector<T> out(static_cast<size_t>(shape_numel(shape)));
    read<T>(path, Slice::whole(shape), std::span<T>(out), verify);
    return out;
  }

  // Collective: verifies every chunk of every dataset once, the chunks dealt round-robin over
  // the ranks; every rank gets the full report. A NaN or inf value in a float tensor under
  // /model, /optim or /state (diverged training state) is reported as damage too.
  VerifyReport verify_all();

  // Accumulated over this rank's read() calls.
  const IoStats& load_stats() const;

 private:
  void read_raw(const std::string& path, const Slice& slice, void* out, size_t n_elements,
                DType dtype, Verify verify);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brt::checkpoint
