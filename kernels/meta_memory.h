// MetaMemory: a Memory that counts allocations and backs none of them, so a whole model can be
// built to learn what it allocates without the bytes (torchtitan builds on PyTorch's meta device
// for the same reason). The planner builds the real layers on it (launch/plan/planner_memory.cpp):
// a new parameter or buffer is then declared in one place, the layer, and the plan follows.
//
// Contract: the pointers it hands out lie outside every mapped address (the non-canonical range
// of 64-bit address spaces), so code that dereferences one faults at once instead of reading
// garbage; copies to it are dropped; reading from it throws. Only constructors that allocate and
// stage initial values may run on it, never a kernel.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "kernels/memory.h"

namespace brt::kernels {

class MetaMemory final : public Memory {
 public:
  std::string name() const override { return "meta (counting, unbacked)"; }
  bool host_accessible() const override { return false; }
  void* allocate(std::size_t bytes, const char* what) override;
  void release(void* p) noexcept override;
  void to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void from_host(void*, const void*, std::size_t) override {}
  void copy(void*, const void*, std::size_t) override {}
  void fill_zero(void*, std::size_t) override {}
  void synchronize() override {}

  // Bytes allocated and not yet released, and the most that were at once.
  int64_t live_bytes() const { return live_; }
  int64_t peak_bytes() const { return peak_; }

 private:
  std::unordered_map<const void*, std::size_t> sizes_;
  uint64_t next_ = uint64_t{1} << 62;  // non-canonical on x86-64 (47/56-bit) and AArch64
  int64_t live_ = 0, peak_ = 0;
};

}  // namespace brt::kernels
