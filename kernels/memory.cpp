#include "kernels/memory.h"

#include <cstdlib>
#include <cstring>

namespace brt::kernels {
namespace {

class HostMemory final : public Memory {
 public:
  std::string name() const override { return "host"; }
  bool host_accessible() const override { return true; }
  void* allocate(std::size_t bytes, const char* what) override {
    constexpr std::size_t kAlign = 64;
    const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, rounded);
    if (p == nullptr)
      throw std::runtime_error(std::string("out of host memory allocating ") + what + " (" +
                               std::to_string(bytes) + " bytes)");
    std::memset(p, 0, rounded);  // touches every page now, not in the first step
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  void to_host(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void from_host(void* dst, const void* src, std::size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    std::memmove(dst, src, bytes);
  }
  void fill_zero(void* dst, std::size_t bytes) override { std::memset(dst, 0, bytes); }
  void synchronize() override {}
};

}  // namespace

Memory& host_memory() {
  static HostMemory memory;  // stateless
  return memory;
}

}  // namespace brt::kernels
