// Vocabulary of the checkpoint library: errors, element types, shapes, slices, run metadata
// and I/O statistics. The on-disk format these describe is docs/checkpoint-format.md; the
// tensor names callers use are model.md §9 (parameters under /model/<name>).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace brt::checkpoint {

inline constexpr const char* kFormatName = "brt-dist-checkpoint";
// 2: root attributes covered by `attribute_checksums`, datasets listed in `tensor_manifest`
// (docs/checkpoint-format.md §4b). Version 1 files still load, their attributes unverified.
inline constexpr int64_t kFormatVersion = 2;
inline constexpr const char* kTensorManifestAttr = "tensor_manifest";
inline constexpr const char* kAttributeChecksumsAttr = "attribute_checksums";

// Recommended groups (docs/checkpoint-format.md §2). Dataset paths are free-form absolute
// HDF5 paths; these keep writers and readers of a run consistent.
inline constexpr const char* kModelGroup = "/model";  // parameters, model.md §9 names and shapes
inline constexpr const char* kOptimGroup = "/optim";  // optimizer state, full logical shapes
inline constexpr const char* kStateGroup = "/state";  // carried caches / recurrent states (§8)
inline constexpr const char* kDataGroup = "/data";    // int64 arrays: data cursors, RNG, counters

// "/model" + "embed" -> "/model/embed"
std::string join_path(const std::string& group, const std::string& name);

// Every failure of the library is a CheckpointError; the subclasses let callers react.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Saving failed (permission, disk full, I/O error). The previous checkpoint and the `latest`
// pointer are untouched; the caller decides whether to stop or keep training.
class SaveError : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};
// The file is truncated, not HDF5, or a dataset's checksum does not match.
class CorruptCheckpointError : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};
// Not a brt-dist checkpoint, or written by a newer format version than this build reads.
class FormatVersionError : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};
// The checkpoint does not match what the run expects (tensor missing, shape, config, tokenizer).
class MismatchError : public CheckpointError {
 public:
  using CheckpointError::CheckpointError;
};

// Element types a dataset may hold. Stored little-endian; no conversion on read (a dtype
// mismatch is an error, so bit-exact resume can never be lost to a silent cast).
enum class DType { kF32, kF64, kI64, kU64 };

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kF64;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kI64;
};
template <>
struct DTypeOf<uint64_t> {
  static constexpr DType value = DType::kU64;
};

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "float32", "float64", "int64", "uint64"

// Diverged training state (docs/reliability.md): how many of the `n_bytes` bytes of elements of
// dataset `path` (type `dtype`) are NaN or inf, for float tensors under /model, /optim and
// /state; 0 for anything else. The S4D carry (/state/*.ssm.carry, docs/bst.md) keeps the bytes
// of float64 values in float32 elements: those are counted as the float64 values they are.
int64_t count_non_finite(const std::string& path, DType dtype, const void* data, size_t n_bytes);
// True for the S4D carry (/state/*.ssm.carry): its float32 elements hold float64 values' bytes,
// so comparisons and checks read them as float64.
bool holds_float64_bytes(const std::string& path);

using Shape = std::vector<int64_t>;  // full logical shape, row-major, rank >= 1
int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[32128, 1024]"

// A hyperslab of a tensor: per dimension, the first index and the number of indices. The
// data buffer that goes with a slice is that box in row-major order, contiguous.
struct Slice {
  Shape start;
  Shape count;

  static Slice whole(const Shape& shape);
  // Indices [offset, offset + count) along `dim`, everything along the other dimensions
  // (the usual data-/tensor-parallel shard).
  static Slice along(const Shape& shape, int dim, int64_t offset, int64_t count);
  int64_t numel() const;
  bool is_whole(const Shape& shape) const;
};

// Throws std::invalid_argument naming `what` if the slice does not fit inside `shape`.
void check_slice(const Shape& shape, const Slice& slice, const std::string& what);

// The parallel layout that wrote a checkpoint (informational; loading works into any layout).
struct Layout {
  int64_t world_size = 1;
  int64_t dp = 1;  // data-parallel degree
  int64_t tp = 1;  // tensor-parallel degree
};

// Root attributes every brt-dist checkpoint carries (docs/checkpoint-format.md §3).
struct Metadata {
  int64_t step = 0;
  int64_t tokens_seen = 0;
  std::string config_toml;     // the full run config, verbatim
  std::string tokenizer_hash;  // identifies the tokenizer model the token ids belong to
  Layout layout;
  // The numerics of the ranks that trained it (JSON, runtime/numerics.h's record; "" = not
  // recorded): a resume on other numerics is not bit-exact (docs/reliability.md "Numerics").
  std::string numerics;
};

// Duration and volume of a save or load, for the caller to print.
struct IoStats {
  double seconds = 0.0;
  int64_t bytes = 0;  // tensor payload bytes (whole checkpoint for a save, this rank's reads for a load)
  double gb_per_s() const { return seconds > 0.0 ? static_cast<double>(bytes) / seconds / 1e9 : 0.0; }
};

// Turns off HDF5's own printing of error stacks for the whole process. Every failure already
// reaches the caller as a CheckpointError carrying HDF5's reason; the printing would add only
// noise, e.g. "HDF5: infinite loop closing library" at exit after a damaged file was refused.
// Programs call it once at start (brt-dist's main does).
void silence_hdf5_diagnostics();

// How the file is opened. kAuto: POSIX (sec2) for one process, MPI-IO for several.
enum class Driver { kAuto, kPosix, kMpiIo };

}  // namespace brt::checkpoint
