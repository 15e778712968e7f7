// Grow-only scratch memory owned by a CpuBackend. Kernels must not allocate in steady state
// (backend.h), so every kernel that needs scratch asks the workspace for room BEFORE it opens
// an OpenMP parallel region; the buffers grow on first use and are reused afterwards.
// A CpuBackend (and its workspace) serves one calling thread at a time and must not be
// called from inside an OpenMP parallel region (thread slots are indexed by
// omp_get_thread_num()).
#pragma once

#include <cstddef>
#include <vector>

namespace brt::kernels::cpu {

template <typename T>
class Workspace {
 public:
  // Private scratch of one OpenMP thread: `values` in T, `sums` in double (accumulators).
  struct ThreadSlot {
    std::vector<T> values;
    std::vector<double> sums;
  };

  // Makes sure `threads` slots exist with at least the requested sizes. Serial code only.
  void prepare_threads(int threads, std::size_t values, std::size_t sums) {
    if (slots_.size() < static_cast<std::size_t>(threads)) slots_.resize(threads);
    for (ThreadSlot& slot : slots_) {
      if (slot.values.size() < values) slot.values.resize(values);
      if (slot.sums.size() < sums) slot.sums.resize(sums);
    }
  }
  ThreadSlot& thread_slot(int thread) { return slots_[thread]; }

  // Shared buffers (tables and per-task partial sums written at disjoint offsets).
  T* shared_values(std::size_t n) { return grow(shared_values_, n); }
  double* shared_sums(std::size_t n) { return grow(shared_sums_, n); }
  int* shared_ints(std::size_t n) { return grow(shared_ints_, n); }

 private:
  template <typename U>
  static U* grow(std::vector<U>& buffer, std::size_t n) {
    if (buffer.size() < n) buffer.resize(n);
    return buffer.data();
  }

  std::vector<ThreadSlot> slots_;
  std::vector<T> shared_values_;
  std::vector<double> shared_sums_;
  std::vector<int> shared_ints_;
};

}  // namespace brt::kernels::cpu
