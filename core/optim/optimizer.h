// The optimizer interface (model.md §10c): one step reads the gradients in a ParamStore, takes the
// global gradient norm, clips, looks up the scheduled learning rate and updates the values in
// place. All state is allocated at construction; step() allocates nothing.
//
// State is exposed as named tensors so a checkpoint can save and restore it exactly: the
// names are "<param>.<optimizer>.<slot>" (e.g. "layers.9.state.wq.adafactor.r"), plus the step
// counter (step_count / set_step_count).
//
// Where it runs: every loop over elements is a call of kernels::OptimizerKernels (kernels/
// optimizer_kernels.h) on the memory the ParamStore lives in, and all state (moments, factors,
// scratch, the chunk and tensor tables) is allocated there too. Without kernels given the CPU
// implementation runs (the store must be in host memory); for a store in device memory pass the
// backend's optimizer kernels (kernels/cuda/optim/cuda_optimizer_kernels.h). Only small per-chunk /
// per-parameter / per-factor-entry double arrays come to the host (for the StatReducer and the
// per-parameter scalars).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/optim/grad_clip.h"
#include "core/optim/optim_config.h"
#include "core/optim/optim_stats.h"
#include "core/param_store.h"
#include "kernels/optimizer_kernels.h"

namespace brt::core {

template <typename T>
struct NamedState {
  std::string name;            // "<param>.adafactor.m", "<param>.adamw.v", ...
  std::vector<int64_t> shape;  // logical shape of the state tensor
  // Valid for the optimizer's lifetime; null: not owned (ZeRO-1). Points into the store's
  // memory(), which may be device memory: read and write it through that Memory's
  // to_host / from_host unless memory().host_accessible().
  T* data = nullptr;
  int param = -1;              // index of the parameter in the ParamStore
  // -1: the state has the parameter's (local) shape. Otherwise the parameter axis this state
  // has summed away (Adafactor's R and C), which says how it is split under TP.
  int dropped_axis = -1;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
};

struct StepStats {
  int64_t step = 0;         // t of the update just applied (0 for the first)
  double lr = 0.0;          // learning rate used
  double grad_norm = 0.0;   // global L2 norm before clipping
  double clip_scale = 1.0;  // factor applied to the gradients (1 when not clipped)
  bool applied = true;      // false: finish_step found the norm not finite; nothing was written
};

template <typename T>
class Optimizer {
 public:
  // `config` is copied and resolve()d (so the kind's clip default applies). `owned` (empty =
  // all) marks the parameters this rank updates and keeps state for (ZeRO-1: optimizer state
  // sharded over data-parallel ranks by whole parameters). The global gradient norm is still
  // taken over every parameter of the store, so the clip scale is that of the whole model.
  // `kernels` (must outlive the optimizer; null: the CPU implementation, which needs the store
  // in host memory) runs every element loop on the store's memory.
  Optimizer(const OptimConfig& config, ParamStore<T>& store, const std::vector<bool>& owned = {},
            kernels::OptimizerKernels<T>* kernels = nullptr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update from the store's current gradients (which it leaves unchanged): global norm,
  // clip scale, lr = learning_rate(config, t), the rule's update, then t += 1. The same as
  // apply(grad_norm()); the two halves let a caller look at the norm first and skip the update
  // (launch/train/step_guard.h). grad_norm() is collective under a reducer, like step().
  StepStats step();
  double grad_norm();
  StepStats apply(double grad_norm);

  // The same update enqueued without waiting for its gradient norm (device_steps(): no reducer,
  // or one that sums on the device; docs/gpu.md, "The optimizer's scalars on the device" and
  // "The optimizer's statistics across ranks"). stage_step() writes the scalars that
  // follow from t into the store's memory (call it before the step's device work, while the
  // device is idle: the copy waits for it); enqueue_step() enqueues the global norm, its clip
  // scale and the update, which writes nothing when the norm (or *loss_sum, when given: the
  // step's loss sum in the store's memory, for an update enqueued before the host has seen the
  // loss) is not finite; finish_step() reads the norm back and counts the update only if it
  // was applied. For a finite norm the values and state equal step()'s bit for bit; a
  // non-finite one leaves them as they were. enqueue_step reads and uploads nothing, so it can
  // be captured in a CUDA graph (launch/train/step_graphs.h).
  bool device_steps() const { return reducer_ == nullptr || reducer_->reduces_on_device(); }
  void stage_step();
  void enqueue_step(const double* loss_sum = nullptr);
  StepStats finish_step();

  int64_t step_count() const { return t_; }
  void set_step_count(int64_t t);
  // Every state tensor, in a fixed order (by parameter, then slot). Tensors of parameters
  // this rank does not own are listed too (same names and shapes on every rank) with
  // data == nullptr.
  std::vector<NamedState<T>> state();
  bool owns(int param) const { return owned_.empty() || owned_[size_t(param)]; }
  // Elements of the parameters this rank owns (the size of its per-parameter state arenas).
  int64_t owned_numel() const { return owned_numel_; }
  // Elements in the state buffers actually allocated (memory report; excludes step scratch).
  virtual int64_t state_elems_allocated() const = 0;
  const OptimConfig& config() const { return config_; }
  ParamStore<T>& store() { return store_; }
  kernels::OptimizerKernels<T>& kernels() { return kernels_; }

  // Installs the reduction hook for sharded training (optim_stats.h); null means one process.
  void set_reducer(StatReducer* reducer);

 protected:
  // Enqueues one update from the step scalars in step_scalars() (learning rate, clip scale, the
  // rule's t-dependent factors, skip); t_ is the number of updates done before this one.
  virtual void update() = 0;
  // The rule's scalars that follow from t_ (AdamW's bias corrections, Adafactor's rho).
  virtual void fill_step_scalars(kernels::OptimStepScalars<T>& s) const = 0;
  // This step's scalars in the store's memory, and as the host last wrote them.
  const kernels::OptimStepScalars<T>* step_scalars() const { return scalars_.data(); }
  const kernels::OptimStepScalars<T>& staged_scalars() const { return staged_; }
  virtual void collect_state(std::vector<NamedState<T>>& out) = 0;
  kernels::Memory& memory() { return store_.memory(); }

  ParamStore<T>& store_;
  OptimConfig config_;
  std::unique_ptr<kernels::OptimizerKernels<T>> owned_kernels_;  // the CPU default
  kernels::OptimizerKernels<T>& kernels_;
  ChunkTable table_;  // chunks of the owned parameters only
  kernels::Buffer<kernels::OptimChunk> chunks_;  // table_ in the store's memory
  std::vector<bool> owned_;            // empty: every parameter
  std::vector<int64_t> state_offset_;  // per parameter: offset into a compact arena of owned params (-1: not owned)
  int64_t owned_numel_ = 0;
  int64_t t_ = 0;
  StatReducer* reducer_ = nullptr;

 private:
  // Writes the scalars of step t_ (with these gradient-side values) into the store's memory.
  void write_step_scalars(double grad_norm, double clip_scale);

  GradNorm<T> grad_norm_;
  kernels::Buffer<kernels::OptimStepScalars<T>> scalars_;  // one entry, in the store's memory
  kernels::OptimStepScalars<T> staged_;
};

// Adafactor or AdamW per config.kind, on `kernels` (see the Optimizer constructor).
template <typename T>
std::unique_ptr<Optimizer<T>> make_optimizer(const OptimConfig& config, ParamStore<T>& store,
                                             const std::vector<bool>& owned = {},
                                             kernels::OptimizerKernels<T>* kernels = nullptr);

}  // namespace brt::core
