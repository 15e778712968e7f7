// Adafactor exactly as model.md §10c (the reference code's: flax.optim.Adafactor(beta1=0.9) with
// its defaults). t = completed steps, rho = (t+1)^-0.8, G = g^2 + 1e-30.
//   factored tensors (both of the two largest dims >= 128):
//     R <- (1-rho)*R + rho*mean(G over the largest axis)          ("<param>.adafactor.r")
//     C <- (1-rho)*C + rho*mean(G over the second-largest axis)   ("<param>.adafactor.c")
//     y = g * (R/mean(R over its second-largest axis))^-1/2 * C^-1/2
//   others: v <- (1-rho)*v + rho*G;  y = g / sqrt(v)              ("<param>.adafactor.v")
//   y <- y / max(1, RMS(y)/1.0);  u = lr*max(RMS(param), 1e-3)*y
//   m <- 0.9*m + 0.1*u;  param <- param - m                       ("<param>.adafactor.m")
// For a matrix [r, c] with r <= c, R runs over rows and C over columns, as docs/model.md §10c writes it;
// with r > c the reference normalises the column accumulator instead, which is the same update
// in exact arithmetic (mean(R) == mean(C)) and is what we do too. Tensors of rank > 2 pick the
// two largest axes (ties: the later axis counts as larger), the other axes index separate
// factors, exactly as the reference does.
// Tensor parallelism: whether and how a shard is factored follows the whole tensor's shape;
// the sums along the split axis (and RMS sums) go through the StatReducer, so each rank's
// update is its slice of the unsplit update (docs/parallelism.md, "Tensor parallelism").
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/optim/optimizer.h"

namespace brt::core {

struct FactorAxes {
  int normalized = 0;  // the second-largest axis: R is indexed by it and normalised by its mean
  int largest = 0;     // the largest axis: C is indexed by it
};

// The reference's _factored_dims: axes sorted by size (stable), the last two; nullopt for rank
// < 2 or when the second-largest dim is below min_dim.
std::optional<FactorAxes> adafactor_factor_axes(const std::vector<int64_t>& shape, int64_t min_dim);

// A parameter as Adafactor's kernels see it (kernels::OptimTensor's layout fields; pointers
// null): factored along the whole tensor's two largest axes, over this rank's lengths, or not.
// The planner counts the CUDA optimizer's launches from it (kernels/cuda_optimizer_launches.h).
template <typename T>
kernels::OptimTensor<T> adafactor_layout(const ParamSpec& spec, int64_t min_dim);
// Every parameter of `params` as the optimizer kernels see it: Adafactor's layouts
// (`adafactor`), else (and for tensors it does not factor) their elements as P0.
std::vector<kernels::OptimTensor<float>> optimizer_layouts(const ParamStore<float>& params, bool adafactor,
                                                           int64_t min_dim);

template <typename T>
class Adafactor final : public Optimizer<T> {
 public:
  Adafactor(const OptimConfig& config, ParamStore<T>& store, const std::vector<bool>& owned = {},
            kernels::OptimizerKernels<T>* kernels = nullptr);
  bool is_factored(int param) const { return plans_[param].factored; }

  int64_t state_elems_allocated() const override { return int64_t(m_.size() + v_.size() + factors_.size()); }

 protected:
  void update() override;
  void fill_step_scalars(kernels::OptimStepScalars<T>& s) const override;
  void collect_state(std::vector<NamedState<T>>& out) override;

 private:
  // Host-side view of one parameter: the kernels' tensor description (layout and pointers into
  // the state arenas, kernels/optimizer_kernels.h) plus what the host needs around it.
  struct Plan {
    bool factored = false;
    int64_t rms_count = 0;                // the whole tensor's elements (RMS under TP)
    int r_dropped = -1, c_dropped = -1;   // the parameter axis R / C has summed away
    std::vector<int64_t> r_shape, c_shape;
    int64_t f1_off = 0, f2_off = 0, mean_off = 0;  // into the double stat buffers
    kernels::OptimTensor<T> tensor;
  };

  void plan_tensors();
  // plan_tensors' steps: parameter p's plan (its state added to the running totals), the state
  // arenas and stat buffers sized by the totals, then each owned tensor's pointers into them.
  void plan_tensor(int p, int64_t& v_total, int64_t& f1_total, int64_t& f2_total,
                   int64_t& mean_total);
  void allocate_state(int64_t v_total, int64_t f1_total, int64_t f2_total, int64_t mean_total);
  void bind_tensors();
  // Hands a stat array to the reducer: where it lives when the reducer sums there, else copied
  // to the host and back (only with a reducer: one process needs no reduction).
  void reduce_stats(StatKind kind, kernels::Buffer<double>& dev, std::vector<double>& host,
                    const std::vector<StatBlock>& blocks);

  std::vector<Plan> plans_;
  std::vector<int> factored_;  // indices of factored parameters (this rank owns)
  // State arenas and the factor scratch, in the store's memory.
  kernels::Buffer<T> m_, v_, factors_, scratch_;
  kernels::Buffer<kernels::OptimTensor<T>> tensors_;
  kernels::Buffer<T> coef_dev_;  // per parameter: lr * param scale / clip denominator
  // For the coefficients on the device (no reducer): the chunk table's first chunks and each
  // parameter's RMS count, in the store's memory.
  kernels::Buffer<int64_t> first_chunk_dev_, rms_count_dev_;
  std::vector<T> coef_;
  // Sums along the factored axes and of R, in the store's memory and (for the reducer) here.
  kernels::Buffer<double> row_sums_dev_, col_sums_dev_, mean_sums_dev_;
  // The kernels' partial sums for one tensor's row and column sums (the most any tensor needs;
  // reused tensor after tensor in stream order).
  kernels::Buffer<double> sums_scratch_;
  std::vector<double> row_sums_, col_sums_, mean_sums_;
  std::vector<StatBlock> row_blocks_, col_blocks_, mean_blocks_;
  kernels::Buffer<double> psq_partial_dev_, ysq_partial_dev_;
  DeviceParamTotals psq_totals_, ysq_totals_;  // a device reducer's per-parameter sums
  std::vector<double> psq_partial_, ysq_partial_, psq_, ysq_;
};

}  // namespace brt::core
