// Owns every parameter of a model: declarations first (declare), then one allocation for all
// values and one for all gradients (finalize), then layout-independent initialisation
// (initialize, model.md §10b). Layers keep the index or pointer they got from declare().
#pragma once

#include <cstdint>
#include <string>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/param.h"
#include "kernels/memory.h"

namespace brt::core {

template <typename T>
class ParamStore {
 public:
  ParamStore() = default;
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // Declares a parameter; returns its index. Names must be unique.
  int declare(ParamSpec spec);
  // Allocates the value and gradient arenas in `memory` (the backend's: host or device;
  // touching every page now, not in the step loop) and points every Param at its slice.
  void finalize(kernels::Memory& memory = kernels::host_memory());
  bool finalized() const { return finalized_; }

  // Counter-based initialisation keyed by (seed, name, flat logical index): the same model
  // whatever the layout, and a shard is exactly the slice of the whole (model.md §10b).
  void initialize(uint64_t seed);

  void zero_grads();
  // The memory the arenas live in (host_memory() before finalize).
  kernels::Memory& memory() const { return *memory_; }
  // Host copies of one parameter's value / gradient, and writing a value from the host
  // (checkpoints, tests, tensor-parallel gathers): the arenas may be device memory.
  std::vector<T> value_to_host(int i) const;
  std::vector<T> grad_to_host(int i) const;
  void value_from_host(int i, std::span<const T> values);

  int size() const { return static_cast<int>(params_.size()); }
  Param<T>& operator[](int i) { return params_[i]; }
  const Param<T>& operator[](int i) const { return params_[i]; }
  std::vector<Param<T>>& params() { return params_; }
  const std::vector<Param<T>>& params() const { return params_; }
  // Index of a parameter by name, or -1.
  int find(const std::string& name) const;

  int64_t total_numel() const { return total_; }
  // Pointers into the arenas (device memory under the CUDA backend: pass to kernels only).
  T* values() { return values_.data(); }
  T* grads() { return grads_.data(); }
  const T* values() const { return values_.data(); }
  const T* grads() const { return grads_.data(); }

 private:
  std::vector<Param<T>> params_;
  std::unordered_map<std::string, int> index_;
  kernels::Memory* memory_ = &kernels::host_memory();
  kernels::Buffer<T> values_;
  kernels::Buffer<T> grads_;
  int64_t total_ = 0;
  bool finalized_ = false;
};

// Declaration helpers: one parameter with its model.md §9 name and shape and the §4 / §10b
// initialisation of its kind.

// Declares a [D] RMSNorm gain (init 1).
template <typename T>
int declare_norm(ParamStore<T>& store, const std::string& name, int d_model);
// Declares a [in, out] matrix, truncated normal with sigma = sqrt(gain/in)/0.8796 (model.md §4).
// `shard`: this rank's tensor-parallel slice (default: replicated); the spec keeps the full shape.
template <typename T>
int declare_matrix(ParamStore<T>& store, const std::string& name, int in, int out,
                   double gain = 1.0, ShardSpec shard = {});
// Declares a tensor drawn from N(mean, stddev).
template <typename T>
int declare_normal(ParamStore<T>& store, const std::string& name, std::vector<int64_t> shape,
                   double stddev, ShardSpec shard = {}, double mean = 0.0);
// Declares a per-head scale [H], init 1 (model.md §3.1).
template <typename T>
int declare_ones(ParamStore<T>& store, const std::string& name, std::vector<int64_t> shape,
                 ShardSpec shard = {});

// The initial value of element `index` of a parameter with this spec (model.md §10b): the same
// on every rank and every layout. Exposed so a shard can initialise just its slice.
double initial_value(const ParamSpec& spec, uint64_t seed, int64_t index);

}  // namespace brt::core
