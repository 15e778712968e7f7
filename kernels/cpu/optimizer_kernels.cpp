// The host implementation of kernels::OptimizerKernels (model.md §10c): OpenMP over the chunk
// list, each chunk summed with lane_sum, so the results are independent of the thread count.
// The arithmetic is, expression for expression, the one core/'s optimizers had before the
// loops moved here (same partial sums in the same order: bit-identical results).
#include <algorithm>
#include <cmath>

#include "kernels/optimizer_kernels.h"

namespace brt::kernels {
namespace {

constexpr int64_t kColumnBlock = 256;  // columns summed together by one thread (cache-friendly)

template <typename T>
class CpuOptimizerKernels final : public OptimizerKernels<T> {
 public:
  const char* name() const override { return "cpu"; }
  Memory& memory() override { return host_memory(); }

  void sum_squares(OptimField field, const OptimChunk* chunks, int64_t n_chunks,
                   const OptimTensor<T>* tensors, double* partial) override {
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < n_chunks; ++c) {
      const OptimChunk& ch = chunks[c];
      const OptimTensor<T>& t = tensors[ch.tensor];
      const T* x = field == OptimField::kGrad ? t.grad : t.value;
      partial[c] = lane_sum(ch.begin, ch.end, [x](int64_t i) { return static_cast<double>(x[i]) * x[i]; });
    }
  }

  void grad_norm_finish(int32_t n_params, const int64_t* first_chunk, double* partial, double clip_norm,
                        const double* loss_sum, OptimStepScalars<T>* step) override {
    // core::ChunkTable::sum_per_param, then the parameters in order: GradNorm::compute's sums.
    double total = 0.0;
    for (int32_t p = 0; p < n_params; ++p) {
      double s = 0.0;
      for (int64_t c = first_chunk[p]; c < first_chunk[p + 1]; ++c) s += partial[c];
      total += s;
    }
    const double norm = std::sqrt(total);
    step->grad_norm = norm;
    step->grad_scale = static_cast<T>(optim_clip_scale(norm, clip_norm));
    step->skip = std::isfinite(norm) && (loss_sum == nullptr || std::isfinite(*loss_sum)) ? 0 : 1;
  }

  void segment_sums(int32_t n_segments, const int64_t* first, const double* partial, double* sums) override {
    for (int32_t p = 0; p < n_segments; ++p) {
      double s = 0.0;
      for (int64_t c = first[p]; c < first[p + 1]; ++c) s += partial[c];
      sums[p] = s;
    }
  }
  void gather_stats(int64_t n, const int64_t* index, const double* from, double* to) override {
    for (int64_t k = 0; k < n; ++k) to[k] = from[index[k]];
  }
  void scatter_stats(int64_t n, const int64_t* index, const double* from, double* to) override {
    for (int64_t k = 0; k < n; ++k) to[index[k]] = from[k];
  }

  void scale(T* x, int64_t n, T s) override {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) x[i] *= s;
  }

  void adamw_update(const AdamWStep<T>& s, const OptimStepScalars<T>* step, const OptimChunk* chunks,
                    int64_t n_chunks, const OptimTensor<T>* tensors) override {
    if (step->skip) return;
    // Locals, not s.* or step->*: the stores to m, v and w could alias them otherwise, and the
    // loop would reload them every element instead of vectorising.
    const T b1 = s.beta1, b2 = s.beta2, one_minus_b1 = s.one_minus_beta1, one_minus_b2 = s.one_minus_beta2;
    const T inv_bc1 = step->inv_bias_correction1, inv_bc2 = step->inv_bias_correction2;
    const T eps = s.eps, lr = step->lr_t, gs = step->grad_scale;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < n_chunks; ++c) {
      const OptimChunk& ch = chunks[c];
      const OptimTensor<T>& t = tensors[ch.tensor];
      const T wd = t.decay ? s.weight_decay : T(0);
      T* w = t.value;
      const T* g = t.grad;
      T* m = t.m;
      T* v = t.v;
      for (int64_t i = ch.begin; i < ch.end; ++i) {
        const T gi = g[i] * gs;
        m[i] = b1 * m[i] + one_minus_b1 * gi;
        v[i] = b2 * v[i] + one_minus_b2 * gi * gi;
        const T step_dir = (m[i] * inv_bc1) / (std::sqrt(v[i] * inv_bc2) + eps) + wd * w[i];
        w[i] -= lr * step_dir;
      }
    }
  }

  void adafactor_second_moment(const OptimChunk* chunks, int64_t n_chunks, const OptimTensor<T>* tensors,
                               const OptimStepScalars<T>* step, T eps, double* param_squares,
                               double* update_squares) override {
    if (step->skip) return;
    const T gs = step->grad_scale, keep = step->keep_t, rho = step->rho_t;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < n_chunks; ++c) {
      const OptimChunk& ch = chunks[c];
      const OptimTensor<T>& t = tensors[ch.tensor];
      const T* w = t.value;
      param_squares[c] = lane_sum(ch.begin, ch.end, [w](int64_t i) { return static_cast<double>(w[i]) * w[i]; });
      if (t.factored) continue;
      const T* g = t.grad;
      T* v = t.v;
      update_squares[c] = lane_sum(ch.begin, ch.end, [=](int64_t i) {
        const T gi = g[i] * gs;
        v[i] = keep * v[i] + rho * (gi * gi + eps);
        const T y = gi / std::sqrt(v[i]);
        return static_cast<double>(y) * y;
      });
    }
  }

  void adafactor_gradient_sums(const OptimTensor<T>& t, const OptimStepScalars<T>* step, T eps, double* s1, double* s2,
                               double*) override {
    if (step->skip) return;
    const T gs = step->grad_scale;
    const int64_t rows = t.rows(), cols = t.cols(), inner = t.p1 * t.p2;
    const int64_t n2p2 = t.n2 * t.p2, p2 = t.p2;
    const T* g = t.grad;
    // Sums of G along the second axis: one serial sum per F1 entry.
#pragma omp parallel for schedule(static)
    for (int64_t row = 0; row < rows; ++row) {
      const T* grow = g + row * cols;
      if (inner == 1) {
        s1[row] = lane_sum(0, cols, [=](int64_t col) {
          const T gi = grow[col] * gs;
          return static_cast<double>(gi * gi + eps);
        });
      } else {
        double* out = s1 + row * inner;
        std::fill(out, out + inner, 0.0);
        for (int64_t col = 0; col < cols; ++col) {
          const T gi = grow[col] * gs;
          out[(col / n2p2) * p2 + col % p2] += static_cast<double>(gi * gi + eps);
        }
      }
    }
    // Sums of G along the first axis: a thread owns a block of columns and walks the rows.
    const int64_t blocks_per_group = (cols + kColumnBlock - 1) / kColumnBlock;
    const int64_t n_blocks = t.p0 * blocks_per_group;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t group = b / blocks_per_group;
      const int64_t col0 = (b % blocks_per_group) * kColumnBlock;
      const int64_t width = std::min(kColumnBlock, cols - col0);
      double acc[kColumnBlock] = {};
      for (int64_t i1 = 0; i1 < t.n1; ++i1) {
        const T* grow = g + (group * t.n1 + i1) * cols + col0;
        for (int64_t j = 0; j < width; ++j) {
          const T gi = grow[j] * gs;
          acc[j] += static_cast<double>(gi * gi + eps);
        }
      }
      std::copy(acc, acc + width, s2 + group * cols + col0);
    }
  }

  void adafactor_update_factors(const OptimTensor<T>& t, const OptimStepScalars<T>* step, const double* s1,
                                const double* s2, double* means) override {
    if (step->skip) return;
    const double rho = step->rho;
    const int64_t f1_size = t.f1_size(), f2_size = t.f2_size();
    for (int64_t k = 0; k < f1_size; ++k)
      t.f1[k] = static_cast<T>((1.0 - rho) * t.f1[k] + rho * (s1[k] / static_cast<double>(t.n2_total)));
    for (int64_t k = 0; k < f2_size; ++k)
      t.f2[k] = static_cast<T>((1.0 - rho) * t.f2[k] + rho * (s2[k] / static_cast<double>(t.n1_total)));
    // Partial sums of R along its normalised axis, one per combination of the other axes.
    for (int64_t q0 = 0; q0 < t.p0; ++q0)
      for (int64_t q1 = 0; q1 < t.p1; ++q1)
        for (int64_t q2 = 0; q2 < t.p2; ++q2) {
          means[(q0 * t.p1 + q1) * t.p2 + q2] = adafactor_r_axis_sum(t, q0, q1, q2);
        }
  }

  void adafactor_compute_factors(const OptimTensor<T>& t, const double* means) override {
    // C's factor: C^-1/2 over its whole array; R's: (R / mean)^-1/2 (the reference's row_factor).
    const T* c = t.r_is_f1 ? t.f2 : t.f1;
    T* c_fac = t.r_is_f1 ? t.fac2 : t.fac1;
    const int64_t c_size = t.r_is_f1 ? t.f2_size() : t.f1_size();
    for (int64_t k = 0; k < c_size; ++k) c_fac[k] = static_cast<T>(1.0 / std::sqrt(static_cast<double>(c[k])));
    const double n_norm = static_cast<double>(t.r_is_f1 ? t.n1_total : t.n2_total);
    for (int64_t q0 = 0; q0 < t.p0; ++q0)
      for (int64_t q1 = 0; q1 < t.p1; ++q1)
        for (int64_t q2 = 0; q2 < t.p2; ++q2) {
          const double mean = means[(q0 * t.p1 + q1) * t.p2 + q2] / n_norm;
          if (t.r_is_f1) {
            for (int64_t i1 = 0; i1 < t.n1; ++i1) {
              const int64_t k = ((q0 * t.n1 + i1) * t.p1 + q1) * t.p2 + q2;
              t.fac1[k] = static_cast<T>(1.0 / std::sqrt(t.f1[k] / mean));
            }
          } else {
            for (int64_t i2 = 0; i2 < t.n2; ++i2) {
              const int64_t k = ((q0 * t.p1 + q1) * t.n2 + i2) * t.p2 + q2;
              t.fac2[k] = static_cast<T>(1.0 / std::sqrt(t.f2[k] / mean));
            }
          }
        }
  }

  void adafactor_factored_update_squares(const OptimChunk* chunks, int64_t n_chunks, const OptimTensor<T>* tensors,
                                         const OptimStepScalars<T>* step, double* update_squares) override {
    if (step->skip) return;
    const T gs = step->grad_scale;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < n_chunks; ++c) {
      const OptimChunk& ch = chunks[c];
      const OptimTensor<T>& t = tensors[ch.tensor];
      if (!t.factored) continue;
      update_squares[c] = factored_update_squares(t, ch.begin, ch.end, gs);
    }
  }

  void adafactor_coefficients(int32_t n_tensors, const int64_t* first_chunk, const int64_t* rms_count,
                              const double* param_squares, const double* update_squares,
                              const AdafactorScalars& scalars, const OptimStepScalars<T>* step, T* coef) override {
    if (step->skip) return;
    const double lr = step->lr;
    for (int32_t p = 0; p < n_tensors; ++p) {
      double psq = 0.0, ysq = 0.0;
      for (int64_t c = first_chunk[p]; c < first_chunk[p + 1]; ++c) {
        psq += param_squares[c];
        ysq += update_squares[c];
      }
      coef[p] = static_cast<T>(adafactor_coefficient(scalars, lr, psq, ysq, static_cast<double>(rms_count[p])));
    }
  }
  void adafactor_apply(const OptimChunk* chunks, int64_t n_chunks, const OptimTensor<T>* tensors, const T* coefs,
                       const OptimStepScalars<T>* step, T beta1, T one_minus_beta1) override {
    if (step->skip) return;
    const T gs = step->grad_scale;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < n_chunks; ++c) {
      const OptimChunk& ch = chunks[c];
      const OptimTensor<T>& t = tensors[ch.tensor];
      const T coef = coefs[ch.tensor];
      T* w = t.value;
      const T* g = t.grad;
      T* m = t.m;
      auto apply = [&](int64_t i, T y) {
        m[i] = beta1 * m[i] + one_minus_beta1 * (coef * y);
        w[i] -= m[i];
      };
      if (t.factored) {
        for_each_factored_y(t, ch.begin, ch.end, gs, apply);
      } else {
        for (int64_t i = ch.begin; i < ch.end; ++i) apply(i, (g[i] * gs) / std::sqrt(t.v[i]));
      }
    }
  }

 private:
  template <typename F>
  static void for_each_factored_y(const OptimTensor<T>& t, int64_t begin, int64_t end, T gs, F&& f) {
    const int64_t cols = t.cols(), inner = t.p1 * t.p2, n2p2 = t.n2 * t.p2, p2 = t.p2;
    const T* g = t.grad;
    int64_t i = begin;
    while (i < end) {
      const int64_t row = i / cols;
      int64_t col = i - row * cols;
      const int64_t seg_end = std::min(end, (row + 1) * cols);
      const T* f2row = t.fac2 + (row / t.n1) * cols;
      if (inner == 1) {
        const T rf = t.fac1[row];
        for (; i < seg_end; ++i, ++col) f(i, g[i] * gs * rf * f2row[col]);
      } else {
        const T* f1row = t.fac1 + row * inner;
        for (; i < seg_end; ++i, ++col) f(i, g[i] * gs * f1row[(col / n2p2) * p2 + col % p2] * f2row[col]);
      }
    }
  }

  static double factored_update_squares(const OptimTensor<T>& t, int64_t begin, int64_t end, T gs) {
    const int64_t cols = t.cols(), inner = t.p1 * t.p2, n2p2 = t.n2 * t.p2, p2 = t.p2;
    double total = 0.0;
    for (int64_t i = begin; i < end;) {  // one row segment at a time, each summed in lanes
      const int64_t row = i / cols;
      const int64_t seg_end = std::min(end, (row + 1) * cols);
      const T* grow = t.grad + row * cols;
      const T* f2row = t.fac2 + (row / t.n1) * cols;
      const T* f1row = t.fac1 + row * inner;
      const int64_t col0 = i - row * cols, col1 = seg_end - row * cols;
      if (inner == 1) {
        const T rf = f1row[0];
        total += lane_sum(col0, col1, [=](int64_t col) {
          const T y = grow[col] * gs * rf * f2row[col];
          return static_cast<double>(y) * y;
        });
      } else {
        total += lane_sum(col0, col1, [=](int64_t col) {
          const T y = grow[col] * gs * f1row[(col / n2p2) * p2 + col % p2] * f2row[col];
          return static_cast<double>(y) * y;
        });
      }
      i = seg_end;
    }
    return total;
  }
};

}  // namespace

template <typename T>
std::unique_ptr<OptimizerKernels<T>> make_cpu_optimizer_kernels() {
  return std::make_unique<CpuOptimizerKernels<T>>();
}

template std::unique_ptr<OptimizerKernels<float>> make_cpu_optimizer_kernels();
template std::unique_ptr<OptimizerKernels<double>> make_cpu_optimizer_kernels();

}  // namespace brt::kernels
