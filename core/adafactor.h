// Adafactor exactly as MODEL §10c (the reference code's: flax.optim.Adafactor(beta1=0.9) with
// its defaults). t = completed steps, rho = (t+1)^-0.8, G = g^2 + 1e-30.
//   factored tensors (both of the two largest dims >= 128):
//     R <- (1-rho)*R + rho*mean(G over the largest axis)          ("<param>.adafactor.r")
//     C <- (1-rho)*C + rho*mean(G over the second-largest axis)   ("<param>.adafactor.c")
//     y = g * (R/mean(R over its second-largest axis))^-1/2 * C^-1/2
//   others: v <- (1-rho)*v + rho*G;  y = g / sqrt(v)              ("<param>.adafactor.v")
//   y <- y / max(1, RMS(y)/1.0);  u = lr*max(RMS(param), 1e-3)*y
//   m <- 0.9*m + 0.1*u;  param <- param - m                       ("<param>.adafactor.m")
// For a matrix [r, c] with r <= c, R runs over rows and C over columns, as MODEL writes it;
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

#include "core/optimizer.h"

namespace brt::core {

struct FactorAxes {
  int normalized = 0;  // the second-largest axis: R is indexed by it and normalised by its mean
  int largest = 0;     // the largest axis: C is indexed by it
};

// The reference's _factored_dims: axes sorted by size (stable), the last two; nullopt for rank
// < 2 or when the second-largest dim is below min_dim.
std::optional<FactorAxes> adafactor_factor_axes(const std::vector<int64_t>& shape, int64_t min_dim);

template <typename T>
class Adafactor final : public Optimizer<T> {
 public:
  Adafactor(const OptimConfig& config, ParamStore<T>& store, const std::vector<bool>& owned = {});
  bool is_factored(int param) const { return plans_[param].factored; }

  int64_t state_elems_allocated() const override { return int64_t(m_.size() + v_.size() + factors_.size()); }

 protected:
  void update(double lr, double grad_scale) override;
  void collect_state(std::vector<NamedState<T>>& out) override;

 private:
  // A factored tensor seen as a row-major [P0, n1, P1, n2, P2] array whose two factored axes
  // are n1 and n2; in memory that is a matrix [rows = P0*n1, cols = P1*n2*P2].
  // F1 = accumulator over "all axes but n2" (size rows*P1*P2), F2 = "all but n1" (P0*cols).
  struct Plan {
    bool factored = false;
    int64_t numel = 0;
    int64_t p0 = 1, n1 = 1, p1 = 1, n2 = 1, p2 = 1, rows = 0, cols = 0;
    // Under tensor parallelism n1/n2 are this rank's lengths; the means divide by the whole
    // tensor's (n1_total, n2_total) and the RMS by its element count (rms_count).
    int64_t n1_total = 1, n2_total = 1, rms_count = 0;
    int r_dropped = -1, c_dropped = -1;   // the parameter axis R / C has summed away
    bool r_is_f1 = true;                  // R indexes the first of the two axes
    std::vector<int64_t> r_shape, c_shape;
    T* m = nullptr;
    T* v = nullptr;                       // not factored
    T* f1 = nullptr;                      // factored state (R or C, see r_is_f1)
    T* f2 = nullptr;
    T* fac1 = nullptr;                    // per-step scratch: the rsqrt factors
    T* fac2 = nullptr;
    int64_t f1_off = 0, f2_off = 0, mean_off = 0;  // into the double scratch buffers
    int64_t f1_size = 0, f2_size = 0, n_means = 0;
  };

  void plan_tensors();
  void sum_factored_gradients(const Plan& plan, const T* g, T gs);
  void update_factors(const Plan& plan, double rho);
  void compute_factors(const Plan& plan);
  double factored_update_squares(const Plan& plan, int64_t begin, int64_t end, const T* g, T gs) const;
  template <typename F>
  void for_each_factored_y(const Plan& plan, int64_t begin, int64_t end, const T* g, T gs, F&& f) const;

  std::vector<Plan> plans_;
  std::vector<int> factored_;                  // indices of factored parameters
  std::vector<T> m_, v_, factors_, scratch_;   // state arenas and the factor scratch
  std::vector<double> row_sums_, col_sums_, mean_sums_;
  std::vector<StatBlock> row_blocks_, col_blocks_, mean_blocks_;
  std::vector<double> psq_partial_, ysq_partial_, psq_, ysq_;
};

}  // namespace brt::core
