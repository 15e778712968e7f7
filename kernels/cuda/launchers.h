// Host-side entry points of the CUDA kernels (internal to kernels/cuda): each enqueues its
// kernels on `stream` and checks the launch. Shapes and conventions are backend.h's. Kernels
// that need scratch take it from `scratch` (the backend's arena, reset per call).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/device/device_arena.h"

namespace brt::kernels::cuda {

// ---- elementwise.cu ----
void launch_fill(float* x, int64_t n, float value, cudaStream_t stream);
void launch_copy(const float* x, int64_t n, float* y, cudaStream_t stream);
void launch_add_inplace(float* y, const float* x, int64_t n, cudaStream_t stream);
void launch_scale_inplace(float* x, int64_t n, float alpha, cudaStream_t stream);
void launch_add_rows_broadcast(float* out, const float* table, int rows_out, int rows_table,
                               int D, cudaStream_t stream);
void launch_relu_forward(const float* x, int64_t n, float* y, cudaStream_t stream);
void launch_relu_backward(const float* y, const float* dy, int64_t n, float* dx,
                          cudaStream_t stream);
// relu_backward with y held in bf16 (Backend::linear_relu_forward's y_for_products).
void launch_relu_backward_bf16(const void* y16, const float* dy, int64_t n, float* dx, cudaStream_t stream);
// y[i*ldy + j] (+)= x[i*ldx + j] for i < rows, j < cols (backend.h copy_2d).
void launch_copy_2d(const float* x, int64_t ldx, int rows, int64_t cols, float* y, int64_t ldy,
                    bool accumulate, cudaStream_t stream);
void launch_column_sum_accumulate(const float* dz, int n, int D, float* db, DeviceArena& scratch,
                                  cudaStream_t stream);
// dst[r, c] = bf16(src[r * ld + c]) for a rows x cols matrix; dst is packed (ld = cols).
void launch_convert_to_bf16(const float* src, int rows, int cols, int ld, void* dst,
                            cudaStream_t stream);

// ---- embedding.cu (model.md §1) ----
void launch_embedding_forward(const int32_t* tokens, int n, const float* table, int D,
                              float* out, cudaStream_t stream);
void launch_embedding_backward(const int32_t* tokens, int n, const float* dout, int D,
                               float* dtable, DeviceArena& scratch, cudaStream_t stream);

// ---- norms.cu (model.md §2, §3.1) ----
void launch_rmsnorm_forward(const float* x, const float* gamma, int n, int D, float* y,
                            float* rstd, cudaStream_t stream);
// y16: the normalised rows in bf16 (Backend::rmsnorm_forward_for_products).
void launch_rmsnorm_forward_bf16(const float* x, const float* gamma, int n, int D, void* y16, float* rstd,
                                 cudaStream_t stream);
void launch_rmsnorm_backward(const float* x, const float* gamma, const float* rstd,
                             const float* dy, int n, int D, float* dx, float* dgamma,
                             DeviceArena& scratch, cudaStream_t stream);
// kernels/backend.h rmsnorm_backward_residual.
void launch_rmsnorm_backward_residual(const float* x, const float* gamma, const float* rstd,
                                      const float* dy, const float* residual, bool accumulate, int n,
                                      int D, float* dx, float* dgamma, DeviceArena& scratch,
                                      cudaStream_t stream);
void launch_head_l2norm_forward(const float* x, int n, int H, int dh, float* y, float* rnorm,
                                cudaStream_t stream);
void launch_head_l2norm_backward(const float* y, const float* rnorm, const float* dy, int n,
                                 int H, int dh, float* dx, cudaStream_t stream);
// dx16: the input gradient in bf16 (Backend::head_l2norm_backward_for_product).
void launch_head_l2norm_backward_bf16(const float* y, const float* rnorm, const float* dy, int n, int H, int dh,
                                      void* dx16, cudaStream_t stream);

// ---- gates.cu (model.md §5.3) ----
void launch_fixed_gate_forward(const float* carry, const float* u, const float* bias, int n,
                               int D, float* out, cudaStream_t stream);
void launch_fixed_gate_backward(const float* carry, const float* u, const float* bias,
                                const float* dout, int n, int D, float* dcarry, float* du,
                                float* dbias, DeviceArena& scratch, cudaStream_t stream);
void launch_lstm_gate_forward(const float* carry, const float* u, const float* zf,
                              const float* zi, int n, int D, float* out, float* f, float* i,
                              cudaStream_t stream);
void launch_lstm_gate_backward(const float* carry, const float* u, const float* f,
                               const float* i, const float* dout, int n, int D, float* dcarry,
                               float* du, float* dzf, float* dzi, cudaStream_t stream);

// ---- xent.cu (model.md §1) ----
// Returns the device address of two doubles: the summed row losses and the first unmasked row
// whose target is outside [0, V) (-1 when none), in result_out or else in `scratch`; the
// caller reads both after synchronising. The gradient scale is *grad_scale_device when that is
// not null (a staged device scalar), else grad_scale.
const double* launch_softmax_xent(const float* logits, const int32_t* targets,
                                  const uint8_t* mask, int n, int V, float grad_scale,
                                  const float* grad_scale_device, float* dlogits, float* row_loss,
                                  DeviceArena& scratch, cudaStream_t stream,
                                  double* result_out = nullptr);

// ---- xent_split.cu (model.md §1 under tensor parallelism; backend.h xent_split_*) ----
void launch_xent_split_max(const float* logits, int n, int V, double* row_max,
                           cudaStream_t stream);
void launch_xent_split_sums(const float* logits, const int32_t* local_targets,
                            const uint8_t* mask, int n, int V, const double* row_max,
                            double* sum_exp, double* target_logit, cudaStream_t stream);
// Returns the device address (in `scratch`) of the summed row losses; read it after a sync.
const double* launch_xent_split_finish(const float* logits, const int32_t* local_targets,
                                       const uint8_t* mask, int n, int V, float grad_scale,
                                       const double* row_max, const double* sum_exp,
                                       const double* target_logit, float* dlogits,
                                       float* row_loss, DeviceArena& scratch,
                                       cudaStream_t stream);

// ---- window_attention.cu (model.md §3.2, §3.3) ----
// The T5 bucket of every distance 0..max_distance (t5_bucket on the host, model.md §3.3; 0 at
// distance 0): the backend uploads it once, so attention calls copy nothing from the host.
std::vector<int> t5_bucket_table(int max_distance);
constexpr int kT5TableDistances = 1 << 16;  // windows up to 65536 tokens
struct T5Buckets {
  const int* table = nullptr;  // [max_distance + 1] in device memory
  int max_distance = 0;
};
void launch_window_attention_forward(const WindowAttnDims& d, const float* q, const float* k,
                                     const float* v, const float* k_cache,
                                     const float* v_cache, const float* rel_bias,
                                     const float* scale, float* out, float* probs,
                                     const T5Buckets& buckets, DeviceArena& scratch,
                                     cudaStream_t stream);
// accumulate: dq, dk, dv += the gradients (false: written, their contents on entry ignored).
void launch_window_attention_backward(const WindowAttnDims& d, const float* q, const float* k,
                                      const float* v, const float* k_cache,
                                      const float* v_cache, const float* rel_bias,
                                      const float* scale, const float* probs,
                                      const float* dout, float* dq, float* dk, float* dv,
                                      float* drel_bias, float* dscale, bool accumulate,
                                      const T5Buckets& buckets, DeviceArena& scratch,
                                      cudaStream_t stream);
// The T5 bias by distance [H, W + 1] (0 at distance 0) and the bucket of each distance
// [W + 1] (shared by both paths): the bias built in scratch from rel_bias, the buckets the
// backend's table (throws when W is beyond it).
struct WindowBiasTables {
  const float* bias;
  const int* bucket;
};
WindowBiasTables window_bias_tables(const WindowAttnDims& d, const float* rel_bias,
                                    const T5Buckets& buckets, DeviceArena& scratch,
                                    cudaStream_t stream, const char* who);

// ---- attention_tc.cu: the same attention on the tensor cores (bf16 backend) ----
// Same contract as above except the probs content (raw scores and each row's log-sum-exp,
// private to this backward). Scratch: window_attention_tc_scratch_bytes(d).
std::size_t window_attention_tc_scratch_bytes(const WindowAttnDims& d);
void launch_window_attention_forward_tc(const WindowAttnDims& d, const float* q, const float* k,
                                        const float* v, const float* k_cache,
                                        const float* v_cache, const float* rel_bias,
                                        const float* scale, float* out, float* probs,
                                        const T5Buckets& buckets, cublasHandle_t handle,
                                        DeviceArena& scratch, cudaStream_t stream, void* out16 = nullptr);
// (out16, when not null: the output written there in bf16 instead of out, rounded to nearest even:
// Backend::window_attention_forward_for_products.)
// accumulate: dq, dk, dv += the gradients (false: written, their contents on entry ignored).
void launch_window_attention_backward_tc(const WindowAttnDims& d, const float* q, const float* k,
                                         const float* v, const float* k_cache,
                                         const float* v_cache, const float* rel_bias,
                                         const float* scale, const float* probs,
                                         const float* dout, float* dq, float* dk, float* dv,
                                         float* drel_bias, float* dscale, bool accumulate,
                                         const T5Buckets& buckets, cublasHandle_t handle,
                                         DeviceArena& scratch, cudaStream_t stream, void* dv16 = nullptr);
// (dv16, when not null: dv written there in bf16 instead, rounded to nearest even, whatever
// accumulate says: Backend::window_attention_backward_write_dv_for_product.)

// ---- cross_attention_tc.cu: cross-attention on the tensor cores (bf16 backend) ----
// Same contract as the fp32 launchers below except the probs content (raw scores, private).
std::size_t cross_attention_tc_scratch_bytes(const CrossAttnDims& d);
void launch_cross_attention_forward_tc(const CrossAttnDims& d, const float* q, const float* k,
                                       const float* v, const float* scale, float* out,
                                       float* probs, cublasHandle_t handle, DeviceArena& scratch,
                                       cudaStream_t stream);
void launch_cross_attention_backward_tc(const CrossAttnDims& d, const float* q, const float* k,
                                        const float* v, const float* scale, const float* probs,
                                        const float* dout, float* dq, float* dk, float* dv,
                                        float* dscale, cublasHandle_t handle, DeviceArena& scratch,
                                        cudaStream_t stream);

// ---- cross_attention.cu (model.md §3.4) ----
void launch_cross_attention_forward(const CrossAttnDims& d, const float* q, const float* k,
                                    const float* v, const float* scale, float* out,
                                    float* probs, cudaStream_t stream);
void launch_cross_attention_backward(const CrossAttnDims& d, const float* q, const float* k,
                                     const float* v, const float* scale, const float* probs,
                                     const float* dout, float* dq, float* dk, float* dv,
                                     float* dscale, DeviceArena& scratch, cudaStream_t stream);


// ---- ssm.cu (model.md §7.1, §7.3: the BST SSM besides its FFT convolution) ----
void launch_copy_rows(const float* src, int64_t src_stride, int64_t rows, int64_t width,
                      float* dst, int64_t dst_stride, cudaStream_t stream);
void launch_s4d_kernel_forward(const ssm::S4dDims& d, const ssm::S4dParams<float>& p,
                               float* kernel, DeviceArena& scratch, cudaStream_t stream);
void launch_s4d_kernel_backward(const ssm::S4dDims& d, const ssm::S4dParams<float>& p,
                                const float* dkernel, const ssm::S4dGrads<float>& g,
                                DeviceArena& scratch, cudaStream_t stream);
void launch_s4d_carry_update(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                             const float* u, double* state, cudaStream_t stream);
void launch_s4d_carry_apply(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                            const double* state, float* y, DeviceArena& scratch,
                            cudaStream_t stream);
void launch_s4d_carry_apply_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                                     const double* state, const uint8_t* active,
                                     const float* dy, const ssm::S4dGrads<float>& g,
                                     DeviceArena& scratch, cudaStream_t stream);

// ---- ssm/s4d_state_passing.cu (context parallelism's S4D state passing, kernels/ssm/s4d_state_passing.h) ----
void launch_s4d_state_advance(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p, const double* h,
                              double* x, bool adjoint, cudaStream_t stream);
void launch_s4d_state_apply_grad(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p, const float* dy,
                                 double* g, cudaStream_t stream);
void launch_s4d_state_advance_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p,
                                       const double* x_prev, const double* gnext, const ssm::S4dGrads<float>& g,
                                       DeviceArena& scratch, cudaStream_t stream);
void launch_s4d_summary_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<float>& p, const float* u,
                                 const double* dh, float* du, const ssm::S4dGrads<float>& g, DeviceArena& scratch,
                                 cudaStream_t stream);

// ---- implicit_filter.cu (model.md §7.1 `unstructured`: the filter network's ops) ----
void launch_sine_forward(const float* a, const float* freq, int n, int O, float* s,
                         cudaStream_t stream);
void launch_sine_backward(const float* a, const float* freq, const float* ds, int n, int O,
                          float* da, float* dfreq, DeviceArena& scratch, cudaStream_t stream);
void launch_implicit_filter_decay(float* x, const double* rate, int filters, int length,
                                  cudaStream_t stream);

// ---- fft_conv_kernels.cu (model.md §7.1; used by CudaFftConv, fft_conv.h) ----
// Planned row counts use the maxima (Fm features, Bm batch); rows past the call's B or F are
// written as zeros. Real rows have n_fft entries, spectra rows n_freq = n_fft/2 + 1 (float2).
struct FftConvShape {
  int B, C, L, F;    // this call
  int Bm, Fm;        // planned maxima
  int n_fft, n_freq;
};
// real[(b*Fm + f)][t] = u[b, t, f] for t < L, else 0.
void launch_fft_gather_input(const FftConvShape& s, const float* u, float* real,
                             cudaStream_t stream);
// real[(c*Fm + f)][t] = k[c, f, t] (+ dskip[c, f] at t = 0), zero padded.
void launch_fft_gather_kernel(const FftConvShape& s, const float* k, const float* dskip,
                              float* real, cudaStream_t stream);
// real[((b*C + c)*Fm + f)][t] = dy[b, c, t, f], zero padded.
void launch_fft_gather_output_grad(const FftConvShape& s, const float* dy, float* real,
                                   cudaStream_t stream);
// Y[(b*C + c)*Fm + f] = U[b*Fm + f] * K[c*Fm + f] (element-wise complex).
void launch_fft_multiply(const FftConvShape& s, const float2* U, const float2* K, float2* Y,
                         cudaStream_t stream);
// DU[b*Fm + f] = sum_c conj(K[c*Fm + f]) * DY[(b*C + c)*Fm + f]  (c in order);
// DK[c*Fm + f] = sum_b DY[(b*C + c)*Fm + f] * conj(U[b*Fm + f])  (b in order). Either may be null.
void launch_fft_correlate(const FftConvShape& s, const float2* U, const float2* K,
                          const float2* DY, float2* DU, float2* DK, cudaStream_t stream);
// y[b, c, t, f] = real[((b*C + c)*Fm + f)][t] / n_fft.
void launch_fft_scatter_output(const FftConvShape& s, const float* real, float* y,
                               cudaStream_t stream);
// du[b, t, f] += real[(b*Fm + f)][t] / n_fft.
void launch_fft_scatter_input_grad(const FftConvShape& s, const float* real, float* du,
                                   cudaStream_t stream);
// dk[c, f, t] += real[(c*Fm + f)][t] / n_fft; ddskip[c, f] += real[(c*Fm + f)][0] / n_fft
// (either may be null).
void launch_fft_scatter_kernel_grad(const FftConvShape& s, const float* real, float* dk,
                                    float* ddskip, cudaStream_t stream);

}  // namespace brt::kernels::cuda
