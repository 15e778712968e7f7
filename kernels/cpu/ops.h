// The CPU kernels, grouped by concern. Each group is a struct of static functions so that one
// explicit instantiation per source file (float and double) covers all of its members.
// Shapes and semantics are exactly those documented in kernels/backend.h.
#pragma once

#include <cstdint>

#include "kernels/backend.h"
#include "kernels/cpu/workspace.h"

namespace brt::kernels::cpu {

// Tunables of the CPU backend (defaults measured on the dev machine; tests shrink them to
// exercise multi-panel code on small shapes).
struct CpuOptions {
  // Query rows per window-attention tile. A panel of c rows computes c x (W + c - 1) logits
  // of which c x W are unmasked, so smaller panels waste less; larger ones run gemm faster.
  // The actual panel is the largest divisor of W not above this (W itself if none is close).
  int attention_panel_rows = 128;
  // Query rows per cross-attention tile.
  int cross_panel_rows = 128;
};

template <typename T>
struct ElementwiseOps {
  static void fill(T* x, int64_t n, T value);
  static void copy(const T* x, int64_t n, T* y);
  static void add_inplace(T* y, const T* x, int64_t n);
  static void scale_inplace(T* x, int64_t n, T alpha);
  static void column_sum_accumulate(const T* dz, int n, int D, T* db);
  static void add_rows_broadcast(T* out, const T* table, int rows_out, int rows_table, int D);
  static void embedding_forward(const int32_t* tokens, int n, const T* table, int D, T* out);
  static void embedding_backward(const int32_t* tokens, int n, const T* dout, int D, T* dtable);
  static void relu_forward(const T* x, int64_t n, T* y);
  static void relu_backward(const T* y, const T* dy, int64_t n, T* dx);
  static void copy_2d(const T* x, int64_t ldx, int rows, int64_t cols, T* y, int64_t ldy,
                      bool accumulate);
};

template <typename T>
struct NormOps {
  static void rmsnorm_forward(const T* x, const T* gamma, int n, int D, T* y, T* rstd);
  static void rmsnorm_backward(const T* x, const T* gamma, const T* rstd, const T* dy, int n,
                               int D, T* dx, T* dgamma);
  static void rmsnorm_backward_residual(const T* x, const T* gamma, const T* rstd, const T* dy,
                                        const T* residual, bool accumulate, int n, int D, T* dx,
                                        T* dgamma);
  static void head_l2norm_forward(const T* x, int n, int H, int dh, T* y, T* rnorm);
  static void head_l2norm_backward(const T* y, const T* rnorm, const T* dy, int n, int H,
                                   int dh, T* dx);
};

template <typename T>
struct GateOps {
  static void fixed_forward(const T* carry, const T* u, const T* bias, int n, int D, T* out);
  static void fixed_backward(const T* carry, const T* u, const T* bias, const T* dout, int n,
                             int D, T* dcarry, T* du, T* dbias);
  static void lstm_forward(const T* carry, const T* u, const T* zf, const T* zi, int n, int D,
                           T* out, T* f, T* i);
  static void lstm_backward(const T* carry, const T* u, const T* f, const T* i, const T* dout,
                            int n, int D, T* dcarry, T* du, T* dzf, T* dzi);
};

template <typename T>
struct XentOps {
  static double forward_backward(Workspace<T>& ws, const T* logits, const int32_t* targets,
                                 const uint8_t* mask, int n, int V, T grad_scale, T* dlogits,
                                 T* row_loss);
};

// The vocabulary-parallel cross-entropy's three phases (backend.h, xent_split_*).
template <typename T>
struct SplitXentOps {
  static void row_max(const T* logits, int n, int V, double* row_max);
  static void sums(const T* logits, const int32_t* local_targets, const uint8_t* mask, int n,
                   int V, const double* row_max, double* sum_exp, double* target_logit);
  static double finish(Workspace<T>& ws, const T* logits, const int32_t* local_targets,
                       const uint8_t* mask, int n, int V, T grad_scale, const double* row_max,
                       const double* sum_exp, const double* target_logit, T* dlogits,
                       T* row_loss);
};

template <typename T>
struct WindowAttentionOps {
  static void forward(Workspace<T>& ws, const CpuOptions& opt, const WindowAttnDims& d,
                      const T* q, const T* k, const T* v, const T* k_cache, const T* v_cache,
                      const T* rel_bias, const T* scale, T* out, T* probs);
  static void backward(Workspace<T>& ws, const CpuOptions& opt, const WindowAttnDims& d,
                       const T* q, const T* k, const T* v, const T* k_cache, const T* v_cache,
                       const T* rel_bias, const T* scale, const T* probs, const T* dout, T* dq,
                       T* dk, T* dv, T* drel_bias, T* dscale);
};

template <typename T>
struct CrossAttentionOps {
  static void forward(const CpuOptions& opt, const CrossAttnDims& d, const T* q, const T* k,
                      const T* v, const T* scale, T* out, T* probs);
  static void backward(Workspace<T>& ws, const CpuOptions& opt, const CrossAttnDims& d,
                       const T* q, const T* k, const T* v, const T* scale, const T* probs,
                       const T* dout, T* dq, T* dk, T* dv, T* dscale);
};

#define BRT_CPU_EXTERN_OPS(Ops)        \
  extern template struct Ops<float>;  \
  extern template struct Ops<double>;
BRT_CPU_EXTERN_OPS(ElementwiseOps)
BRT_CPU_EXTERN_OPS(NormOps)
BRT_CPU_EXTERN_OPS(GateOps)
BRT_CPU_EXTERN_OPS(XentOps)
BRT_CPU_EXTERN_OPS(SplitXentOps)
BRT_CPU_EXTERN_OPS(WindowAttentionOps)
BRT_CPU_EXTERN_OPS(CrossAttentionOps)
#undef BRT_CPU_EXTERN_OPS

}  // namespace brt::kernels::cpu
