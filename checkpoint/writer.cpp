#include "checkpoint/writer.h"

#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <set>
#include <type_traits>

#include "checkpoint/checksum.h"
#include "checkpoint/directory.h"
#include "checkpoint/h5util.h"
#include "checkpoint/retention.h"

namespace brt::checkpoint {
namespace fs = std::filesystem;
using detail::Hid;

namespace {
using Clock = std::chrono::steady_clock;
constexpr const char* kChecksumAlgorithm = "sum-fmix64-rows-v1";  // checksum.h
}  // namespace

struct CheckpointWriter::Impl {
  detail::CommInfo comm;
  WriterOptions options;
  fs::path dir, tmp, final_path;
  FileIdentity created;  // the temporary file this save created: the only one it may remove
  int64_t step = 0;
  Hid file;
  bool committed = false;
  bool failed = false;
  int64_t bytes = 0;
  Clock::time_point start;
  std::set<std::string> written;
  std::map<std::string, uint64_t> attribute_hashes;  // root attribute -> attribute_hash
  std::map<std::string, std::string> manifest;       // dataset path -> "dtype\tshape\tchecksum"

  void phase(const std::string& what) const {
    if (options.on_phase) options.on_phase(what);
  }

  // A root attribute, written and remembered for the attribute checksum table.
  template <typename Value>
  void put_attr(const std::string& name, const Value& value) {
    detail::write_attr(file.get(), name, value);
    const auto* bytes = reinterpret_cast<const unsigned char*>(&value);
    attribute_hashes[name] = attribute_hash(name, std::is_same_v<Value, double> ? 'd' : 'i',
                                            std::span<const unsigned char>(bytes, sizeof(Value)));
  }
  void put_attr(const std::string& name, std::string_view text) {
    detail::write_attr(file.get(), name, text);
    attribute_hashes[name] = attribute_hash(
        name, 's', std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(text.data()), text.size()));
  }

  // Collective agreement: if any rank failed, every rank abandons the save and throws the
  // gathered messages (so all ranks leave the collective protocol at the same call).
  void agree(bool local_ok, const std::string& local_message) {
    if (!detail::any_rank(comm, !local_ok)) return;
    std::vector<std::string> mine;
    if (!local_ok) mine.push_back("rank " + std::to_string(comm.rank) + ": " + local_message);
    const auto all = detail::gather_to_all(comm, mine);
    abandon();
    std::string message = "checkpoint save to " + final_path.string() + " failed";
    for (const auto& line : all) message += "\n  " + line;
    throw SaveError(message);
  }

  // Close and delete the temporary file; the previous checkpoints were never touched. The
  // file is emptied first: after a write error (disk full) HDF5 can only close it once its
  // pending metadata fits, and a deleted file held open would keep its space. Only the file
  // this save created is emptied and removed: a file of the same name someone else has put
  // there since is left alone (no cleanup ever touches another process's file).
  // `collective`: every rank abandons together (a failure all agreed on). The destructor
  // abandons alone (an exception on this rank only): no barrier, which could wait forever.
  void abandon(bool collective = true) {
    failed = true;
    if (collective) detail::barrier(comm);
    if (comm.rank == 0 || !collective) truncate_own_file(tmp, created);
    if (collective) detail::barrier(comm);
    // Closing an MPI-IO file is collective: a rank abandoning alone would wait for the others
    // there forever, so it leaves the handle to the process's end (the job is ending).
    if (!collective && comm.size > 1) file.release();
    file.reset();  // closes every object of the file, then the file
    if (comm.rank == 0) remove_own_file(tmp, created);
    if (collective) detail::barrier(comm);
  }

  void require_open() const {
    if (failed) throw SaveError("checkpoint save to " + final_path.string() + " was already abandoned");
    if (committed) throw std::logic_error("checkpoint " + final_path.string() + " already committed");
  }
};

CheckpointWriter::CheckpointWriter(const fs::path& dir, int64_t step, MPI_Comm comm,
                                   WriterOptions options)
    : impl_(std::make_unique<Impl>()) {
  detail::QuietHdf5 quiet;
  Impl& s = *impl_;
  s.comm = detail::comm_info(comm);
  s.options = options;
  s.dir = dir;
  s.step = step;
  s.final_path = dir / checkpoint_file_name(step);
  s.tmp = dir / (checkpoint_file_name(step) + ".tmp");
  s.start = Clock::now();

  s.phase("creating");
  std::string error;
  if (s.comm.rank == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) error = "cannot create directory " + dir.string() + ": " + ec.message();
    // A leftover of the same name (a crashed save: under brt-dist's directory lock no other
    // run writes here) is replaced by a new file rather than written into, so this save's
    // file is its own from the start and its cleanup can tell it from any other.
    if (error.empty() && fs::is_regular_file(s.tmp, ec)) fs::remove(s.tmp, ec);
  }
  s.agree(error.empty(), error);
  detail::barrier(s.comm);

  Hid fapl = detail::make_file_access(s.comm, options.driver, options.alignment);
  s.file = Hid(H5Fcreate(s.tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!s.file.valid()) error = "cannot create " + s.tmp.string() + ": " + detail::hdf5_reason();
  if (s.file.valid()) s.created = identify_file(s.tmp);
  s.agree(s.file.valid(), error);
  try {
    s.put_attr("format", std::string_view(kFormatName));
    s.put_attr("format_version", kFormatVersion);
    s.put_attr("step", step);
    s.put_attr("checksum_algorithm", std::string_view(kChecksumAlgorithm));
    s.put_attr("checksum_chunk_elems", kChecksumChunkElems);
  } catch (const CheckpointError& e) {
    error = e.what();
  }
  s.agree(error.empty(), error);
}

CheckpointWriter::~CheckpointWriter() {
  if (impl_ && !impl_->committed && !impl_->failed) {
    try {
      detail::QuietHdf5 quiet;
      impl_->abandon(/*collective=*/false);
    } catch (...) {
      // Destructors must not throw; the temporary file is at worst left behind, and
      // find_latest_good ignores *.tmp files.
    }
  }
}

const fs::path& CheckpointWriter::final_path() const {
  return impl_->final_path;
}

const fs::path& CheckpointWriter::temporary_path() const {
  return impl_->tmp;
}

void CheckpointWriter::set_metadata(const Metadata& metadata) {
  if (metadata.step != impl_->step) {
    throw std::invalid_argument("checkpoint " + impl_->final_path.string() + ": metadata step " +
                                std::to_string(metadata.step) + " != writer step " +
                                std::to_string(impl_->step));
  }
  set_attr_int("tokens_seen", metadata.tokens_seen);
  set_attr_string("config_toml", metadata.config_toml);
  set_attr_string("tokenizer_hash", metadata.tokenizer_hash);
  set_attr_int("world_size", metadata.layout.world_size);
  set_attr_int("dp", metadata.layout.dp);
  set_attr_int("tp", metadata.layout.tp);
  if (!metadata.numerics.empty()) set_attr_string("numerics", metadata.numerics);
}

namespace {
const std::set<std::string>& reserved_attrs() {
  static const std::set<std::string> names = {"format",           "format_version", "step",
                                              "checksum_algorithm", "checksum_chunk_elems",
                                              kTensorManifestAttr, kAttributeChecksumsAttr};
  return names;
}

std::string manifest_text(const std::map<std::string, std::string>& manifest) {
  std::string text;
  for (const auto& [path, entry] : manifest) text += path + "\t" + entry + "\n";
  return text;
}

std::string attribute_table_text(const std::map<std::string, uint64_t>& hashes) {
  std::string text;
  for (const auto& [name, hash] : hashes) text += name + "\t" + hex64(hash) + "\n";
  return text;
}


template <typename Value>
void set_root_attr(CheckpointWriter::Impl& s, const std::string& name, const Value& value) {
  s.require_open();
  if (reserved_attrs().count(name)) {
    throw std::invalid_argument("checkpoint attribute '" + name + "' is reserved");
  }
  detail::QuietHdf5 quiet;
  std::string error;
  try {
    s.put_attr(name, value);
  } catch (const CheckpointError& e) {
    error = s.final_path.string() + ": " + e.what();
  }
  s.agree(error.empty(), error);
}

// What is wrong with write_raw's arguments on this rank ("" when nothing).
std::string write_argument_error(const CheckpointWriter::Impl& s, const std::string& path,
                                 const Shape& shape, const Slice* mine, size_t n_elements,
                                 const std::string& where) {
  std::string error;
  if (path.empty() || path.front() != '/') error = "dataset path must be absolute: '" + path + "'";
  else if (shape.empty()) error = where + ": tensors need rank >= 1 (store scalars as shape [1])";
  else if (s.written.count(path)) error = where + ": written twice";
  else if (mine != nullptr) {
    try {
      check_slice(shape, *mine, where);
      if (static_cast<int64_t>(n_elements) != mine->numel()) {
        error = where + ": data has " + std::to_string(n_elements) + " elements, slice has " +
                std::to_string(mine->numel());
      }
    } catch (const std::invalid_argument& e) {
      error = e.what();
    }
  }
  return error;
}

// The dataset at `path` (intermediate groups created), agreed on by every rank.
Hid create_dataset(CheckpointWriter::Impl& s, const std::string& path, const Shape& shape,
                   DType dtype, const std::string& where, std::string& error) {
  Hid lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER);  // every byte gets written; skip the fill pass
  Hid file_space = detail::select_space(shape, nullptr);
  H5Sselect_all(file_space.get());
  Hid dataset(H5Dcreate2(s.file.get(), path.c_str(), detail::file_type(dtype), file_space.get(),
                         lcpl.get(), dcpl.get(), H5P_DEFAULT),
              H5Dclose);
  if (!dataset.valid()) error = "cannot create dataset " + where + ": " + detail::hdf5_reason();
  s.agree(dataset.valid(), error);
  return dataset;
}

// Writes this rank's slice into `dataset` and its per-chunk checksums into `sums`, agreeing on
// the write's success.
void write_and_hash_slice(CheckpointWriter::Impl& s, const Hid& dataset, const Shape& shape,
                          const ChunkGrid& grid, const Slice* mine, const void* data, DType dtype,
                          const std::string& where, std::string& error,
                          std::vector<uint64_t>& sums) {
  // Hash this rank's slice on a helper thread while HDF5 writes it (checksum.h): the hash then
  // costs no wall time as long as it is faster than the disk.
  auto hash = [&] {
    if (mine != nullptr) accumulate_checksums(shape, grid, *mine, data, dtype_size(dtype), sums);
  };
  const bool overlap = mine != nullptr && mine->numel() >= kChecksumChunkElems;
  std::future<void> hashing = overlap ? std::async(std::launch::async, hash) : std::future<void>();
  if (!overlap) hash();

  Hid dxpl(H5Pcreate(H5P_DATASET_XFER), H5Pclose);
  if (detail::uses_mpio(s.comm, s.options.driver)) H5Pset_dxpl_mpio(dxpl.get(), H5FD_MPIO_COLLECTIVE);
  Hid selection = detail::select_space(shape, mine);
  Hid memory = detail::memory_space(mine);
  const float dummy = 0.0f;
  const herr_t status = H5Dwrite(dataset.get(), detail::memory_type(dtype), memory.get(),
                                 selection.get(), dxpl.get(), data ? data : &dummy);
  if (hashing.valid()) hashing.get();
  // On failure the dataset stays open while abandon() closes the file: HDF5 (1.10) then frees
  // the file once the dataset goes; closing the dataset first after a failed write leaves a
  // half-closed file that crashes HDF5's shutdown at exit.
  if (status < 0) error = "cannot write dataset " + where + ": " + detail::hdf5_reason();
  s.agree(status >= 0, error);
}
}  // namespace

void CheckpointWriter::set_attr_string(const std::string& name, std::string_view value) {
  set_root_attr(*impl_, name, value);
}
void CheckpointWriter::set_attr_int(const std::string& name, int64_t value) {
  set_root_attr(*impl_, name, value);
}
void CheckpointWriter::set_attr_double(const std::string& name, double value) {
  set_root_attr(*impl_, name, value);
}

void CheckpointWriter::write_raw(const std::string& path, const Shape& shape, const Slice* mine,
                                 const void* data, size_t n_elements, DType dtype) {
  impl_->require_open();
  detail::QuietHdf5 quiet;
  Impl& s = *impl_;
  const std::string where = s.final_path.string() + ":" + path;
  s.phase("writing " + path);

  // Argument checks are agreed on too, so one rank's mistake cannot hang the others.
  std::string error = write_argument_error(s, path, shape, mine, n_elements, where);
  s.agree(error.empty(), error);
  s.written.insert(path);
  const int64_t covered = detail::sum_over_ranks(s.comm, mine ? mine->numel() : int64_t{0});
  if (covered != shape_numel(shape)) {
    error = where + ": the ranks' slices cover " + std::to_string(covered) + " elements of " +
            std::to_string(shape_numel(shape)) + " (each element must have exactly one writer)";
  }
  s.agree(error.empty() || s.comm.rank != 0, error);  // every rank knows; rank 0 reports it once

  Hid dataset = create_dataset(s, path, shape, dtype, where, error);
  const ChunkGrid grid = canonical_chunk_grid(shape);
  std::vector<uint64_t> sums(static_cast<size_t>(grid.n_chunks), 0);
  write_and_hash_slice(s, dataset, shape, grid, mine, data, dtype, where, error, sums);

  detail::sum_over_ranks(s.comm, sums);
  s.manifest[path] = std::string(dtype_name(dtype)) + "\t" + shape_string(shape) + "\t" + hex64(sum_of(sums));
  try {
    detail::write_attr_u64(dataset.get(), "checksum", sum_of(sums));
    detail::write_attr(dataset.get(), "checksum_chunks", std::span<const uint64_t>(sums));
    detail::write_attr(dataset.get(), "checksum_rows_per_chunk", grid.rows_per_chunk);
  } catch (const CheckpointError& e) {
    error = where + ": " + e.what();
  }
  if (dataset.reset() < 0 && error.empty()) error = "cannot close dataset " + where + ": " + detail::hdf5_reason();
  s.agree(error.empty(), error);
  s.bytes += shape_numel(shape) * static_cast<int64_t>(dtype_size(dtype));
  if (s.options.on_bytes) s.options.on_bytes(s.bytes);
}

SaveResult CheckpointWriter::commit() {
  impl_->require_open();
  detail::QuietHdf5 quiet;
  Impl& s = *impl_;
  std::string error;
  s.phase("closing");
  try {
    // The manifest and the attribute table last: they describe everything written before.
    s.put_attr(kTensorManifestAttr, std::string_view(manifest_text(s.manifest)));
    detail::write_attr(s.file.get(), kAttributeChecksumsAttr,
                       std::string_view(attribute_table_text(s.attribute_hashes)));
  } catch (const CheckpointError& e) {
    error = s.final_path.string() + ": " + e.what();
  }
  s.agree(error.empty(), error);
  if (H5Fflush(s.file.get(), H5F_SCOPE_GLOBAL) < 0) {
    error = "cannot flush " + s.tmp.string() + ": " + detail::hdf5_reason();
  }
  if (s.file.reset() < 0 && error.empty()) {
    error = "cannot close " + s.tmp.string() + ": " + detail::hdf5_reason();
  }
  s.agree(error.empty(), error);

  // Rank 0 makes the file durable and visible; the others wait for its verdict.
  SaveResult result;
  result.path = s.final_path;
  std::string warnings;
  if (s.comm.rank == 0) {
    try {
      s.phase("syncing");
      fsync_file(s.tmp);
      s.phase("renaming");
      if (!is_same_file(s.tmp, s.created))
        throw SaveError(s.tmp.string() + " is no longer the file this save wrote (another process replaced or "
                        "removed it: is another run saving into " + s.dir.string() + "?)");
      if (std::rename(s.tmp.c_str(), s.final_path.c_str()) != 0) {
        throw SaveError("cannot rename " + s.tmp.string() + " to " + s.final_path.string() + ": " +
                        std::strerror(errno));
      }
      fsync_directory(s.dir);
    } catch (const SaveError& e) {
      error = e.what();
    }
    if (error.empty()) {
      // From here the new checkpoint is committed; later trouble is only a warning.
      GoodCheckpoints only_this_save;
      GoodCheckpoints& good = s.options.good != nullptr ? *s.options.good : only_this_save;
      good.mark(s.final_path);
      try {
        s.phase("pointing latest");
        if (s.options.update_latest) write_latest_pointer(s.dir, s.final_path.filename().string());
      } catch (const SaveError& e) {
        warnings += std::string(e.what()) + "\n";
      }
      s.phase("pruning");
      for (const auto& w : prune_checkpoints(s.dir, s.options.keep_last, good).warnings) warnings += w + "\n";
      // Other *.tmp files are not this save's: a crashed save's leftovers are removed by the
      // holder of the directory lock at start (remove_abandoned_partials), never here.
    }
  }
  detail::broadcast(s.comm, error, 0);
  s.agree(error.empty(), error);
  detail::broadcast(s.comm, warnings, 0);
  for (size_t begin = 0, end; (end = warnings.find('\n', begin)) != std::string::npos; begin = end + 1) {
    result.warnings.push_back(warnings.substr(begin, end - begin));
  }
  s.committed = true;
  const double local = std::chrono::duration<double>(Clock::now() - s.start).count();
  result.stats.seconds = detail::max_over_ranks(s.comm, local);
  result.stats.bytes = s.bytes;
  return result;
}

}  // namespace brt::checkpoint
