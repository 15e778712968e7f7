#include "parallel/rank_order_reduce.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace brt::parallel {
namespace {

// Elements reduced per tile: the running results stay in L1 while each source streams past,
// and the inner loops vectorise (the order per element is unchanged: source by source).
constexpr int64_t kReduceTile = 1024;

template <typename T>
T max_keeping_nan(T acc, T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return (x > acc || std::isnan(x)) ? x : acc;
  } else {
    return x > acc ? x : acc;
  }
}

template <typename T>
void reduce_tiles(ReduceOp op, const std::vector<const std::byte*>& sources, std::byte* out_bytes,
                  int64_t n) {
  T* out = reinterpret_cast<T*>(out_bytes);
  T acc[kReduceTile];
  for (int64_t start = 0; start < n; start += kReduceTile) {
    const int64_t len = std::min(kReduceTile, n - start);
    const T* first = reinterpret_cast<const T*>(sources[0]) + start;
    std::copy(first, first + len, acc);
    for (size_t s = 1; s < sources.size(); ++s) {
      const T* src = reinterpret_cast<const T*>(sources[s]) + start;
      if (op == ReduceOp::kSum) {
        for (int64_t i = 0; i < len; ++i) acc[i] = acc[i] + src[i];
      } else {
        for (int64_t i = 0; i < len; ++i) acc[i] = max_keeping_nan(acc[i], src[i]);
      }
    }
    std::copy(acc, acc + len, out + start);
  }
}

}  // namespace

void reduce_in_rank_order(DataType type, ReduceOp op, const std::vector<const std::byte*>& sources,
                          std::byte* out, int64_t n) {
  if (sources.empty() || n <= 0) return;
  switch (type) {
    case DataType::kFloat32: reduce_tiles<float>(op, sources, out, n); break;
    case DataType::kFloat64: reduce_tiles<double>(op, sources, out, n); break;
    case DataType::kInt64: reduce_tiles<int64_t>(op, sources, out, n); break;
  }
}

}  // namespace brt::parallel
