#include "kernels/cuda/device/device_arena.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace brt::kernels::cuda {

std::size_t ArenaPlan::add(const std::string& name, std::size_t bytes) {
  const std::size_t offset = total_;
  entries_.push_back({name, offset, bytes});
  total_ += align_up(bytes);
  return offset;
}

std::string ArenaPlan::describe() const {
  std::string text;
  for (const auto& e : entries_) {
    text += e.name + ": " + std::to_string(e.bytes) + " bytes at " + std::to_string(e.offset) + "\n";
  }
  return text;
}

DeviceArena::DeviceArena(std::size_t bytes, std::string label)
    : capacity_(align_up(bytes)), label_(std::move(label)) {
  if (capacity_ == 0) return;
  const cudaError_t status = cudaMalloc(&base_, capacity_);
  if (status != cudaSuccess) {
    base_ = nullptr;
    throw std::runtime_error("kernels/cuda DeviceArena '" + label_ + "': cudaMalloc of " +
                             std::to_string(capacity_) + " bytes failed: " +
                             cudaGetErrorString(status));
  }
}

DeviceArena::~DeviceArena() { release(); }

DeviceArena::DeviceArena(DeviceArena&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      capacity_(std::exchange(other.capacity_, 0)),
      used_(std::exchange(other.used_, 0)),
      label_(std::move(other.label_)) {}

DeviceArena& DeviceArena::operator=(DeviceArena&& other) noexcept {
  if (this != &other) {
    release();
    base_ = std::exchange(other.base_, nullptr);
    capacity_ = std::exchange(other.capacity_, 0);
    used_ = std::exchange(other.used_, 0);
    label_ = std::move(other.label_);
  }
  return *this;
}

void DeviceArena::release() noexcept {
  if (base_ != nullptr) cudaFree(base_);  // no throw from a destructor; errors are sticky
  base_ = nullptr;
}

void* DeviceArena::allocate(std::size_t bytes, const char* what) {
  const std::size_t need = align_up(bytes);
  if (need > capacity_ - used_) {
    throw std::runtime_error("kernels/cuda DeviceArena '" + label_ + "': " + what + " needs " +
                             std::to_string(need) + " bytes but only " +
                             std::to_string(capacity_ - used_) + " of " +
                             std::to_string(capacity_) + " are left");
  }
  void* p = static_cast<char*>(base_) + used_;
  used_ += need;
  return p;
}

void* DeviceArena::at(std::size_t offset, std::size_t bytes) const {
  if (offset > capacity_ || bytes > capacity_ - offset) {
    throw std::runtime_error("kernels/cuda DeviceArena '" + label_ + "': planned buffer at " +
                             std::to_string(offset) + " (+" + std::to_string(bytes) +
                             " bytes) is outside its " + std::to_string(capacity_) + " bytes");
  }
  return static_cast<char*>(base_) + offset;
}

}  // namespace brt::kernels::cuda
