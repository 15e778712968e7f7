// Where a backend's buffers live (docs/gpu.md, "Device residency"). Core code allocates every
// parameter, gradient, activation and state buffer through the backend's Memory at setup
// (never in the step loop) and only ever passes the pointers to kernels; anything the host
// must read or write (initial values, checkpoints, losses for logging, tokens) goes through
// to_host / from_host explicitly. On the CPU backend the memory is ordinary host memory and
// the copies are memcpy; on the CUDA backend it is device memory and the copies are ordered
// with the backend's kernels on its stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace brt::kernels {

// One copy of a batch to the host (Memory::to_host_batch).
struct HostCopy {
  void* host_dst;
  const void* src;
  std::size_t bytes;
};

class Memory {
 public:
  virtual ~Memory() = default;
  // "host" or "cuda:0": for error messages and logs.
  virtual std::string name() const = 0;
  // True when pointers from allocate() may be dereferenced by host code.
  virtual bool host_accessible() const = 0;
  // `bytes` of zeroed memory, aligned to at least 64 bytes; throws std::runtime_error naming
  // `what` and the size when it cannot. Setup only: step loops allocate nothing.
  virtual void* allocate(std::size_t bytes, const char* what) = 0;
  virtual void release(void* p) noexcept = 0;
  // Copies that are ordered after every kernel already issued on the backend; to_host waits
  // until the bytes have arrived.
  virtual void to_host(void* host_dst, const void* src, std::size_t bytes) = 0;
  // Many copies to the host at once (a checkpoint's snapshot), all arrived on return. The CUDA
  // memory runs them through one pinned staging buffer with asynchronous copies and one wait
  // per buffer-full, instead of a pageable copy and a wait per tensor.
  virtual void to_host_batch(const std::vector<HostCopy>& copies) {
    for (const HostCopy& c : copies)
      if (c.bytes > 0) to_host(c.host_dst, c.src, c.bytes);
  }
  virtual void from_host(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void fill_zero(void* dst, std::size_t bytes) = 0;
  // Waits until all issued work has finished (a no-op for host memory).
  virtual void synchronize() = 0;
};

// The process's host memory (stateless, so a shared instance holds no mutable state).
Memory& host_memory();

// to_host_batch through a staging buffer of `capacity` bytes: the copies are enqueued in order
// into the next free bytes of `staging` (a copy may be split across buffer-fulls); when the
// buffer is full, and at the end, wait() and the staged bytes are moved to their destinations.
// Returns how many times it waited.
int copy_through_staging(const std::vector<HostCopy>& copies, char* staging, std::size_t capacity,
                         const std::function<void(void* staging_dst, const void* src,
                                                  std::size_t bytes)>& enqueue,
                         const std::function<void()>& wait);

// An owning, move-only array of n elements of T in a Memory. No element access from the
// host: read and write through to_host / from_host, or pass data() to kernels.
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Memory& memory, std::size_t n, const char* what = "buffer") { allocate(memory, n, what); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept { swap(other); }
  Buffer& operator=(Buffer&& other) noexcept {
    Buffer tmp(std::move(other));
    swap(tmp);
    return *this;
  }
  ~Buffer() { reset(); }

  // Replaces the contents with n zeroed elements in `memory`.
  void allocate(Memory& memory, std::size_t n, const char* what = "buffer") {
    reset();
    memory_ = &memory;
    if (n > 0) data_ = static_cast<T*>(memory.allocate(n * sizeof(T), what));
    size_ = n;
  }
  void reset() noexcept {
    if (data_ != nullptr) memory_->release(data_);
    data_ = nullptr;
    size_ = 0;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t bytes() const { return int64_t(size_ * sizeof(T)); }
  Memory* memory() const { return memory_; }

  std::vector<T> to_host() const {
    std::vector<T> out(size_);
    if (size_ > 0) memory_->to_host(out.data(), data_, size_ * sizeof(T));
    return out;
  }
  // (pointer + count rather than std::span: this header is also compiled as CUDA C++17.)
  void from_host(const T* values, std::size_t n) {
    if (n != size_)
      throw std::runtime_error("Buffer::from_host: " + std::to_string(n) +
                               " values for a buffer of " + std::to_string(size_));
    if (size_ > 0) memory_->from_host(data_, values, size_ * sizeof(T));
  }
  void from_host(const std::vector<T>& values) { from_host(values.data(), values.size()); }

 private:
  void swap(Buffer& other) noexcept {
    std::swap(memory_, other.memory_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }
  Memory* memory_ = nullptr;
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// Copies n elements at `src` (in `memory`) into a new host vector.
template <typename T>
std::vector<T> copy_to_host(Memory& memory, const T* src, std::size_t n) {
  std::vector<T> out(n);
  if (n > 0) memory.to_host(out.data(), src, n * sizeof(T));
  return out;
}

}  // namespace brt::kernels
