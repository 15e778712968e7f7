// CpuBackend<T>: the CPU implementation of kernels::Backend<T> (OpenBLAS gemm, OpenMP loops).
// Most code should use make_cpu_backend<T>() from kernels/backend.h; this header exists for
// tests and benchmarks that need to set CpuOptions.
//
// Threading contract: one CpuBackend serves one calling thread at a time and must not be
// called from inside an OpenMP parallel region (it owns per-thread scratch). For full BLAS
// speed on CPUs newer than OpenBLAS 0.3.21 knows, set OPENBLAS_CORETYPE (e.g. SkylakeX).
#pragma once

#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/workspace.h"
#include "kernels/implicit_filter.h"

namespace brt::kernels::cpu {

template <typename T>
class CpuBackend final : public Backend<T> {
 public:
  explicit CpuBackend(CpuOptions options = {}) : options_(options) {}
  const char* name() const override { return "cpu"; }
  Memory& memory() override { return host_memory(); }

  void gemm(Trans ta, Trans tb, int M, int N, int K, T alpha, const T* A, int lda, const T* B,
            int ldb, T beta, T* C, int ldc) override;

  void fill(T* x, int64_t n, T value) override { ElementwiseOps<T>::fill(x, n, value); }
  void copy(const T* x, int64_t n, T* y) override { ElementwiseOps<T>::copy(x, n, y); }
  void add_inplace(T* y, const T* x, int64_t n) override {
    ElementwiseOps<T>::add_inplace(y, x, n);
  }
  void scale_inplace(T* x, int64_t n, T alpha) override {
    ElementwiseOps<T>::scale_inplace(x, n, alpha);
  }
  void column_sum_accumulate(const T* dz, int n, int D, T* db) override {
    ElementwiseOps<T>::column_sum_accumulate(dz, n, D, db);
  }
  void add_rows_broadcast(T* out, const T* table, int rows_out, int rows_table,
                          int D) override {
    ElementwiseOps<T>::add_rows_broadcast(out, table, rows_out, rows_table, D);
  }

  void embedding_forward(const int32_t* tokens, int n, const T* table, int D,
                         T* out) override {
    ElementwiseOps<T>::embedding_forward(tokens, n, table, D, out);
  }
  void embedding_backward(const int32_t* tokens, int n, const T* dout, int D,
                          T* dtable) override {
    ElementwiseOps<T>::embedding_backward(tokens, n, dout, D, dtable);
  }

  void rmsnorm_forward(const T* x, const T* gamma, int n, int D, T* y, T* rstd) override {
    NormOps<T>::rmsnorm_forward(x, gamma, n, D, y, rstd);
  }
  void rmsnorm_backward(const T* x, const T* gamma, const T* rstd, const T* dy, int n, int D,
                        T* dx, T* dgamma) override {
    NormOps<T>::rmsnorm_backward(x, gamma, rstd, dy, n, D, dx, dgamma);
  }
  void rmsnorm_backward_residual(const T* x, const T* gamma, const T* rstd, const T* dy, const T* residual,
                                 bool accumulate, int n, int D, T* dx, T* dgamma) override {
    NormOps<T>::rmsnorm_backward_residual(x, gamma, rstd, dy, residual, accumulate, n, D, dx, dgamma);
  }
  void head_l2norm_forward(const T* x, int n, int H, int dh, T* y, T* rnorm) override {
    NormOps<T>::head_l2norm_forward(x, n, H, dh, y, rnorm);
  }
  void head_l2norm_backward(const T* y, const T* rnorm, const T* dy, int n, int H, int dh,
                            T* dx) override {
    NormOps<T>::head_l2norm_backward(y, rnorm, dy, n, H, dh, dx);
  }

  void window_attention_forward(const WindowAttnDims& d, const T* q, const T* k, const T* v,
                                const T* k_cache, const T* v_cache, const T* rel_bias,
                                const T* scale, T* out, T* probs) override {
    WindowAttentionOps<T>::forward(workspace_, options_, d, q, k, v, k_cache, v_cache,
                                   rel_bias, scale, out, probs);
  }
  void window_attention_backward(const WindowAttnDims& d, const T* q, const T* k, const T* v,
                                 const T* k_cache, const T* v_cache, const T* rel_bias,
                                 const T* scale, const T* probs, const T* dout, T* dq, T* dk,
                                 T* dv, T* drel_bias, T* dscale) override {
    WindowAttentionOps<T>::backward(workspace_, options_, d, q, k, v, k_cache, v_cache,
                                    rel_bias, scale, probs, dout, dq, dk, dv, drel_bias,
                                    dscale);
  }

  void cross_attention_forward(const CrossAttnDims& d, const T* q, const T* k, const T* v,
                               const T* scale, T* out, T* probs) override {
    CrossAttentionOps<T>::forward(options_, d, q, k, v, scale, out, probs);
  }
  void cross_attention_backward(const CrossAttnDims& d, const T* q, const T* k, const T* v,
                                const T* scale, const T* probs, const T* dout, T* dq, T* dk,
                                T* dv, T* dscale) override {
    CrossAttentionOps<T>::backward(workspace_, options_, d, q, k, v, scale, probs, dout, dq,
                                   dk, dv, dscale);
  }

  void relu_forward(const T* x, int64_t n, T* y) override {
    ElementwiseOps<T>::relu_forward(x, n, y);
  }
  void relu_backward(const T* y, const T* dy, int64_t n, T* dx) override {
    ElementwiseOps<T>::relu_backward(y, dy, n, dx);
  }

  void fixed_gate_forward(const T* carry, const T* u, const T* bias, int n, int D,
                          T* out) override {
    GateOps<T>::fixed_forward(carry, u, bias, n, D, out);
  }
  void fixed_gate_backward(const T* carry, const T* u, const T* bias, const T* dout, int n,
                           int D, T* dcarry, T* du, T* dbias) override {
    GateOps<T>::fixed_backward(carry, u, bias, dout, n, D, dcarry, du, dbias);
  }
  void lstm_gate_forward(const T* carry, const T* u, const T* zf, const T* zi, int n, int D,
                         T* out, T* f, T* i) override {
    GateOps<T>::lstm_forward(carry, u, zf, zi, n, D, out, f, i);
  }
  void lstm_gate_backward(const T* carry, const T* u, const T* f, const T* i, const T* dout,
                          int n, int D, T* dcarry, T* du, T* dzf, T* dzi) override {
    GateOps<T>::lstm_backward(carry, u, f, i, dout, n, D, dcarry, du, dzf, dzi);
  }

  void copy_2d(const T* x, int64_t ldx, int rows, int64_t cols, T* y, int64_t ldy,
               bool accumulate) override {
    ElementwiseOps<T>::copy_2d(x, ldx, rows, cols, y, ldy, accumulate);
  }

  void xent_split_max(const T* logits, int n, int V, double* row_max) override {
    SplitXentOps<T>::row_max(logits, n, V, row_max);
  }
  void xent_split_sums(const T* logits, const int32_t* local_targets, const uint8_t* mask, int n,
                       int V, const double* row_max, double* sum_exp,
                       double* target_logit) override {
    SplitXentOps<T>::sums(logits, local_targets, mask, n, V, row_max, sum_exp, target_logit);
  }
  double xent_split_finish(const T* logits, const int32_t* local_targets, const uint8_t* mask,
                           int n, int V, T grad_scale, const double* row_max,
                           const double* sum_exp, const double* target_logit, T* dlogits,
                           T* row_loss) override {
    return SplitXentOps<T>::finish(workspace_, logits, local_targets, mask, n, V, grad_scale,
                                   row_max, sum_exp, target_logit, dlogits, row_loss);
  }

  double softmax_xent_forward_backward(const T* logits, const int32_t* targets,
                                       const uint8_t* mask, int n, int V, T grad_scale,
                                       T* dlogits, T* row_loss) override {
    return XentOps<T>::forward_backward(workspace_, logits, targets, mask, n, V, grad_scale,
                                        dlogits, row_loss);
  }

  // model.md §7 (cpu_backend.cpp): FFTW convolution (kernels/ssm/fft_conv.h) and the S4D carry.
  std::unique_ptr<FftConvolver<T>> make_fft_conv(int length, int channels, int max_batch,
                                                 int max_features) override;
  void copy_rows(const T* src, int64_t src_stride, int64_t rows, int64_t width, T* dst,
                 int64_t dst_stride) override;
  void s4d_kernel_forward(const ssm::S4dDims& d, const ssm::S4dParams<T>& p,
                          T* kernel) override {
    ssm::s4d_kernel_forward(d, p, kernel);
  }
  void s4d_kernel_backward(const ssm::S4dDims& d, const ssm::S4dParams<T>& p, const T* dkernel,
                           const ssm::S4dGrads<T>& g) override {
    ssm::s4d_kernel_backward(d, p, dkernel, g);
  }
  void s4d_carry_update(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const T* u,
                        double* state) override {
    ssm::s4d_carry_update(d, p, u, state);
  }
  void s4d_carry_apply(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                       const double* state, T* y) override {
    ssm::s4d_carry_apply(d, p, state, y);
  }
  void s4d_carry_apply_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                const double* state, const uint8_t* active, const T* dy,
                                const ssm::S4dGrads<T>& g) override {
    ssm::s4d_carry_apply_backward(d, p, state, active, dy, g);
  }
  void s4d_state_advance(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const double* h,
                         double* x, bool adjoint) override {
    ssm::s4d_state_advance(d, p, h, x, adjoint);
  }
  void s4d_state_apply_grad(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const T* dy,
                            double* g) override {
    ssm::s4d_state_apply_grad(d, p, dy, g);
  }
  void s4d_state_advance_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                  const double* x_prev, const double* gnext,
                                  const ssm::S4dGrads<T>& g) override {
    ssm::s4d_state_advance_backward(d, p, x_prev, gnext, g);
  }
  void s4d_summary_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const T* u,
                            const double* dh, T* du, const ssm::S4dGrads<T>& g) override {
    ssm::s4d_summary_backward(d, p, u, dh, du, g);
  }
  // The implicit filter network's ops (kernels/implicit_filter.cpp).
  void sine_forward(const T* a, const T* freq, int n, int O, T* s) override {
    ssm::sine_forward(a, freq, n, O, s);
  }
  void sine_backward(const T* a, const T* freq, const T* ds, int n, int O, T* da,
                     T* dfreq) override {
    ssm::sine_backward(a, freq, ds, n, O, da, dfreq);
  }
  void implicit_filter_decay(T* x, const double* rate, int filters, int length) override {
    ssm::implicit_filter_decay(x, rate, filters, length);
  }

 private:
  CpuOptions options_;
  Workspace<T> workspace_;
};

// "OpenBLAS <config> | core <name> | OpenMP build: yes/no", for run logs. The core is the
// kernel set OpenBLAS picked at load time; "Prescott" on an AVX-512 machine means it did not
// recognise the CPU and OPENBLAS_CORETYPE should be set (e.g. SkylakeX), which must happen
// before the process starts.
std::string blas_description();

extern template class CpuBackend<float>;
extern template class CpuBackend<double>;

}  // namespace brt::kernels::cpu
