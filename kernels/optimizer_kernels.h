// The optimizer's per-element math (model.md §10c) as kernels over parameters, gradients and
// optimizer state that live in one backend's memory (kernels/memory.h). core/ keeps the
// orchestration (chunking, the learning rate, the StatReducer seam for TP / ZeRO-1, the
// per-parameter scalars) and calls these for every loop over elements, so the step runs where
// the parameters live: the CPU implementation on host memory, the CUDA one on device memory.
//
// Conventions:
//  - Every pointer passed here, including the chunk and tensor tables and the double outputs,
//    points into the implementation's memory(). Host code reads results back with
//    Memory::to_host (the partials are one double per chunk or per factor entry: tiny).
//  - A "chunk list" is a fixed partition of the parameters' elements (core/optim/optim_stats.h,
//    ChunkTable). Reductions produce one double partial per chunk, each summed in a fixed
//    order, so results never depend on threads or scheduling. The CPU implementation sums a
//    chunk with lane_sum (below); the CUDA one with a fixed block tree: the two agree to
//    rounding, each is deterministic.
//  - Element math is in T (fp32 on the training path) with double accumulators, exactly as the
//    CPU reference in core/ did before it moved here.
//  - Kernels never allocate and never synchronise; Memory::to_host orders after them.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>

#include "kernels/memory.h"

namespace brt::kernels {

// One parameter tensor as the optimizer kernels see it. Fields a rule does not use are null
// or zero. Adafactor's factored tensors are viewed as a row-major [P0, n1, P1, n2, P2] array
// whose factored axes are n1 and n2; in memory a matrix [rows = P0*n1, cols = P1*n2*P2].
// F1 sums over "all axes but n2" (size rows*P1*P2), F2 over "all but n1" (size P0*cols).
template <typename T>
struct OptimTensor {
  T* value = nullptr;
  T* grad = nullptr;
  T* m = nullptr;     // first moment (AdamW m, Adafactor m); null: not owned (ZeRO-1)
  T* v = nullptr;     // second moment (AdamW v, Adafactor's unfactored v)
  T* f1 = nullptr;    // Adafactor factored accumulators (R or C, see r_is_f1)
  T* f2 = nullptr;
  T* fac1 = nullptr;  // per-step scratch: the rsqrt factors of f1 / f2
  T* fac2 = nullptr;
  int64_t p0 = 1, n1 = 1, p1 = 1, n2 = 1, p2 = 1;
  // Under tensor parallelism n1/n2 are this rank's lengths, the means divide by the whole's.
  int64_t n1_total = 1, n2_total = 1;
  int32_t factored = 0;  // Adafactor: 1 when f1/f2 replace v
  int32_t r_is_f1 = 1;   // R (the normalised accumulator) is f1
  int32_t decay = 0;     // AdamW: decoupled weight decay applies (matrices)
  int32_t unused = 0;

  int64_t rows() const { return p0 * n1; }
  int64_t cols() const { return p1 * n2 * p2; }
  int64_t f1_size() const { return rows() * p1 * p2; }
  int64_t f2_size() const { return p0 * cols(); }
  int64_t n_means() const { return p0 * p1 * p2; }
};

// Host and device code share the index arithmetic below (nvcc sees __host__ __device__).
#ifdef __CUDACC__
#define BRT_HOST_DEVICE __host__ __device__
#else
#define BRT_HOST_DEVICE
#endif

// Adafactor (model.md §10c): the sum of R along its normalised axis for one combination
// (q0, q1, q2) of the other axes, in double and in index order (the mean's numerator).
template <typename T>
BRT_HOST_DEVICE inline double adafactor_r_axis_sum(const OptimTensor<T>& t, int64_t q0, int64_t q1,
                                                   int64_t q2) {
  double s = 0.0;
  if (t.r_is_f1) {
    for (int64_t i1 = 0; i1 < t.n1; ++i1) s += t.f1[((q0 * t.n1 + i1) * t.p1 + q1) * t.p2 + q2];
  } else {
    for (int64_t i2 = 0; i2 < t.n2; ++i2) s += t.f2[((q0 * t.p1 + q1) * t.n2 + i2) * t.p2 + q2];
  }
  return s;
}

// Elements [begin, end) of tensor `tensor` (an index into the tensor table).
struct OptimChunk {
  int64_t begin = 0;
  int64_t end = 0;
  int32_t tensor = 0;
  int32_t unused = 0;
};

enum class OptimField { kValue, kGrad };

// Adafactor's per-tensor update coefficient (model.md §10c), for adafactor_coefficients: the
// constants of a run (the step's learning rate is OptimStepScalars::lr).
struct AdafactorScalars {
  double min_param_scale = 0, update_clip = 0;
};

// coef = lr * max(RMS(param), min_param_scale) / max(1, RMS(y) / update_clip), RMS(x) =
// sqrt(sum of squares / n), in double as written: core's host arithmetic, so the two agree bit
// for bit.
BRT_HOST_DEVICE inline double adafactor_coefficient(const AdafactorScalars& s, double lr, double param_squares,
                                                    double update_squares, double n) {
  const double rms_param = sqrt(param_squares / n), rms_update = sqrt(update_squares / n) / s.update_clip;
  const double param_scale = rms_param < s.min_param_scale ? s.min_param_scale : rms_param;  // std::max
  const double clip_denom = 1.0 < rms_update ? rms_update : 1.0;
  return lr * param_scale / clip_denom;
}

// Global-norm clipping's factor (model.md §10c): min(1, clip_norm / norm); 1 when clipping is off
// (clip_norm <= 0) or the norm is not finite (so a NaN gradient shows in the loss and norm
// instead of being hidden by a zero scale). norm - norm is 0 exactly when norm is finite.
BRT_HOST_DEVICE inline double optim_clip_scale(double norm, double clip_norm) {
  if (clip_norm <= 0 || !(norm - norm == 0.0) || norm <= clip_norm) return 1.0;
  return clip_norm / norm;
}

// AdamW's constants (model.md §10c), already in T as the update uses them; what changes from
// step to step is in OptimStepScalars.
template <typename T>
struct AdamWStep {
  T beta1, beta2, one_minus_beta1, one_minus_beta2;
  T eps, weight_decay;
};

// The scalars that change from one optimizer step to the next, in the kernels' memory (one per
// optimizer): every kernel of an update reads them there, so an update can be enqueued before
// the host knows the step's gradient norm, and a replayed CUDA graph reads the step's own values
// (docs/gpu.md, "The optimizer's scalars on the device").
template <typename T>
struct OptimStepScalars {
  // From the step count t, written by the host before the update (core/optim/optimizer.cpp).
  double lr = 0;   // the scheduled learning rate
  double rho = 0;  // Adafactor: (t + 1)^-decay_exponent
  T lr_t = 0;      // AdamW: lr in T
  T keep_t = 0, rho_t = 0;                               // Adafactor: T(1 - rho), T(rho)
  T inv_bias_correction1 = 0, inv_bias_correction2 = 0;  // AdamW: 1 / (1 - beta^(t+1)) in T
  // From the gradients: written on the device by grad_norm_finish, or by the host.
  double grad_norm = 0;  // the global L2 norm before clipping
  T grad_scale = 1;      // the gradients' factor: optim_clip_scale(grad_norm, clip_norm)
  int32_t skip = 0;      // nonzero: the norm is not finite, and the update writes nothing
};

// The statistics' own moves, on doubles in memory() whatever the element type, so that a
// StatReducer (core/optim/optim_stats.h), which has none, can sum them across ranks where they
// live: per-parameter totals from chunk partials, and the entries a collective sums gathered
// into one contiguous run and put back (docs/gpu.md, "The optimizer's statistics across ranks").
class StatKernels {
 public:
  virtual ~StatKernels() = default;
  // Where every pointer passed to these kernels must point.
  virtual Memory& memory() = 0;
  // sums[s] = the partials [first[s], first[s+1]) added in order from 0.0 (core's
  // ChunkTable::sum_per_param, bit for bit). first: n_segments + 1 entries.
  virtual void segment_sums(int32_t n_segments, const int64_t* first, const double* partial, double* sums) = 0;
  // to[k] = from[index[k]] for k < n.
  virtual void gather_stats(int64_t n, const int64_t* index, const double* from, double* to) = 0;
  // to[index[k]] = from[k] for k < n (no index repeats).
  virtual void scatter_stats(int64_t n, const int64_t* index, const double* from, double* to) = 0;
};

template <typename T>
class OptimizerKernels : public StatKernels {
 public:
  virtual const char* name() const = 0;

  // partial[c] = sum over chunk c of x^2 in double, x = the tensor's value or grad.
  virtual void sum_squares(OptimField field, const OptimChunk* chunks, int64_t n_chunks,
                           const OptimTensor<T>* tensors, double* partial) = 0;
  // From sum_squares' gradient partials, on the device: step->grad_norm = sqrt of the sum over
  // parameters, in parameter order, of each parameter's chunks [first_chunk[p], first_chunk[p+1])
  // summed in chunk order (core's host order: bit for bit), step->grad_scale =
  // T(optim_clip_scale(norm, clip_norm)), step->skip = whether the norm, or *loss_sum when
  // loss_sum is not null (the step's loss sum, in memory()), is not finite. `partial` is used as
  // scratch (its contents are undefined after). first_chunk: n_params + 1 entries.
  virtual void grad_norm_finish(int32_t n_params, const int64_t* first_chunk, double* partial, double clip_norm,
                                const double* loss_sum, OptimStepScalars<T>* step) = 0;
  // x *= s over n elements (gradient clipping outside an optimizer).
  virtual void scale(T* x, int64_t n, T s) = 0;

  // Every kernel below reads the step's scalars from `step` (in memory()) and, when step->skip
  // is set, writes nothing at all.

  // AdamW, fused: m, v, bias correction, decay (tensors with decay set), param update, for
  // the gradients times step->grad_scale.
  virtual void adamw_update(const AdamWStep<T>& constants, const OptimStepScalars<T>* step, const OptimChunk* chunks,
                            int64_t n_chunks, const OptimTensor<T>* tensors) = 0;

  // ---- Adafactor (model.md §10c), G = (g*grad_scale)^2 + eps --------------------------------
  // Every chunk: param_squares[c] = sum of value^2 (before the update). Chunks of unfactored
  // tensors also: v <- keep*v + rho*G, y = g*grad_scale/sqrt(v) and update_squares[c] = sum
  // of y^2; update_squares of factored chunks is left alone.
  virtual void adafactor_second_moment(const OptimChunk* chunks, int64_t n_chunks,
                                       const OptimTensor<T>* tensors, const OptimStepScalars<T>* step, T eps,
                                       double* param_squares, double* update_squares) = 0;
  // One factored tensor: row_sums[f1_size] = sums of G along n2 (per F1 entry), col_sums
  // [f2_size] = sums of G along n1 (per F2 entry). `scratch` holds adafactor_sums_scratch(tensor)
  // doubles of the implementation's memory (the partial sums of a tiled pass; its contents
  // on entry do not matter), and may be reused by the next call in stream order.
  virtual void adafactor_gradient_sums(const OptimTensor<T>& tensor, const OptimStepScalars<T>* step, T eps,
                                       double* row_sums, double* col_sums, double* scratch) = 0;
  virtual int64_t adafactor_sums_scratch(const OptimTensor<T>&) const { return 0; }
  // f1 <- (1-rho)*f1 + rho*row_sums/n2_total, f2 likewise with n1_total (rho = step->rho), then
  // mean_sums[n_means] = sums of R along its normalised axis (in double).
  virtual void adafactor_update_factors(const OptimTensor<T>& tensor, const OptimStepScalars<T>* step,
                                        const double* row_sums, const double* col_sums,
                                        double* mean_sums) = 0;
  // The rsqrt factors: C^-1/2, and (R / mean(R))^-1/2 with mean = mean_sums / n_total (scratch
  // only: it reads no step scalars).
  virtual void adafactor_compute_factors(const OptimTensor<T>& tensor,
                                         const double* mean_sums) = 0;
  // Factored tensors: update_squares[c] = sum over chunk c of y^2, y = g*grad_scale*fac1*fac2.
  // Chunks of unfactored tensors are left alone.
  virtual void adafactor_factored_update_squares(const OptimChunk* chunks, int64_t n_chunks,
                                                 const OptimTensor<T>* tensors, const OptimStepScalars<T>* step,
                                                 double* update_squares) = 0;
  // Every tensor's coefficient (lr = step->lr) from the chunk partials of
  // adafactor_second_moment and adafactor_factored_update_squares, on the device (no round trip
  // through the host): tensor p sums its chunks [first_chunk[p], first_chunk[p+1]) in chunk
  // order, n = rms_count[p]. first_chunk and rms_count are in memory() (uploaded once);
  // n_tensors + 1 entries / n_tensors.
  virtual void adafactor_coefficients(int32_t n_tensors, const int64_t* first_chunk, const int64_t* rms_count,
                                      const double* param_squares, const double* update_squares,
                                      const AdafactorScalars& constants, const OptimStepScalars<T>* step,
                                      T* coef) = 0;
  // u = coef[tensor]*y (coef = lr * param scale / clip denominator, per tensor),
  // m <- beta1*m + (1-beta1)*u, value -= m.
  virtual void adafactor_apply(const OptimChunk* chunks, int64_t n_chunks, const OptimTensor<T>* tensors,
                               const T* coef, const OptimStepScalars<T>* step, T beta1, T one_minus_beta1) = 0;
};

// The host implementation (OpenMP over chunks), on host memory.
template <typename T>
std::unique_ptr<OptimizerKernels<T>> make_cpu_optimizer_kernels();

// Sum of f(i) over [begin, end) in double, kept in 8 interleaved partial sums: a serial
// double accumulator is latency-bound (one add per ~4 cycles) and cannot be vectorised, this
// can. The grouping depends only on begin/end, so results stay independent of thread count.
template <typename F>
inline double lane_sum(int64_t begin, int64_t end, F&& f) {
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += f(i + k);
  double tail = 0.0;
  for (; i < end; ++i) tail += f(i);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail;
}

}  // namespace brt::kernels
