// Internal helpers shared by the writer, reader and tools: RAII HDF5 handles, error-stack
// capture (so exceptions carry HDF5's own reason, e.g. errno text), attribute I/O and the small
// MPI agreements the collective protocol needs. Not part of the public API.
#pragma once

#include <hdf5.h>
#include <mpi.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/types.h"

namespace brt::checkpoint::detail {

// Owns one hid_t and closes it with the matching H5?close.
class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer closer) : id_(id), closer_(closer) {}
  Hid(const Hid&) = delete;
  Hid& operator=(const Hid&) = delete;
  Hid(Hid&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = -1; }
  Hid& operator=(Hid&& other) noexcept;
  ~Hid() { reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  herr_t reset();  // closes now; returns the close status
  void release() { id_ = -1; }  // forgets the handle without closing it
 private:
  hid_t id_ = -1;
  Closer closer_ = nullptr;
};

// Turns off HDF5's automatic error printing for its lifetime (we report through exceptions).
class QuietHdf5 {
 public:
  QuietHdf5();
  ~QuietHdf5();
  QuietHdf5(const QuietHdf5&) = delete;
  QuietHdf5& operator=(const QuietHdf5&) = delete;
 private:
  H5E_auto2_t old_func_ = nullptr;
  void* old_data_ = nullptr;
};

// The innermost messages of the current HDF5 error stack, e.g. "unable to open file: file
// write failed: No space left on device (errno 28)". Empty if the stack is empty.
std::string hdf5_reason();


// Communicator facts; works when MPI was never initialised (then: one process, no MPI calls).
struct CommInfo {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  bool mpi = false;  // MPI is initialised and comm is usable
};
CommInfo comm_info(MPI_Comm comm);
bool uses_mpio(const CommInfo& comm, Driver driver);
Hid make_file_access(const CommInfo& comm, Driver driver, size_t alignment);

bool any_rank(const CommInfo& comm, bool local);           // logical OR over ranks
double max_over_ranks(const CommInfo& comm, double local);
void sum_over_ranks(const CommInfo& comm, std::span<uint64_t> values);
int64_t sum_over_ranks(const CommInfo& comm, int64_t local);
void broadcast(const CommInfo& comm, std::string& text, int root);
void barrier(const CommInfo& comm);
std::vector<std::string> gather_to_all(const CommInfo& comm, const std::vector<std::string>& mine);

hid_t file_type(DType dtype);    // little-endian on-disk type
hid_t memory_type(DType dtype);  // native type
std::optional<DType> dtype_of(hid_t type);

void write_attr(hid_t obj, const std::string& name, std::string_view text);
void write_attr(hid_t obj, const std::string& name, int64_t value);
void write_attr(hid_t obj, const std::string& name, double value);
void write_attr(hid_t obj, const std::string& name, std::span<const uint64_t> values);
void write_attr_u64(hid_t obj, const std::string& name, uint64_t value);
// Attribute reads: nullopt when the attribute is absent (or of another type); a CheckpointError
// with HDF5's reason when the object header cannot be read (damage), never a silent "absent".
bool has_attr(hid_t obj, const std::string& name);
std::optional<std::string> read_attr_string(hid_t obj, const std::string& name);
std::optional<int64_t> read_attr_int(hid_t obj, const std::string& name);
std::optional<double> read_attr_double(hid_t obj, const std::string& name);
std::optional<std::vector<uint64_t>> read_attr_u64s(hid_t obj, const std::string& name);

// Every attribute of `obj` as the value bytes its checksum covers (checksum.h,
// attribute_hash): kind 's' string (UTF-8 bytes), 'i' int64, 'd' float64, 'u' uint64 (scalar
// or array), '?' anything else. Sorted by name. Throws CheckpointError when they cannot be read.
struct AttributeBytes {
  std::string name;
  char kind = '?';
  std::vector<unsigned char> bytes;
};
std::vector<AttributeBytes> read_all_attributes(hid_t obj);

// All dataset paths in the file, sorted (the same order on every rank).
std::vector<std::string> list_datasets(hid_t file);

// Selects `slice` in a dataspace of `shape` (or nothing when slice is null).
Hid select_space(const Shape& shape, const Slice* slice);
Hid memory_space(const Slice* slice);

}  // namespace brt::checkpoint::detail
