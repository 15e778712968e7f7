#include "kernels/meta_memory.h"

#include <stdexcept>
#include <string>

namespace brt::kernels {

void* MetaMemory::allocate(std::size_t bytes, const char* /*what*/) {
  void* p = reinterpret_cast<void*>(next_);
  next_ += (uint64_t(bytes) + 63) / 64 * 64 + 64;  // 64-byte aligned, distinct even when empty
  sizes_[p] = bytes;
  live_ += int64_t(bytes);
  if (live_ > peak_) peak_ = live_;
  return p;
}

void MetaMemory::release(void* p) noexcept {
  const auto it = sizes_.find(p);
  if (it == sizes_.end()) return;
  live_ -= int64_t(it->second);
  sizes_.erase(it);
}

void MetaMemory::to_host(void*, const void*, std::size_t bytes) {
  throw std::logic_error("MetaMemory::to_host of " + std::to_string(bytes) +
                         " bytes: meta memory holds no values (it only counts allocations)");
}

}  // namespace brt::kernels
