#include "checkpoint/types.h"

#include <cmath>
#include <cstring>
#include <sstream>

namespace brt::checkpoint {

std::string join_path(const std::string& group, const std::string& name) {
  if (name.empty()) return group;
  if (name.front() == '/') return name;
  if (!group.empty() && group.back() == '/') return group + name;
  return group + "/" + name;
}

namespace {
bool under(const std::string& path, const char* group) {
  return path.size() > std::strlen(group) && path.compare(0, std::strlen(group), group) == 0 &&
         path[std::strlen(group)] == '/';
}

template <typename F>
int64_t count_non_finite_as(const void* data, size_t n_bytes) {
  int64_t count = 0;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t at = 0; at + sizeof(F) <= n_bytes; at += sizeof(F)) {
    F v;
    std::memcpy(&v, bytes + at, sizeof(F));
    count += std::isfinite(v) ? 0 : 1;
  }
  return count;
}
}  // namespace

bool holds_float64_bytes(const std::string& path) {
  const std::string carry = ".ssm.carry";
  return under(path, kStateGroup) && path.size() > carry.size() &&
         path.compare(path.size() - carry.size(), carry.size(), carry) == 0;
}

int64_t count_non_finite(const std::string& path, DType dtype, const void* data, size_t n_bytes) {
  if (!under(path, kModelGroup) && !under(path, kOptimGroup) && !under(path, kStateGroup)) return 0;
  if (dtype == DType::kF64 || (dtype == DType::kF32 && holds_float64_bytes(path)))
    return count_non_finite_as<double>(data, n_bytes);
  if (dtype == DType::kF32) return count_non_finite_as<float>(data, n_bytes);
  return 0;
}

size_t dtype_size(DType dtype) {
  return dtype == DType::kF32 ? 4 : 8;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kF64: return "float64";
    case DType::kI64: return "int64";
    case DType::kU64: return "uint64";
  }
  return "?";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t d = 0; d < shape.size(); ++d) out << (d ? ", " : "") << shape[d];
  out << ']';
  return out.str();
}

Slice Slice::whole(const Shape& shape) {
  return Slice{Shape(shape.size(), 0), shape};
}

Slice Slice::along(const Shape& shape, int dim, int64_t offset, int64_t count) {
  if (dim < 0 || dim >= static_cast<int>(shape.size())) {
    throw std::invalid_argument("Slice::along: dim " + std::to_string(dim) + " outside " +
                                shape_string(shape));
  }
  Slice slice = whole(shape);
  slice.start[dim] = offset;
  slice.count[dim] = count;
  return slice;
}

int64_t Slice::numel() const {
  return shape_numel(count);
}

bool Slice::is_whole(const Shape& shape) const {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (start.at(d) != 0 || count.at(d) != shape[d]) return false;
  }
  return start.size() == shape.size() && count.size() == shape.size();
}

void check_slice(const Shape& shape, const Slice& slice, const std::string& what) {
  bool ok = !shape.empty() && slice.start.size() == shape.size() && slice.count.size() == shape.size();
  for (size_t d = 0; ok && d < shape.size(); ++d) {
    ok = slice.start[d] >= 0 && slice.count[d] >= 0 && slice.start[d] + slice.count[d] <= shape[d];
  }
  if (!ok) {
    throw std::invalid_argument(what + ": slice start " + shape_string(slice.start) + " count " +
                                shape_string(slice.count) + " does not fit shape " +
                                shape_string(shape));
  }
}

}  // namespace brt::checkpoint
