#include "kernels/memory.h"

#include <algorithm>
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

int copy_through_staging(const std::vector<HostCopy>& copies, char* staging, std::size_t capacity,
                         const std::function<void(void*, const void*, std::size_t)>& enqueue,
                         const std::function<void()>& wait) {
  if (capacity == 0) throw std::invalid_argument("copy_through_staging: a staging buffer of 0 bytes");
  struct Staged {
    char* host_dst;
    std::size_t offset, bytes;
  };
  std::vector<Staged> staged;
  std::size_t used = 0;
  int waits = 0;
  const auto flush = [&] {
    if (staged.empty()) return;
    wait();
    ++waits;
    for (const Staged& s : staged) std::memcpy(s.host_dst, staging + s.offset, s.bytes);
    staged.clear();
    used = 0;
  };
  for (const HostCopy& c : copies) {
    for (std::size_t done = 0; done < c.bytes;) {
      if (used == capacity) flush();
      const std::size_t piece = std::min(c.bytes - done, capacity - used);
      enqueue(staging + used, static_cast<const char*>(c.src) + done, piece);
      staged.push_back({static_cast<char*>(c.host_dst) + done, used, piece});
      used += piece;
      done += piece;
    }
  }
  flush();
  return waits;
}

}  // namespace brt::kernels
