// Activations a bf16 backend keeps in bf16 for the products that read them
// (Backend::linear_relu_forward's y_for_products: the MLP's hidden m, model.md §4): which
// buffers hold bf16 values of which shape, from the call that wrote them until the model's end
// (weights_fixed(nullptr, 0): its buffers are freed, and their addresses may serve another's).
// Host-only, and shared by the CUDA backend and the counting backend, so that the planner counts
// what the device does.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

namespace brt::kernels::cuda {

class Bf16Activations {
 public:
  // p now holds bf16 values, a dense [rows, cols] (in the first half of its fp32 bytes).
  void hold(const void* p, int64_t rows, int64_t cols) { entries_[p] = {rows, cols, generation_}; }
  // p holds what its type says again (a fallback wrote it in fp32).
  void release(const void* p) {
    const auto it = entries_.find(p);
    if (it != entries_.end()) it->second.generation = 0;
  }
  // Backend::weights_fixed(nullptr, 0): every buffer is released (their contract ends there).
  void release_all() { ++generation_; }
  // Whether operand p, [rows, cols] with row stride ld, is held in bf16. A held buffer read with
  // another shape or stride, or from inside (its fp32 extent, rows·cols floats), is a misuse of
  // the contract and throws (its bytes are not fp32).
  bool holds(const void* p, int64_t rows, int64_t cols, int64_t ld) const {
    auto it = entries_.upper_bound(p);
    if (it == entries_.begin()) return false;
    --it;  // the held buffer at or below p
    const Entry& e = it->second;
    if (e.generation != generation_) return false;
    if (it->first != p) {
      const auto offset = static_cast<const char*>(p) - static_cast<const char*>(it->first);
      if (offset < e.rows * e.cols * 4) throw std::logic_error("a product reads inside " + describe(e));
      return false;
    }
    if (e.rows != rows || e.cols != cols || ld != cols)
      throw std::logic_error("a product reads " + describe(e) + " as [" + std::to_string(rows) + ", " +
                             std::to_string(cols) + "] with row stride " + std::to_string(ld));
    return true;
  }

 private:
  struct Entry {
    int64_t rows = 0, cols = 0;
    uint64_t generation = 0;  // valid while equal to generation_
  };
  // For the errors only: holds() runs on every product's operands and builds no string there.
  static std::string describe(const Entry& e) {
    return "an activation kept in bf16 [" + std::to_string(e.rows) + ", " + std::to_string(e.cols) +
           "] (Backend::linear_relu_forward's y_for_products)";
  }
  // Entries are never erased, only marked: after a step's first forward the step loop inserts
  // nothing (no heap allocation in it).
  std::map<const void*, Entry> entries_;
  uint64_t generation_ = 1;
};

}  // namespace brt::kernels::cuda
