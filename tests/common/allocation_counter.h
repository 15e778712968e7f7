// Counts heap allocations made through operator new, for the "no allocation in the step loop"
// tests. It replaces the global operator new/delete, so include it in exactly one source file
// of a test program.
#pragma once

#include <atomic>
#include <cstdlib>
#include <new>

namespace brt::testing {
inline std::atomic<long>& heap_allocations() {
  static std::atomic<long> count{0};
  return count;
}
}  // namespace brt::testing

// The replacement pair is matched (malloc/free); GCC cannot see that across the replaceable
// operators.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  brt::testing::heap_allocations().fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
