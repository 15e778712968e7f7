#include "checkpoint/reader.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <optional>

#include "checkpoint/checksum.h"
#include "checkpoint/h5util.h"

namespace brt::checkpoint {
namespace fs = std::filesystem;
using detail::Hid;

namespace {
using Clock = std::chrono::steady_clock;

// Whole-tensor reads go in blocks of about this size (whole checksum chunks) so hashing one
// block overlaps reading the next.
constexpr int64_t kReadBlockBytes = int64_t{32} << 20;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

struct CheckpointReader::Impl {
  detail::CommInfo comm;
  ReaderOptions options;
  fs::path path;
  Hid file;
  int64_t version = 0;
  std::vector<TensorInfo> tensors;
  std::map<std::string, size_t> index;
  std::map<std::string, std::vector<uint64_t>> stored_sums;  // per dataset, per chunk
  IoStats stats;
  bool attributes_verified = false;  // version >= 2: every root attribute matched its checksum

  [[noreturn]] void damaged(const std::vector<std::string>& problems) const {
    std::string message = "checkpoint " + path.string() + " is damaged:";
    const size_t shown = std::min<size_t>(problems.size(), 8);
    for (size_t k = 0; k < shown; ++k) message += (shown > 1 ? "\n  " : " ") + problems[k];
    if (problems.size() > shown) message += "\n  ... and " + std::to_string(problems.size() - shown) + " more";
    throw CorruptCheckpointError(message);
  }

  // Every root attribute against the `attribute_checksums` table (when there is one).
  void check_attribute_table(const std::vector<detail::AttributeBytes>& attrs) {
    const auto table_it = std::find_if(attrs.begin(), attrs.end(), [](const detail::AttributeBytes& a) {
      return a.name == kAttributeChecksumsAttr;
    });
    if (table_it == attrs.end()) return;  // version 1, or not a checkpoint: decided by the caller
    std::map<std::string, uint64_t> table;
    std::vector<std::string> problems;
    const std::string text(table_it->bytes.begin(), table_it->bytes.end());
    for (size_t begin = 0, end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
      const std::string line = text.substr(begin, end - begin);
      const size_t tab = line.find('\t');
      const auto hash = tab == std::string::npos ? std::nullopt : parse_hex64(line.substr(tab + 1));
      if (!hash) {
        problems.push_back("the attribute checksum table has a malformed line '" + line + "'");
        continue;
      }
      table[line.substr(0, tab)] = *hash;
    }
    for (const auto& a : attrs) {
      if (a.name == kAttributeChecksumsAttr) continue;
      auto it = table.find(a.name);
      if (it == table.end()) {
        problems.push_back("root attribute '" + a.name + "' is not in the attribute checksum table");
        continue;
      }
      if (attribute_hash(a.name, a.kind, a.bytes) != it->second)
        problems.push_back("root attribute '" + a.name + "' does not match its checksum");
      table.erase(it);
    }
    for (const auto& [name, hash] : table) problems.push_back("root attribute '" + name + "' is missing");
    if (!problems.empty()) damaged(problems);
    attributes_verified = true;
  }

  // The datasets against `tensor_manifest`: none missing, none extra, same type, shape and
  // whole-tensor checksum (so a damaged name, shape or checksum attribute is reported as damage,
  // not as "another model").
  void check_manifest() const {
    const auto text = detail::read_attr_string(file.get(), kTensorManifestAttr);
    if (!text) damaged({std::string("root attribute '") + kTensorManifestAttr + "' is missing"});
    std::map<std::string, std::string> manifest;
    for (size_t begin = 0, end; (end = text->find('\n', begin)) != std::string::npos; begin = end + 1) {
      const std::string line = text->substr(begin, end - begin);
      const size_t tab = line.find('\t');
      manifest[line.substr(0, tab)] = tab == std::string::npos ? "" : line.substr(tab + 1);
    }
    std::vector<std::string> problems;
    for (const TensorInfo& t : tensors) {
      auto it = manifest.find(t.path);
      if (it == manifest.end()) {
        problems.push_back("dataset " + t.path + " is not in the tensor manifest (a damaged name?)");
        continue;
      }
      Hid dataset = open_dataset(t.path);
      const auto whole = detail::read_attr_u64s(dataset.get(), "checksum");
      const std::string have = std::string(dtype_name(t.dtype)) + "\t" + shape_string(t.shape) + "\t" +
                               (whole && whole->size() == 1 ? hex64((*whole)[0]) : std::string("none"));
      if (have != it->second)
        problems.push_back("dataset " + t.path + " does not match the tensor manifest (stored " + have +
                           ", manifest " + it->second + ")");
      manifest.erase(it);
    }
    for (const auto& [name, entry] : manifest) problems.push_back("dataset " + name + " of the tensor manifest is missing");
    if (!problems.empty()) damaged(problems);
  }

  std::string where(const std::string& dataset) const { return "checkpoint " + path.string() + ", dataset " + dataset; }

  Hid open_dataset(const std::string& name) const {
    Hid dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
    if (!dataset.valid()) {
      throw CorruptCheckpointError(where(name) + ": cannot open (" + detail::hdf5_reason() + ")");
    }
    return dataset;
  }

  // Reads `slice` of an open dataset into `out` (independent I/O).
  void read_box(hid_t dataset, const TensorInfo& info, const Slice& slice, void* out) const {
    Hid selection = detail::select_space(info.shape, &slice);
    Hid memory = detail::memory_space(&slice);
    if (slice.numel() == 0) return;
    if (H5Dread(dataset, detail::memory_type(info.dtype), memory.get(), selection.get(), H5P_DEFAULT,
                out) < 0) {
      throw CorruptCheckpointError(where(info.path) + ": read failed (" + detail::hdf5_reason() + ")");
    }
  }

  // Empty string if chunk `chunk` of the dataset matches its stored checksum, else the problem.
  // `buffer` is scratch space.
  std::string check_chunk(hid_t dataset, const TensorInfo& info, int64_t chunk,
                          std::vector<unsigned char>& buffer, int64_t& bytes_read) const {
    const ChunkGrid grid = chunk_grid_with(info.shape, info.rows_per_chunk);
    Slice rows = Slice::along(info.shape, 0, grid.first_row(chunk), grid.end_row(chunk) - grid.first_row(chunk));
    const size_t elem = dtype_size(info.dtype);
    buffer.resize(static_cast<size_t>(rows.numel()) * elem);
    read_box(dataset, info, rows, buffer.data());
    bytes_read += static_cast<int64_t>(buffer.size());
    std::vector<uint64_t> sums(static_cast<size_t>(grid.n_chunks), 0);
    accumulate_checksums(info.shape, grid, rows, buffer.data(), elem, sums);
    if (sums[chunk] == stored_sums.at(info.path)[chunk]) return "";
    return mismatch(info, grid, chunk);
  }

  // A parameter, optimizer or carried-state value that is NaN or inf is diverged training
  // state, not data a run can go on from: reported as damage although every checksum matches
  // (a save refuses such values; this catches files written otherwise, or before it did).
  std::string non_finite(const TensorInfo& info, int64_t chunk, const std::vector<unsigned char>& buffer) const {
    const int64_t count = count_non_finite(info.path, info.dtype, buffer.data(), buffer.size());
    if (count == 0) return "";
    const ChunkGrid grid = chunk_grid_with(info.shape, info.rows_per_chunk);
    return where(info.path) + ": " + std::to_string(count) + " non-finite values (NaN or inf) in chunk " +
           std::to_string(chunk) + " (rows " + std::to_string(grid.first_row(chunk)) + ".." +
           std::to_string(grid.end_row(chunk) - 1) + ") - diverged training state, not a checkpoint to go on from";
  }

  std::string mismatch(const TensorInfo& info, const ChunkGrid& grid, int64_t chunk) const {
    return where(info.path) + ": checksum mismatch in chunk " + std::to_string(chunk) + " (rows " +
           std::to_string(grid.first_row(chunk)) + ".." + std::to_string(grid.end_row(chunk) - 1) +
           ") - the data is damaged";
  }

  void load_tensor_list() {
    std::vector<std::string> names;
    try {
      names = detail::list_datasets(file.get());
    } catch (const CheckpointError& e) {
      throw CorruptCheckpointError("checkpoint " + path.string() + " is damaged: " + e.what());
    }
    for (const std::string& name : names) {
      Hid dataset = open_dataset(name);
      Hid type(H5Dget_type(dataset.get()), H5Tclose);
      Hid space(H5Dget_space(dataset.get()), H5Sclose);
      const auto dtype = detail::dtype_of(type.get());
      const int rank = H5Sget_simple_extent_ndims(space.get());
      if (!dtype || rank < 1) {
        throw CorruptCheckpointError(where(name) + ": unsupported element type or rank");
      }
      std::vector<hsize_t> dims(static_cast<size_t>(rank));
      H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
      TensorInfo info;
      info.path = name;
      info.dtype = *dtype;
      info.shape.assign(dims.begin(), dims.end());
      std::optional<int64_t> rows_per_chunk;
      std::optional<std::vector<uint64_t>> sums;
      try {
        rows_per_chunk = detail::read_attr_int(dataset.get(), "checksum_rows_per_chunk");
        sums = detail::read_attr_u64s(dataset.get(), "checksum_chunks");
      } catch (const CheckpointError& e) {
        throw CorruptCheckpointError(where(name) + ": " + e.what());
      }
      if (rows_per_chunk && *rows_per_chunk >= 1 && sums) {
        const ChunkGrid grid = chunk_grid_with(info.shape, *rows_per_chunk);
        if (static_cast<int64_t>(sums->size()) != grid.n_chunks) {
          throw CorruptCheckpointError(where(name) + ": checksum_chunks has " + std::to_string(sums->size()) +
                                       " entries, expected " + std::to_string(grid.n_chunks));
        }
        info.has_checksum = true;
        info.rows_per_chunk = *rows_per_chunk;
        info.n_chunks = grid.n_chunks;
        stored_sums[name] = std::move(*sums);
      }
      index[name] = tensors.size();
      tensors.push_back(std::move(info));
    }
  }
};

CheckpointReader::CheckpointReader(const fs::path& file, MPI_Comm comm, ReaderOptions options)
    : impl_(std::make_unique<Impl>()) {
  detail::QuietHdf5 quiet;
  Impl& s = *impl_;
  s.comm = detail::comm_info(comm);
  s.options = options;
  s.path = file;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) {
    throw CorruptCheckpointError("checkpoint " + file.string() + " does not exist or is not a file");
  }
  if (options.on_phase) options.on_phase("opening " + file.string());
  Hid fapl = detail::make_file_access(s.comm, options.driver, 0);
  s.file = Hid(H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!s.file.valid()) {
    throw CorruptCheckpointError("cannot open checkpoint " + file.string() +
                                 " (truncated, damaged or not HDF5): " + detail::hdf5_reason());
  }
  std::vector<detail::AttributeBytes> attrs;
  try {
    attrs = detail::read_all_attributes(s.file.get());
  } catch (const CheckpointError& e) {
    throw CorruptCheckpointError("checkpoint " + file.string() +
                                 " is damaged: its root group cannot be read (" + e.what() + ")");
  }
  // The attribute checksums first: a damaged 'format' or 'format_version' is damage, not
  // "another format" (docs/checkpoint-format.md §4b).
  s.check_attribute_table(attrs);
  const auto format = detail::read_attr_string(s.file.get(), "format");
  if (!format || *format != kFormatName) {
    throw FormatVersionError(file.string() + " is not a brt-dist checkpoint (root attribute 'format' is " +
                             (format ? "'" + *format + "'" : std::string("missing")) + ")");
  }
  const auto version = detail::read_attr_int(s.file.get(), "format_version");
  if (!version) throw FormatVersionError(file.string() + ": root attribute 'format_version' is missing");
  if (*version > kFormatVersion || *version < 1) {
    throw FormatVersionError("checkpoint " + file.string() + " has format version " + std::to_string(*version) +
                             "; this build of brt-dist reads versions 1.." + std::to_string(kFormatVersion) +
                             " (a newer brt-dist wrote it)");
  }
  s.version = *version;
  if (s.version >= 2 && !s.attributes_verified) {
    throw CorruptCheckpointError("checkpoint " + file.string() + " is damaged: root attribute '" +
                                 kAttributeChecksumsAttr + "' is missing (format version " +
                                 std::to_string(s.version) + " files always carry it)");
  }
  try {
    s.load_tensor_list();
  } catch (const CorruptCheckpointError&) {
    throw;
  } catch (const CheckpointError& e) {
    throw CorruptCheckpointError("checkpoint " + file.string() + " is damaged: " + e.what());
  }
  if (s.version >= 2) s.check_manifest();
}

bool CheckpointReader::attributes_verified() const {
  return impl_->attributes_verified;
}

CheckpointReader::~CheckpointReader() {
  detail::QuietHdf5 quiet;
  impl_->file.reset();
}

const fs::path& CheckpointReader::path() const {
  return impl_->path;
}

int64_t CheckpointReader::format_version() const {
  return impl_->version;
}

Metadata CheckpointReader::metadata() const {
  Metadata m;
  m.step = attr_int("step").value_or(0);
  m.tokens_seen = attr_int("tokens_seen").value_or(0);
  m.config_toml = attr_string("config_toml").value_or("");
  m.tokenizer_hash = attr_string("tokenizer_hash").value_or("");
  m.layout.world_size = attr_int("world_size").value_or(1);
  m.layout.dp = attr_int("dp").value_or(1);
  m.layout.tp = attr_int("tp").value_or(1);
  m.numerics = attr_string("numerics").value_or("");
  return m;
}

std::vector<std::string> CheckpointReader::attr_names() const {
  std::vector<std::string> names;
  H5Aiterate2(
      impl_->file.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->emplace_back(name);
        return 0;
      },
      &names);
  return names;
}

namespace {
// Attribute reads name the file when its structure cannot be read.
template <typename Read>
auto reading_attr(const fs::path& file, const std::string& name, Read read) {
  detail::QuietHdf5 quiet;
  try {
    return read();
  } catch (const CorruptCheckpointError&) {
    throw;
  } catch (const CheckpointError& e) {
    throw CorruptCheckpointError("checkpoint " + file.string() + ", root attribute '" + name + "': " + e.what());
  }
}
}  // namespace

bool CheckpointReader::has_attr(const std::string& name) const {
  return reading_attr(impl_->path, name, [&] { return detail::has_attr(impl_->file.get(), name); });
}
std::optional<std::string> CheckpointReader::attr_string(const std::string& name) const {
  return reading_attr(impl_->path, name, [&] { return detail::read_attr_string(impl_->file.get(), name); });
}
std::optional<int64_t> CheckpointReader::attr_int(const std::string& name) const {
  return reading_attr(impl_->path, name, [&] { return detail::read_attr_int(impl_->file.get(), name); });
}
std::optional<double> CheckpointReader::attr_double(const std::string& name) const {
  return reading_attr(impl_->path, name, [&] { return detail::read_attr_double(impl_->file.get(), name); });
}

const std::vector<TensorInfo>& CheckpointReader::tensors() const {
  return impl_->tensors;
}

bool CheckpointReader::has(const std::string& path) const {
  return impl_->index.count(path) != 0;
}

const TensorInfo& CheckpointReader::info(const std::string& path) const {
  auto it = impl_->index.find(path);
  if (it == impl_->index.end()) throw MismatchError(impl_->where(path) + ": no such dataset");
  return impl_->tensors[it->second];
}

const IoStats& CheckpointReader::load_stats() const {
  return impl_->stats;
}

void CheckpointReader::read_raw(const std::string& path, const Slice& slice, void* out,
                                size_t n_elements, DType dtype, Verify verify) {
  detail::QuietHdf5 quiet;
  const Impl& s = *impl_;
  const auto start = Clock::now();
  const TensorInfo& tensor = info(path);
  if (tensor.dtype != dtype) {
    throw MismatchError(s.where(path) + ": stored as " + dtype_name(tensor.dtype) + ", read as " +
                        dtype_name(dtype));
  }
  check_slice(tensor.shape, slice, s.where(path));
  if (static_cast<int64_t>(n_elements) != slice.numel()) {
    throw std::invalid_argument(s.where(path) + ": output has " + std::to_string(n_elements) +
                                " elements, slice has " + std::to_string(slice.numel()));
  }
  Hid dataset = s.open_dataset(path);
  const bool check = verify == Verify::kTouchedChunks && slice.numel() > 0;
  if (check && !tensor.has_checksum) throw CorruptCheckpointError(s.where(path) + ": has no checksum");
  if (check && slice.is_whole(tensor.shape)) {
    // Whole tensor: read straight into the caller's buffer in blocks of whole chunks, hashing
    // block k on a helper thread while block k+1 is read, so verification hides behind the I/O.
    const ChunkGrid grid = chunk_grid_with(tensor.shape, tensor.rows_per_chunk);
    std::vector<uint64_t> sums(static_cast<size_t>(grid.n_chunks), 0);
    const int64_t row_bytes = grid.row_elems * static_cast<int64_t>(dtype_size(dtype));
    const int64_t block_rows = grid.rows_per_chunk * std::max<int64_t>(1, kReadBlockBytes / std::max<int64_t>(1, row_bytes * grid.rows_per_chunk));
    std::future<void> hashing;
    for (int64_t row = 0; row < grid.rows; row += block_rows) {
      const Slice block = Slice::along(tensor.shape, 0, row, std::min(block_rows, grid.rows - row));
      void* target = static_cast<unsigned char*>(out) + row * row_bytes;
      s.read_box(dataset.get(), tensor, block, target);
      if (hashing.valid()) hashing.get();
      hashing = std::async(std::launch::async, [&tensor, &grid, &sums, block, target, dtype] {
        accumulate_checksums(tensor.shape, grid, block, target, dtype_size(dtype), sums);
      });
    }
    if (hashing.valid()) hashing.get();
    const auto& stored = s.stored_sums.at(path);
    for (int64_t c = 0; c < grid.n_chunks; ++c) {
      if (sums[c] != stored[c]) throw CorruptCheckpointError(s.mismatch(tensor, grid, c));
    }
  } else {
    if (check) {
      // Verify each touched chunk whole, then read just the slice (chunk rows are
      // usually still in the page cache).
      const ChunkGrid grid = chunk_grid_with(tensor.shape, tensor.rows_per_chunk);
      std::vector<unsigned char> buffer;
      int64_t verify_bytes = 0;
      const int64_t first = grid.chunk_of_row(slice.start[0]);
      const int64_t last = grid.chunk_of_row(slice.start[0] + slice.count[0] - 1);
      for (int64_t c = first; c <= last; ++c) {
        const std::string problem = s.check_chunk(dataset.get(), tensor, c, buffer, verify_bytes);
        if (!problem.empty()) throw CorruptCheckpointError(problem);
      }
    }
    s.read_box(dataset.get(), tensor, slice, out);
  }
  impl_->stats.bytes += slice.numel() * static_cast<int64_t>(dtype_size(dtype));
  impl_->stats.seconds += seconds_since(start);
}

VerifyReport CheckpointReader::verify_all() {
  detail::QuietHdf5 quiet;
  const Impl& s = *impl_;
  VerifyReport report;
  std::vector<std::string> problems;
  std::vector<unsigned char> buffer;
  int64_t unit = 0;  // (dataset, chunk) pairs numbered identically on every rank
  for (const TensorInfo& tensor : s.tensors) {
    ++report.datasets;
    if (!tensor.has_checksum) {
      if (s.comm.rank == 0) problems.push_back(s.where(tensor.path) + ": has no checksum");
      continue;
    }
    const auto& stored = s.stored_sums.at(tensor.path);
    uint64_t total = 0;
    for (uint64_t v : stored) total += v;
    const auto whole = [&] {
      Hid dataset = s.open_dataset(tensor.path);
      return detail::read_attr_u64s(dataset.get(), "checksum");
    }();
    if (s.comm.rank == 0 && (!whole || whole->size() != 1 || (*whole)[0] != total)) {
      problems.push_back(s.where(tensor.path) + ": checksum attribute disagrees with checksum_chunks");
    }
    std::optional<Hid> dataset;
    for (int64_t c = 0; c < tensor.n_chunks; ++c, ++unit) {
      ++report.chunks;
      if (unit % s.comm.size != s.comm.rank) continue;
      try {
        if (!dataset) dataset.emplace(s.open_dataset(tensor.path));
        std::string problem = s.check_chunk(dataset->get(), tensor, c, buffer, report.bytes);
        if (problem.empty()) problem = s.non_finite(tensor, c, buffer);
        if (!problem.empty()) problems.push_back(std::move(problem));
      } catch (const CheckpointError& e) {
        problems.push_back(e.what());
      }
    }
  }
  report.problems = detail::gather_to_all(s.comm, problems);
  report.ok = report.problems.empty();
  return report;
}

}  // namespace brt::checkpoint
