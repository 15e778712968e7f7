#include "checkpoint/h5util.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace brt::checkpoint::detail {

Hid& Hid::operator=(Hid&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.id_;
    closer_ = other.closer_;
    other.id_ = -1;
  }
  return *this;
}

herr_t Hid::reset() {
  herr_t status = 0;
  if (id_ >= 0 && closer_ != nullptr) status = closer_(id_);
  id_ = -1;
  return status;
}

}  // namespace brt::checkpoint::detail

namespace brt::checkpoint {
void silence_hdf5_diagnostics() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}
}  // namespace brt::checkpoint

namespace brt::checkpoint::detail {

QuietHdf5::QuietHdf5() {
  H5Eget_auto2(H5E_DEFAULT, &old_func_, &old_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietHdf5::~QuietHdf5() {
  H5Eset_auto2(H5E_DEFAULT, old_func_, old_data_);
}

namespace {
// The sec2 driver's messages carry "time = ..., filename = '...', file descriptor = 19, errno =
// 28, error message = 'No space left on device', ..."; keep what a person needs: the message and
// errno (the file is named by the caller).
std::string without_io_details(const std::string& message) {
  const std::string key = "error message = '";
  const size_t at = message.find(key);
  if (at == std::string::npos) return message;
  const size_t end = message.find('\'', at + key.size());
  std::string text = message.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
  const size_t errno_at = message.find("errno = ");
  if (errno_at != std::string::npos) {
    const size_t digits = errno_at + 8;
    size_t stop = digits;
    while (stop < message.size() && message[stop] >= '0' && message[stop] <= '9') ++stop;
    text += " (errno " + message.substr(digits, stop - digits) + ")";
  }
  const size_t colon = message.find(": time = ");
  const std::string head = message.substr(0, colon == std::string::npos ? 0 : colon);
  return head.empty() ? text : head + ": " + text;
}

herr_t collect_error(unsigned, const H5E_error2_t* error, void* out) {
  auto* messages = static_cast<std::vector<std::string>*>(out);
  if (error->desc != nullptr && error->desc[0] != '\0') {
    std::string text = error->desc;
    std::replace(text.begin(), text.end(), '\n', ' ');  // HDF5 embeds newlines in some messages
    messages->push_back(std::move(text));
  }
  return 0;
}
}  // namespace

std::string hdf5_reason() {
  std::vector<std::string> messages;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &messages);
  H5Eclear2(H5E_DEFAULT);
  // Downward walk: outermost first. The innermost few carry the real cause (errno text,
  // "truncated file", ...).
  std::string reason;
  const size_t first = messages.size() > 3 ? messages.size() - 3 : 0;
  for (size_t k = first; k < messages.size(); ++k) {
    std::string message = without_io_details(messages[k]);
    if (reason.find(message) != std::string::npos) continue;  // the layers repeat each other
    if (!reason.empty()) reason += "; ";
    reason += message;
  }
  return reason;
}

CommInfo comm_info(MPI_Comm comm) {
  CommInfo info;
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized || comm == MPI_COMM_NULL) return info;
  info.comm = comm;
  info.mpi = true;
  MPI_Comm_rank(comm, &info.rank);
  MPI_Comm_size(comm, &info.size);
  return info;
}

bool uses_mpio(const CommInfo& comm, Driver driver) {
  if (!comm.mpi) return false;
  if (driver == Driver::kMpiIo) return true;
  if (driver == Driver::kPosix) {
    if (comm.size > 1) throw std::invalid_argument("checkpoint: the POSIX driver needs one process");
    return false;
  }
  return comm.size > 1;
}

Hid make_file_access(const CommInfo& comm, Driver driver, size_t alignment) {
  Hid fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (uses_mpio(comm, driver)) {
    H5Pset_fapl_mpio(fapl.get(), comm.comm, MPI_INFO_NULL);
    H5Pset_coll_metadata_write(fapl.get(), true);
  } else {
    H5Pset_fapl_sec2(fapl.get());
  }
  // Large datasets start on aligned offsets (fast direct writes); small ones pack tightly.
  if (alignment > 1) H5Pset_alignment(fapl.get(), alignment, alignment);
  H5Pset_meta_block_size(fapl.get(), 1 << 20);
  // 1.8 object headers: dense attribute storage (no 64 KiB attribute cap) and h5py-readable.
  H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18);
  return fapl;
}

bool any_rank(const CommInfo& comm, bool local) {
  if (!comm.mpi || comm.size == 1) return local;
  int in = local ? 1 : 0, out = 0;
  MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, comm.comm);
  return out != 0;
}

double max_over_ranks(const CommInfo& comm, double local) {
  if (!comm.mpi || comm.size == 1) return local;
  double out = 0;
  MPI_Allreduce(&local, &out, 1, MPI_DOUBLE, MPI_MAX, comm.comm);
  return out;
}

void sum_over_ranks(const CommInfo& comm, std::span<uint64_t> values) {
  if (!comm.mpi || comm.size == 1 || values.empty()) return;
  // Unsigned addition wraps mod 2^64, exactly what the additive checksum needs.
  MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_UINT64_T, MPI_SUM,
                comm.comm);
}

int64_t sum_over_ranks(const CommInfo& comm, int64_t local) {
  if (!comm.mpi || comm.size == 1) return local;
  int64_t out = 0;
  MPI_Allreduce(&local, &out, 1, MPI_INT64_T, MPI_SUM, comm.comm);
  return out;
}

void broadcast(const CommInfo& comm, std::string& text, int root) {
  if (!comm.mpi || comm.size == 1) return;
  int64_t length = static_cast<int64_t>(text.size());
  MPI_Bcast(&length, 1, MPI_INT64_T, root, comm.comm);
  text.resize(static_cast<size_t>(length));
  if (length > 0) MPI_Bcast(text.data(), static_cast<int>(length), MPI_CHAR, root, comm.comm);
}

void barrier(const CommInfo& comm) {
  if (comm.mpi && comm.size > 1) MPI_Barrier(comm.comm);
}

std::vector<std::string> gather_to_all(const CommInfo& comm, const std::vector<std::string>& mine) {
  if (!comm.mpi || comm.size == 1) return mine;
  std::string packed;
  for (const auto& s : mine) packed += s + '\n';
  std::vector<std::string> all;
  for (int root = 0; root < comm.size; ++root) {
    std::string text = comm.rank == root ? packed : std::string();
    broadcast(comm, text, root);
    size_t begin = 0;
    for (size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
      all.push_back(text.substr(begin, end - begin));
    }
  }
  return all;
}

hid_t file_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return H5T_IEEE_F32LE;
    case DType::kF64: return H5T_IEEE_F64LE;
    case DType::kI64: return H5T_STD_I64LE;
    case DType::kU64: return H5T_STD_U64LE;
  }
  return H5T_IEEE_F32LE;
}

hid_t memory_type(DType dtype) {
  switch (dtype) {
    case DType::kF32: return H5T_NATIVE_FLOAT;
    case DType::kF64: return H5T_NATIVE_DOUBLE;
    case DType::kI64: return H5T_NATIVE_INT64;
    case DType::kU64: return H5T_NATIVE_UINT64;
  }
  return H5T_NATIVE_FLOAT;
}

std::optional<DType> dtype_of(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (H5Tget_order(type) != H5T_ORDER_LE) return std::nullopt;
  if (cls == H5T_FLOAT && size == 4) return DType::kF32;
  if (cls == H5T_FLOAT && size == 8) return DType::kF64;
  if (cls == H5T_INTEGER && size == 8) {
    return H5Tget_sign(type) == H5T_SGN_NONE ? DType::kU64 : DType::kI64;
  }
  return std::nullopt;
}

namespace {
void replace_attr(hid_t obj, const std::string& name, hid_t file_t, hid_t space, hid_t mem_t,
                  const void* data) {
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  Hid attr(H5Acreate2(obj, name.c_str(), file_t, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  // A null-dataspace attribute (empty array) has nothing to write.
  if (!attr.valid() || (data != nullptr && H5Awrite(attr.get(), mem_t, data) < 0)) {
    throw CheckpointError("cannot write attribute '" + name + "': " + hdf5_reason());
  }
}
}  // namespace

void write_attr(hid_t obj, const std::string& name, std::string_view text) {
  Hid type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  Hid space(H5Screate(H5S_SCALAR), H5Sclose);
  const std::string copy(text);
  const char* pointer = copy.c_str();
  replace_attr(obj, name, type.get(), space.get(), type.get(), &pointer);
}

void write_attr(hid_t obj, const std::string& name, int64_t value) {
  Hid space(H5Screate(H5S_SCALAR), H5Sclose);
  replace_attr(obj, name, H5T_STD_I64LE, space.get(), H5T_NATIVE_INT64, &value);
}

void write_attr(hid_t obj, const std::string& name, double value) {
  Hid space(H5Screate(H5S_SCALAR), H5Sclose);
  replace_attr(obj, name, H5T_IEEE_F64LE, space.get(), H5T_NATIVE_DOUBLE, &value);
}

void write_attr(hid_t obj, const std::string& name, std::span<const uint64_t> values) {
  const hsize_t n = values.size();
  Hid space(n == 0 ? H5Screate(H5S_NULL) : H5Screate_simple(1, &n, nullptr), H5Sclose);
  replace_attr(obj, name, H5T_STD_U64LE, space.get(), H5T_NATIVE_UINT64, n == 0 ? nullptr : values.data());
}

void write_attr_u64(hid_t obj, const std::string& name, uint64_t value) {
  Hid space(H5Screate(H5S_SCALAR), H5Sclose);
  replace_attr(obj, name, H5T_STD_U64LE, space.get(), H5T_NATIVE_UINT64, &value);
}

bool has_attr(hid_t obj, const std::string& name) {
  const htri_t exists = H5Aexists(obj, name.c_str());
  if (exists < 0) {
    throw CheckpointError("cannot read attribute '" + name + "' (object header damaged?): " + hdf5_reason());
  }
  return exists > 0;
}

namespace {
Hid open_attr(hid_t obj, const std::string& name) {
  if (!has_attr(obj, name)) return Hid();
  Hid attr(H5Aopen(obj, name.c_str(), H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) throw CheckpointError("cannot open attribute '" + name + "': " + hdf5_reason());
  return attr;
}

[[noreturn]] void unreadable(const std::string& name) {
  throw CheckpointError("cannot read attribute '" + name + "': " + hdf5_reason());
}
}  // namespace

std::optional<std::string> read_attr_string(hid_t obj, const std::string& name) {
  Hid attr = open_attr(obj, name);
  if (!attr.valid()) return std::nullopt;
  Hid type(H5Aget_type(attr.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING) return std::nullopt;
  if (H5Tis_variable_str(type.get()) > 0) {
    Hid mem(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    char* text = nullptr;
    if (H5Aread(attr.get(), mem.get(), &text) < 0) unreadable(name);
    std::string result = text ? text : "";
    Hid space(H5Aget_space(attr.get()), H5Sclose);
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, &text);
    return result;
  }
  std::string buffer(H5Tget_size(type.get()), '\0');
  if (H5Aread(attr.get(), type.get(), buffer.data()) < 0) unreadable(name);
  buffer.resize(std::strlen(buffer.c_str()));
  return buffer;
}

std::optional<int64_t> read_attr_int(hid_t obj, const std::string& name) {
  Hid attr = open_attr(obj, name);
  if (!attr.valid()) return std::nullopt;
  Hid type(H5Aget_type(attr.get()), H5Tclose);
  int64_t value = 0;
  if (H5Tget_class(type.get()) != H5T_INTEGER) return std::nullopt;
  if (H5Aread(attr.get(), H5T_NATIVE_INT64, &value) < 0) unreadable(name);
  return value;
}

std::optional<double> read_attr_double(hid_t obj, const std::string& name) {
  Hid attr = open_attr(obj, name);
  if (!attr.valid()) return std::nullopt;
  Hid type(H5Aget_type(attr.get()), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.get());
  double value = 0;
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) return std::nullopt;
  if (H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &value) < 0) unreadable(name);
  return value;
}

std::optional<std::vector<uint64_t>> read_attr_u64s(hid_t obj, const std::string& name) {
  Hid attr = open_attr(obj, name);
  if (!attr.valid()) return std::nullopt;
  Hid space(H5Aget_space(attr.get()), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  std::vector<uint64_t> values(n > 0 ? static_cast<size_t>(n) : 0);
  if (!values.empty() && H5Aread(attr.get(), H5T_NATIVE_UINT64, values.data()) < 0) unreadable(name);
  return values;
}

namespace {
template <typename V>
void append_bytes(std::vector<unsigned char>& out, const V* values, size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(values);
  out.insert(out.end(), p, p + n * sizeof(V));
}

AttributeBytes attribute_bytes(hid_t obj, const std::string& name) {
  AttributeBytes a;
  a.name = name;
  Hid attr = open_attr(obj, name);
  if (!attr.valid()) unreadable(name);
  Hid type(H5Aget_type(attr.get()), H5Tclose);
  Hid space(H5Aget_space(attr.get()), H5Sclose);
  if (!type.valid() || !space.valid()) unreadable(name);
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls == H5T_STRING) {
    a.kind = 's';
    const auto text = read_attr_string(obj, name);
    if (!text) unreadable(name);
    a.bytes.assign(text->begin(), text->end());
    return a;
  }
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0) unreadable(name);
  if (cls == H5T_INTEGER && H5Tget_size(type.get()) == 8) {
    const bool is_unsigned = H5Tget_sign(type.get()) == H5T_SGN_NONE;
    a.kind = is_unsigned ? 'u' : 'i';
    std::vector<uint64_t> values(static_cast<size_t>(n));
    if (n > 0 && H5Aread(attr.get(), is_unsigned ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64, values.data()) < 0)
      unreadable(name);
    append_bytes(a.bytes, values.data(), values.size());
  } else if (cls == H5T_FLOAT && H5Tget_size(type.get()) == 8) {
    a.kind = 'd';
    std::vector<double> values(static_cast<size_t>(n));
    if (n > 0 && H5Aread(attr.get(), H5T_NATIVE_DOUBLE, values.data()) < 0) unreadable(name);
    append_bytes(a.bytes, values.data(), values.size());
  }
  return a;
}
}  // namespace

std::vector<AttributeBytes> read_all_attributes(hid_t obj) {
  std::vector<std::string> names;
  const herr_t status = H5Aiterate2(
      obj, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* name, const H5A_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->emplace_back(name);
        return 0;
      },
      &names);
  if (status < 0) throw CheckpointError("cannot list attributes (object header damaged?): " + hdf5_reason());
  std::sort(names.begin(), names.end());
  std::vector<AttributeBytes> out;
  for (const auto& name : names) out.push_back(attribute_bytes(obj, name));
  return out;
}

namespace {
herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* out) {
  if (info->type == H5O_TYPE_DATASET) {
    static_cast<std::vector<std::string>*>(out)->push_back(std::string("/") + name);
  }
  return 0;
}
}  // namespace

std::vector<std::string> list_datasets(hid_t file) {
  std::vector<std::string> paths;
  if (H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &paths, H5O_INFO_BASIC) < 0) {
    throw CorruptCheckpointError("cannot list datasets: " + hdf5_reason());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

Hid select_space(const Shape& shape, const Slice* slice) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Hid space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  if (slice == nullptr) {
    H5Sselect_none(space.get());
  } else if (!slice->is_whole(shape)) {
    std::vector<hsize_t> start(slice->start.begin(), slice->start.end());
    std::vector<hsize_t> count(slice->count.begin(), slice->count.end());
    H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  }
  return space;
}

Hid memory_space(const Slice* slice) {
  if (slice == nullptr) {
    const hsize_t one = 1;
    Hid space(H5Screate_simple(1, &one, nullptr), H5Sclose);
    H5Sselect_none(space.get());
    return space;
  }
  std::vector<hsize_t> count(slice->count.begin(), slice->count.end());
  return Hid(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), H5Sclose);
}

}  // namespace brt::checkpoint::detail
