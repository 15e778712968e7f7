// Up-front device memory (docs/gpu.md). A caller plans every buffer it needs (ArenaPlan),
// makes ONE DeviceArena of the planned size (one cudaMalloc), and takes its buffers from it;
// kernels never allocate. reset() hands the whole arena out again (e.g. per step scratch).
// Needs no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace brt::kernels::cuda {

// Every buffer starts on this boundary (covers float4 / bf16x8 vector accesses and cuBLAS).
constexpr std::size_t kArenaAlignment = 256;

inline std::size_t align_up(std::size_t bytes, std::size_t alignment = kArenaAlignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

// Offsets of named buffers in an arena that does not exist yet.
class ArenaPlan {
 public:
  // Reserves `bytes` (aligned) and returns its offset from the arena's start.
  std::size_t add(const std::string& name, std::size_t bytes);
  template <typename T>
  std::size_t add_array(const std::string& name, std::size_t count) {
    return add(name, count * sizeof(T));
  }
  std::size_t total_bytes() const { return total_; }
  // "name: bytes" per line, for logs and error messages.
  std::string describe() const;

 private:
  struct Entry {
    std::string name;
    std::size_t offset;
    std::size_t bytes;
  };
  std::vector<Entry> entries_;
  std::size_t total_ = 0;
};

class DeviceArena {
 public:
  DeviceArena() = default;
  // Allocates `bytes` on the current CUDA device; throws std::runtime_error naming `label`
  // and the size when the device cannot provide it.
  DeviceArena(std::size_t bytes, std::string label);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  DeviceArena(DeviceArena&& other) noexcept;
  DeviceArena& operator=(DeviceArena&& other) noexcept;

  // The next `bytes` (aligned); throws std::runtime_error naming the arena, `what`, the bytes
  // asked for and the bytes left when it does not fit.
  void* allocate(std::size_t bytes, const char* what);
  template <typename T>
  T* allocate_array(std::size_t count, const char* what) {
    return static_cast<T*>(allocate(count * sizeof(T), what));
  }
  // The buffer at a planned offset (ArenaPlan::add); bounds-checked.
  void* at(std::size_t offset, std::size_t bytes) const;
  void reset() { used_ = 0; }

  std::size_t capacity() const { return capacity_; }
  std::size_t used() const { return used_; }
  void* base() const { return base_; }

 private:
  void release() noexcept;
  void* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  std::string label_;
};

}  // namespace brt::kernels::cuda
