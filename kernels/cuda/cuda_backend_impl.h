// CudaBackend: the CUDA implementation of kernels::Backend<float> (internal; use
// make_cuda_backend from cuda_backend.h). Element-wise, norm, gate, embedding, xent and
// attention kernels are hand-written (launchers.h); gemm goes through cuBLAS.
//
// Threading and streams: one CudaBackend serves one host thread and one stream. Its scratch
// arena is reset at the start of every call; that is safe because every kernel of the call is
// enqueued on the same in-order stream as the previous call's.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device/device_arena.h"
#include "kernels/cuda/device/device_memory.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/device/stream_wait.h"
#include "kernels/cuda/bf16_activations.h"
#include "kernels/cuda/gemm/epilogue_gemm.h"

#include <memory>
#include <unordered_map>

namespace brt::kernels::cuda {
class CufftWorkArea;  // fft_conv.h
}

namespace brt::kernels::cuda {

class CudaBackend final : public Backend<float> {
 public:
  explicit CudaBackend(const CudaOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  const char* name() const override { return "cuda"; }
  Memory& memory() override { return *memory_; }
  cudaStream_t stream() const { return stream_; }
  const CudaOptions& options() const { return options_; }
  std::string epilogues() const { return epilogue_gemm_ != nullptr ? epilogue_gemm_->describe() : ""; }
  bool holds_bf16(const float* p, int rows, int cols) const { return bf16_activations_.holds(p, rows, cols, cols); }
  void synchronize();
  // Host waits poll the stream and call `watch` (cuda_backend.h set_wait_watch).
  void set_wait_watch(WaitWatch watch) { waits_->watch = std::move(watch); }

  void gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A, int lda,
            const float* B, int ldb, float beta, float* C, int ldc) override;
  // bf16: dy rounded once for both products (gemm would round it for each).
  void linear_backward(const float* x, int n, int in, const float* w, int out, const float* dy, float* dx,
                       float* dw, float dx_beta) override;
  // bf16: rounds [values, values + n) into the weight shadow (CudaOptions::bf16_weight_shadow).
  void weights_fixed(const float* values, int64_t n) override;
  // bf16: x rounded once for all the products.
  void linear_forward_shared(const float* x, int n, int in, int count, const float* const* w, int out,
                             float* const* y) override;
  // bf16: the ReLU and its gradient in cuBLASLt epilogues (gemm/epilogue_gemm.h) where it has
  // algorithms for them, else the products and the ReLU kernels.
  void linear_relu_forward(const float* x, int n, int in, const float* w, int out, float* y, void* mask,
                           bool y_for_products) override;
  // bf16: residual as the product's C through cuBLASLt (gemm/epilogue_gemm.h), where it has an
  // algorithm; else the copy and cublasGemmEx.
  void linear_forward_residual(const float* x, int n, int in, const float* w, int out, const float* residual,
                               float* y) override;
  // bf16, the mask from the epilogue and no dm_extra: DRELU writes dm in bf16, which the W1
  // products read as it is; otherwise the two calls (dm in fp32).
  void mlp_products_backward(const float* x, const float* w1, const float* m, const void* mask, int n, int in,
                             int hidden, const float* w2, int out, const float* du, const float* dm_extra, float* dm,
                             float* dx, float* dw1, float* dw2) override;
  void relu_linear_backward(const float* x, const void* mask, int n, int in, const float* w, int out, const float* dy,
                            const float* dx_add, float* dx, float* dw) override;

  void fill(float* x, int64_t n, float value) override { launch_fill(x, n, value, stream_); }
  void copy(const float* x, int64_t n, float* y) override { launch_copy(x, n, y, stream_); }
  void add_inplace(float* y, const float* x, int64_t n) override {
    launch_add_inplace(y, x, n, stream_);
  }
  void scale_inplace(float* x, int64_t n, float alpha) override {
    launch_scale_inplace(x, n, alpha, stream_);
  }
  void column_sum_accumulate(const float* dz, int n, int D, float* db) override {
    launch_column_sum_accumulate(dz, n, D, db, scratch(), stream_);
  }
  void add_rows_broadcast(float* out, const float* table, int rows_out, int rows_table,
                          int D) override {
    launch_add_rows_broadcast(out, table, rows_out, rows_table, D, stream_);
  }

  void embedding_forward(const int32_t* tokens, int n, const float* table, int D,
                         float* out) override {
    launch_embedding_forward(tokens, n, table, D, out, stream_);
  }
  void embedding_backward(const int32_t* tokens, int n, const float* dout, int D,
                          float* dtable) override {
    launch_embedding_backward(tokens, n, dout, D, dtable, scratch(), stream_);
  }

  void rmsnorm_forward(const float* x, const float* gamma, int n, int D, float* y,
                       float* rstd) override {
    launch_rmsnorm_forward(x, gamma, n, D, y, rstd, stream_);
    bf16_activations_.release(y);
  }
  // bf16: y written in bf16 and held for the products (bf16_activations.h).
  void rmsnorm_forward_for_products(const float* x, const float* gamma, int n, int D, float* y,
                                    float* rstd) override {
    if (options_.precision != Precision::kBf16) {
      rmsnorm_forward(x, gamma, n, D, y, rstd);
      return;
    }
    launch_rmsnorm_forward_bf16(x, gamma, n, D, y, rstd, stream_);
    if (n > 0 && D > 0) bf16_activations_.hold(y, n, D);
  }
  void rmsnorm_backward(const float* x, const float* gamma, const float* rstd, const float* dy,
                        int n, int D, float* dx, float* dgamma) override {
    launch_rmsnorm_backward(x, gamma, rstd, dy, n, D, dx, dgamma, scratch(), stream_);
  }
  void rmsnorm_backward_residual(const float* x, const float* gamma, const float* rstd, const float* dy,
                                 const float* residual, bool accumulate, int n, int D, float* dx,
                                 float* dgamma) override {
    launch_rmsnorm_backward_residual(x, gamma, rstd, dy, residual, accumulate, n, D, dx, dgamma, scratch(),
                                     stream_);
  }
  void head_l2norm_forward(const float* x, int n, int H, int dh, float* y,
                           float* rnorm) override {
    launch_head_l2norm_forward(x, n, H, dh, y, rnorm, stream_);
  }
  void head_l2norm_backward(const float* y, const float* rnorm, const float* dy, int n, int H,
                            int dh, float* dx) override {
    launch_head_l2norm_backward(y, rnorm, dy, n, H, dh, dx, stream_);
    bf16_activations_.release(dx);
  }
  // bf16: dx written in bf16 and held for the one linear_backward that reads it as dy.
  void head_l2norm_backward_for_product(const float* y, const float* rnorm, const float* dy, int n, int H,
                                        int dh, float* dx) override {
    if (options_.precision != Precision::kBf16 || n <= 0 || H <= 0 || dh <= 0) {
      head_l2norm_backward(y, rnorm, dy, n, H, dh, dx);
      return;
    }
    launch_head_l2norm_backward_bf16(y, rnorm, dy, n, H, dh, dx, stream_);
    bf16_activations_.hold(dx, n, int64_t(H) * dh);
  }

  void window_attention_forward(const WindowAttnDims& d, const float* q, const float* k,
                                const float* v, const float* k_cache, const float* v_cache,
                                const float* rel_bias, const float* scale, float* out,
                                float* probs) override {
    // bf16: the score and value products on the tensor cores (attention_tc.cu); fp32: the
    // exact fused kernels.
    if (options_.precision == Precision::kBf16)
      launch_window_attention_forward_tc(d, q, k, v, k_cache, v_cache, rel_bias, scale, out,
                                         probs, t5_buckets(), cublas_, scratch(), stream_);
    else
      launch_window_attention_forward(d, q, k, v, k_cache, v_cache, rel_bias, scale, out, probs,
                                      t5_buckets(), scratch(), stream_);
    bf16_activations_.release(out);
  }
  // bf16: out written in bf16 by the tensor-core pass and held for the products.
  void window_attention_forward_for_products(const WindowAttnDims& d, const float* q, const float* k,
                                             const float* v, const float* k_cache, const float* v_cache,
                                             const float* rel_bias, const float* scale, float* out,
                                             float* probs) override {
    if (options_.precision != Precision::kBf16) {
      window_attention_forward(d, q, k, v, k_cache, v_cache, rel_bias, scale, out, probs);
      return;
    }
    launch_window_attention_forward_tc(d, q, k, v, k_cache, v_cache, rel_bias, scale, out, probs, t5_buckets(),
                                       cublas_, scratch(), stream_, out);
    const int64_t rows = int64_t(d.batch) * d.seq;
    if (rows > 0 && d.width() > 0) bf16_activations_.hold(out, rows, d.width());
  }
  void window_attention_backward(const WindowAttnDims& d, const float* q, const float* k,
                                 const float* v, const float* k_cache, const float* v_cache,
                                 const float* rel_bias, const float* scale, const float* probs,
                                 const float* dout, float* dq, float* dk, float* dv,
                                 float* drel_bias, float* dscale) override {
    window_backward(d, q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout, dq, dk, dv, drel_bias, dscale, true);
  }
  // Both precisions' kernels write dq, dk, dv as their last step (no fills, no reads of them).
  void window_attention_backward_write(const WindowAttnDims& d, const float* q, const float* k, const float* v,
                                       const float* k_cache, const float* v_cache, const float* rel_bias,
                                       const float* scale, const float* probs, const float* dout, float* dq,
                                       float* dk, float* dv, float* drel_bias, float* dscale) override {
    window_backward(d, q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout, dq, dk, dv, drel_bias, dscale, false);
  }
  // bf16: dv written in bf16 by the tensor-core pass and held for the one linear_backward that
  // reads it as dy.
  void window_attention_backward_write_dv_for_product(const WindowAttnDims& d, const float* q, const float* k,
                                                      const float* v, const float* k_cache, const float* v_cache,
                                                      const float* rel_bias, const float* scale, const float* probs,
                                                      const float* dout, float* dq, float* dk, float* dv,
                                                      float* drel_bias, float* dscale) override {
    const bool bf16 = options_.precision == Precision::kBf16;
    window_backward(d, q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout, dq, dk, dv, drel_bias, dscale, false,
                    bf16);
    const int64_t rows = int64_t(d.batch) * d.seq;
    if (bf16 && rows > 0 && d.width() > 0) bf16_activations_.hold(dv, rows, d.width());
  }
  // The window attention's backward in this precision's kernels; accumulate: dq, dk, dv += it.
  // dv_bf16 (bf16 only): dv written in bf16.
  void window_backward(const WindowAttnDims& d, const float* q, const float* k, const float* v,
                       const float* k_cache, const float* v_cache, const float* rel_bias, const float* scale,
                       const float* probs, const float* dout, float* dq, float* dk, float* dv, float* drel_bias,
                       float* dscale, bool accumulate, bool dv_bf16 = false) {
    bf16_activations_.release(dv);
    if (options_.precision == Precision::kBf16)
      launch_window_attention_backward_tc(d, q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout, dq, dk, dv,
                                          drel_bias, dscale, accumulate, t5_buckets(), cublas_, scratch(), stream_,
                                          dv_bf16 ? dv : nullptr);
    else
      launch_window_attention_backward(d, q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout, dq, dk, dv,
                                       drel_bias, dscale, accumulate, t5_buckets(), scratch(), stream_);
  }

  void cross_attention_forward(const CrossAttnDims& d, const float* q, const float* k,
                               const float* v, const float* scale, float* out,
                               float* probs) override {
    if (options_.precision == Precision::kBf16)
      launch_cross_attention_forward_tc(d, q, k, v, scale, out, probs, cublas_, scratch(), stream_);
    else
      launch_cross_attention_forward(d, q, k, v, scale, out, probs, stream_);
  }
  void cross_attention_backward(const CrossAttnDims& d, const float* q, const float* k,
                                const float* v, const float* scale, const float* probs,
                                const float* dout, float* dq, float* dk, float* dv,
                                float* dscale) override {
    if (options_.precision == Precision::kBf16)
      launch_cross_attention_backward_tc(d, q, k, v, scale, probs, dout, dq, dk, dv, dscale, cublas_,
                                         scratch(), stream_);
    else
      launch_cross_attention_backward(d, q, k, v, scale, probs, dout, dq, dk, dv, dscale,
                                    scratch(), stream_);
  }

  void relu_forward(const float* x, int64_t n, float* y) override {
    launch_relu_forward(x, n, y, stream_);
  }
  void relu_backward(const float* y, const float* dy, int64_t n, float* dx) override {
    launch_relu_backward(y, dy, n, dx, stream_);
  }

  void fixed_gate_forward(const float* carry, const float* u, const float* bias, int n, int D,
                          float* out) override {
    launch_fixed_gate_forward(carry, u, bias, n, D, out, stream_);
  }
  void fixed_gate_backward(const float* carry, const float* u, const float* bias,
                           const float* dout, int n, int D, float* dcarry, float* du,
                           float* dbias) override {
    launch_fixed_gate_backward(carry, u, bias, dout, n, D, dcarry, du, dbias, scratch(),
                               stream_);
  }
  void lstm_gate_forward(const float* carry, const float* u, const float* zf, const float* zi,
                         int n, int D, float* out, float* f, float* i) override {
    launch_lstm_gate_forward(carry, u, zf, zi, n, D, out, f, i, stream_);
  }
  void lstm_gate_backward(const float* carry, const float* u, const float* f, const float* i,
                          const float* dout, int n, int D, float* dcarry, float* du, float* dzf,
                          float* dzi) override {
    launch_lstm_gate_backward(carry, u, f, i, dout, n, D, dcarry, du, dzf, dzi, stream_);
  }

  void copy_2d(const float* x, int64_t ldx, int rows, int64_t cols, float* y, int64_t ldy,
               bool accumulate) override {
    launch_copy_2d(x, ldx, rows, cols, y, ldy, accumulate, stream_);
  }

  void xent_split_max(const float* logits, int n, int V, double* row_max) override {
    launch_xent_split_max(logits, n, V, row_max, stream_);
  }
  void xent_split_sums(const float* logits, const int32_t* local_targets, const uint8_t* mask,
                       int n, int V, const double* row_max, double* sum_exp,
                       double* target_logit) override {
    launch_xent_split_sums(logits, local_targets, mask, n, V, row_max, sum_exp, target_logit,
                           stream_);
  }
  double xent_split_finish(const float* logits, const int32_t* local_targets,
                           const uint8_t* mask, int n, int V, float grad_scale,
                           const double* row_max, const double* sum_exp,
                           const double* target_logit, float* dlogits,
                           float* row_loss) override;

  double softmax_xent_forward_backward(const float* logits, const int32_t* targets,
                                       const uint8_t* mask, int n, int V, float grad_scale,
                                       float* dlogits, float* row_loss) override;
  // The same kernels, the scale read from and the sum and bad row written to device memory:
  // no copy, no wait (capturable).
  void softmax_xent_forward_backward_deferred(const float* logits, const int32_t* targets,
                                              const uint8_t* mask, int n, int V,
                                              const float* grad_scale, float* dlogits,
                                              float* row_loss, double* result) override {
    launch_softmax_xent(logits, targets, mask, n, V, 0.0f, grad_scale, dlogits, row_loss,
                        scratch(), stream_, result);
  }

  // model.md §7 (ssm.cu; the convolution is a CudaFftConv on this stream, cuda_backend.cpp).
  std::unique_ptr<FftConvolver<float>> make_fft_conv(int length, int channels, int max_batch,
                                                     int max_features) override;
  void copy_rows(const float* src, int64_t src_stride, int64_t rows, int64_t width, float* dst,
                 int64_t dst_stride) override {
    launch_copy_rows(src, src_stride, rows, width, dst, dst_stride, stream_);
  }
  void s4d_kernel_forward(const ssm::S4dDims& d, const ssm::S4dParams<float>& p,
                          float* kernel) override {
    launch_s4d_kernel_forward(d, p, kernel, scratch(), stream_);
  }
  void s4d_kernel_backward(const ssm::S4dDims& d, const ssm::S4dParams<float>& p,
                           const float* dkernel, const ssm::S4dGrads<float>& g) override {
    launch_s4d_kernel_backward(d, p, dkernel, g, scratch(), stream_);
  }
  void s4d_carry_update(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                        const float* u, double* state) override {
    launch_s4d_carry_update(d, p, u, state, stream_);
  }
  void s4d_carry_apply(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                       const double* state, float* y) override {
    launch_s4d_carry_apply(d, p, state, y, scratch(), stream_);
  }
  void s4d_carry_apply_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                                const double* state, const uint8_t* active, const float* dy,
                                const ssm::S4dGrads<float>& g) override {
    launch_s4d_carry_apply_backward(d, p, state, active, dy, g, scratch(), stream_);
  }
  // Context parallelism's state passing (ssm/s4d_state_passing.cu), on the stream.
  void s4d_state_advance(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                         const double* h, double* x, bool adjoint) override {
    launch_s4d_state_advance(d, p, h, x, adjoint, stream_);
  }
  void s4d_state_apply_grad(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                            const float* dy, double* g) override {
    launch_s4d_state_apply_grad(d, p, dy, g, stream_);
  }
  void s4d_state_advance_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                                  const double* x_prev, const double* gnext,
                                  const ssm::S4dGrads<float>& g) override {
    launch_s4d_state_advance_backward(d, p, x_prev, gnext, g, scratch(), stream_);
  }
  void s4d_summary_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                            const float* u, const double* dh, float* du,
                            const ssm::S4dGrads<float>& g) override {
    launch_s4d_summary_backward(d, p, u, dh, du, g, scratch(), stream_);
  }
  void sine_forward(const float* a, const float* freq, int n, int O, float* s) override {
    launch_sine_forward(a, freq, n, O, s, stream_);
  }
  void sine_backward(const float* a, const float* freq, const float* ds, int n, int O, float* da,
                     float* dfreq) override {
    launch_sine_backward(a, freq, ds, n, O, da, dfreq, scratch(), stream_);
  }
  void implicit_filter_decay(float* x, const double* rate, int filters, int length) override {
    launch_implicit_filter_decay(x, rate, filters, length, stream_);
  }

 private:
  void release_handles() noexcept;
  [[noreturn]] void throw_bad_target(const int32_t* targets, int64_t row, int V);
  // Row-major C = alpha·op(A)·op(B) + beta·C on the tensor cores from packed bf16 operands
  // (a16 with a_cols columns as stored, b16 likewise), fp32 accumulation and output.
  void gemm_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, const void* a16, int a_cols, const void* b16,
                 int b_cols, float beta, float* C, int ldc);
  // Operand p ([rows, cols], row stride ld) in bf16 for a product: its slice of the weight
  // shadow where it reads one (kernels/cuda/weight_shadow.h), else rounded now into dst
  // (packed, ld = cols). Either way a product reads it with ld = cols.
  const void* bf16_operand(const float* p, int rows, int cols, int ld, void* dst);
  // A linear layer's backward in bf16: dy [n, out] rounded once into the scratch arena (or, held
  // in bf16 by head_l2norm_backward_for_product, read as it is and let go), and one buffer for
  // w [in, out] (unless its shadow is read) then x [n, in] (stream order: the dx product has read
  // w's copy before x's conversion overwrites it).
  struct BackwardBf16 {
    const void* dy16;
    void* other16;
  };
  BackwardBf16 backward_bf16(const float* dy, int n, int in, int out);
  DeviceArena& scratch() {
    scratch_.reset();
    return scratch_;
  }

  T5Buckets t5_buckets() const { return {static_cast<const int*>(t5_table_.base()), kT5TableDistances}; }

  CudaOptions options_;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  cublasHandle_t cublas_ = nullptr;
  DeviceArena cublas_workspace_;
  DeviceArena scratch_;
  DeviceArena t5_table_;  // t5_bucket_table(kT5TableDistances), uploaded at construction
  DeviceArena weight_shadow_;         // bf16 copy of the weights (weights_fixed), grown on demand
  const float* weights_ = nullptr;    // the weights it copies, or null: no shadow
  int64_t weights_n_ = 0;
  std::unique_ptr<EpilogueGemm> epilogue_gemm_;  // bf16 only
  Bf16Activations bf16_activations_;  // linear_relu_forward's y_for_products, until the model's end
  std::unordered_map<const void*, bool> relu_masks_;    // mask -> written by the epilogue
  std::unique_ptr<DeviceMemory> memory_;  // on stream_
  std::shared_ptr<CufftWorkArea> fft_work_;  // shared by this backend's convolvers (made lazily)
  std::shared_ptr<WaitWatchSlot> waits_ = std::make_shared<WaitWatchSlot>();  // shared with memory_
};

}  // namespace brt::kernels::cuda
