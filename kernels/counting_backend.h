// A backend that counts what each call does: its floating-point operations, the bytes it reads
// and writes and one launch, by kernel class. Alone (over meta memory, kernels/meta_memory.h)
// it runs nothing, and takes one whole training step of a model at its real shapes
// (core::Model::device_work) on any machine in milliseconds, so the planner can predict a
// device's step per component from counts instead of an assumed efficiency (launch/plan/
// counted_step.h); the planner's memory count builds its model on it too (planner_memory.cpp).
// Around another backend it also runs each call there, bracketed by a CallTimer with the call's
// class as its slot (kernels/call_timer.h: CUDA events on the GPU, a synchronized host clock
// elsewhere): what bench_cuda_train prints beside the prediction.
//
// The counts are the work as the kernels' contracts in kernels/backend.h define it, which is
// model.md §10 where §10 counts it, with two known differences: window attention scores the
// whole band of 2W keys per query (§10 counts the W a query sees on average), and the
// elementwise, normalisation, loss and SSM classes, which §10 leaves out, are counted too
// (their bytes are what matters for them). tests/core/model/test_step_counts.cpp checks a
// step's counts against §10.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "kernels/backend.h"
#include "kernels/call_timer.h"
#include "kernels/cuda/bf16_activations.h"

namespace brt::kernels {

enum class KernelClass : int {
  kGemm,            // the matrix products (projections, MLP, logits) and their gradients
  kWindowAttention, // model.md §3.2: scores and values over the 2W band, per block
  kCrossAttention,  // §3.4 / §5: the recurrent state's reads and the BST context
  kElementwise,     // norms, activations, gates, copies, fills, embedding rows
  kCrossEntropy,    // the loss and its gradient over the logits
  kSsm,             // §7: FFT convolutions, S4D kernels and states, the implicit filter's sine
};
constexpr int kKernelClasses = 6;
const char* kernel_class_name(KernelClass c);

struct KernelCounts {
  double flops = 0, bytes_read = 0, bytes_written = 0;
  int64_t launches = 0;
  double bytes() const { return bytes_read + bytes_written; }
};

template <typename T>
class CountingBackend final : public Backend<T> {
 public:
  // Counting alone: the calls run nothing; buffers live in `memory` (meta memory).
  explicit CountingBackend(Memory& memory) : memory_(memory) {}
  // Counting and measuring: every call also runs on `inner`, bracketed by `timer` with its
  // class as the slot (int(KernelClass)); the caller reads the times from its timer.
  CountingBackend(Backend<T>& inner, CallTimer& timer) : memory_(inner.memory()), inner_(&inner), timer_(&timer) {}
  const char* name() const override { return inner_ ? inner_->name() : "counting"; }
  Memory& memory() override { return memory_; }

  const KernelCounts& counts(KernelClass c) const { return counts_[size_t(c)]; }
  KernelCounts total() const;
  // The matrix products' operands a bf16 backend rounds to bf16 before multiplying (CUDA:
  // one conversion kernel each; linear_backward rounds dy once for its two products).
  struct Conversions {
    double elements = 0;
    int64_t launches = 0;
  };
  const Conversions& bf16_conversions() const { return conversions_; }
  void reset() {
    counts_ = {};
    conversions_ = {};
  }
  // Adds a call of class `c`: `flops`, and elements of T read and written (bytes: × sizeof(T)).
  void add(KernelClass c, double flops, double elems_read, double elems_written);
  // Runs `call` on the wrapped backend (if any), timed as class `c`.
  template <typename F>
  void run(KernelClass c, F&& call);

  void gemm(Trans ta, Trans tb, int M, int N, int K, T alpha, const T* A, int lda, const T* B, int ldb,
            T beta, T* C, int ldc) override;
  void linear_backward(const T* x, int n, int in, const T* w, int out, const T* dy, T* dx, T* dw,
                       T dx_beta) override;
  // The weights' bf16 shadow: counted as their conversion (read fp32, write bf16) in the runs
  // of kernels/cuda/weight_shadow.h, and a product's operand that reads it there is no longer
  // counted as converted.
  void weights_fixed(const T* values, int64_t n) override;
  // The products, x counted as converted once.
  void linear_forward_shared(const T* x, int n, int in, int count, const T* const* w, int out, T* const* y) override;
  // Counted as the CUDA backend runs them in bf16: products whose epilogues apply the ReLU and
  // its gradient (and add dx_add), with no element-wise pass of their own.
  // With y_for_products, y is written in bf16 and the products that read it convert nothing
  // (until weights_fixed(nullptr, 0)), as the CUDA backend in bf16 keeps it.
  void linear_relu_forward(const T* x, int n, int in, const T* w, int out, T* y, void* mask,
                           bool y_for_products) override;
  // Counted as CUDA in bf16 runs it: one product reading the residual as its C, no copy.
  void linear_forward_residual(const T* x, int n, int in, const T* w, int out, const T* residual, T* y) override;
  // Counted as the CUDA backend in bf16 runs it: the four products, dm written in bf16 and read
  // by its two products as it is (without dm_extra; with it, dm in fp32, converted once).
  void mlp_products_backward(const T* x, const T* w1, const T* m, const void* mask, int n, int in, int hidden,
                             const T* w2, int out, const T* du, const T* dm_extra, T* dm, T* dx, T* dw1,
                             T* dw2) override;
  void relu_linear_backward(const T* x, const void* mask, int n, int in, const T* w, int out, const T* dy,
                            const T* dx_add, T* dx, T* dw) override;
  void fill(T* x, int64_t n, T value) override;
  void copy(const T* x, int64_t n, T* y) override;
  void add_inplace(T* y, const T* x, int64_t n) override;
  void scale_inplace(T* x, int64_t n, T alpha) override;
  void column_sum_accumulate(const T* dz, int n, int D, T* db) override;
  void add_rows_broadcast(T* out, const T* table, int rows_out, int rows_table, int D) override;
  void embedding_forward(const int32_t* tokens, int n, const T* table, int D, T* out) override;
  void embedding_backward(const int32_t* tokens, int n, const T* dout, int D, T* dtable) override;
  void rmsnorm_forward(const T* x, const T* gamma, int n, int D, T* y, T* rstd) override;
  // y written in bf16 and read by its products without a conversion, as CUDA in bf16 does.
  void rmsnorm_forward_for_products(const T* x, const T* gamma, int n, int D, T* y, T* rstd) override;
  void rmsnorm_backward(const T* x, const T* gamma, const T* rstd, const T* dy, int n, int D, T* dx,
                        T* dgamma) override;
  void rmsnorm_backward_residual(const T* x, const T* gamma, const T* rstd, const T* dy, const T* residual,
                                 bool accumulate, int n, int D, T* dx, T* dgamma) override;
  void head_l2norm_forward(const T* x, int n, int H, int dh, T* y, T* rnorm) override;
  void head_l2norm_backward(const T* y, const T* rnorm, const T* dy, int n, int H, int dh, T* dx) override;
  // dx written in bf16 and read once by the next linear_backward as dy, as CUDA in bf16 does.
  void head_l2norm_backward_for_product(const T* y, const T* rnorm, const T* dy, int n, int H, int dh,
                                        T* dx) override;
  // out written in bf16 and read by its products without a conversion, as CUDA in bf16 does.
  void window_attention_forward_for_products(const WindowAttnDims& d, const T* q, const T* k, const T* v,
                                             const T* k_cache, const T* v_cache, const T* rel_bias,
                                             const T* scale, T* out, T* probs) override;
  void window_attention_forward(const WindowAttnDims& d, const T* q, const T* k, const T* v, const T* k_cache,
                                const T* v_cache, const T* rel_bias, const T* scale, T* out, T* probs) override;
  void window_attention_backward(const WindowAttnDims& d, const T* q, const T* k, const T* v, const T* k_cache,
                                 const T* v_cache, const T* rel_bias, const T* scale, const T* probs,
                                 const T* dout, T* dq, T* dk, T* dv, T* drel_bias, T* dscale) override;
  // Counted as CUDA in bf16 runs it: the backward's own traffic, no fills of dq, dk, dv.
  void window_attention_backward_write(const WindowAttnDims& d, const T* q, const T* k, const T* v, const T* k_cache,
                                       const T* v_cache, const T* rel_bias, const T* scale, const T* probs,
                                       const T* dout, T* dq, T* dk, T* dv, T* drel_bias, T* dscale) override;
  // dv written in bf16 and read once by the next linear_backward as dy, as CUDA in bf16 does.
  void window_attention_backward_write_dv_for_product(const WindowAttnDims& d, const T* q, const T* k, const T* v,
                                                      const T* k_cache, const T* v_cache, const T* rel_bias,
                                                      const T* scale, const T* probs, const T* dout, T* dq, T* dk,
                                                      T* dv, T* drel_bias, T* dscale) override;
  void cross_attention_forward(const CrossAttnDims& d, const T* q, const T* k, const T* v, const T* scale,
                               T* out, T* probs) override;
  void cross_attention_backward(const CrossAttnDims& d, const T* q, const T* k, const T* v, const T* scale,
                                const T* probs, const T* dout, T* dq, T* dk, T* dv, T* dscale) override;
  void relu_forward(const T* x, int64_t n, T* y) override;
  void relu_backward(const T* y, const T* dy, int64_t n, T* dx) override;
  void fixed_gate_forward(const T* carry, const T* u, const T* bias, int n, int D, T* out) override;
  void fixed_gate_backward(const T* carry, const T* u, const T* bias, const T* dout, int n, int D, T* dcarry,
                           T* du, T* dbias) override;
  void lstm_gate_forward(const T* carry, const T* u, const T* zf, const T* zi, int n, int D, T* out, T* f,
                         T* i) override;
  void lstm_gate_backward(const T* carry, const T* u, const T* f, const T* i, const T* dout, int n, int D,
                          T* dcarry, T* du, T* dzf, T* dzi) override;
  void copy_2d(const T* x, int64_t ldx, int rows, int64_t cols, T* y, int64_t ldy, bool accumulate) override;
  void xent_split_max(const T* logits, int n, int V, double* row_max) override;
  void xent_split_sums(const T* logits, const int32_t* local_targets, const uint8_t* mask, int n, int V,
                       const double* row_max, double* sum_exp, double* target_logit) override;
  double xent_split_finish(const T* logits, const int32_t* local_targets, const uint8_t* mask, int n, int V,
                           T grad_scale, const double* row_max, const double* sum_exp,
                           const double* target_logit, T* dlogits, T* row_loss) override;
  double softmax_xent_forward_backward(const T* logits, const int32_t* targets, const uint8_t* mask, int n,
                                       int V, T grad_scale, T* dlogits, T* row_loss) override;
  void softmax_xent_forward_backward_deferred(const T* logits, const int32_t* targets, const uint8_t* mask,
                                              int n, int V, const T* grad_scale, T* dlogits, T* row_loss,
                                              double* result) override;
  std::unique_ptr<FftConvolver<T>> make_fft_conv(int length, int channels, int max_batch,
                                                 int max_features) override;
  void copy_rows(const T* src, int64_t src_stride, int64_t rows, int64_t width, T* dst,
                 int64_t dst_stride) override;
  void s4d_kernel_forward(const ssm::S4dDims& d, const ssm::S4dParams<T>& p, T* kernel) override;
  void s4d_kernel_backward(const ssm::S4dDims& d, const ssm::S4dParams<T>& p, const T* dkernel,
                           const ssm::S4dGrads<T>& g) override;
  void s4d_carry_update(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const T* u,
                        double* state) override;
  void s4d_carry_apply(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const double* state,
                       T* y) override;
  void s4d_carry_apply_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const double* state,
                                const uint8_t* active, const T* dy, const ssm::S4dGrads<T>& g) override;
  void s4d_state_advance(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const double* h, double* x,
                         bool adjoint) override;
  void s4d_state_apply_grad(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const T* dy,
                            double* g) override;
  void s4d_state_advance_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                  const double* x_prev, const double* gnext, const ssm::S4dGrads<T>& g) override;
  void s4d_summary_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const T* u,
                            const double* dh, T* du, const ssm::S4dGrads<T>& g) override;
  void sine_forward(const T* a, const T* freq, int n, int O, T* s) override;
  void sine_backward(const T* a, const T* freq, const T* ds, int n, int O, T* da, T* dfreq) override;
  void implicit_filter_decay(T* x, const double* rate, int filters, int length) override;

 private:
  // An S4D state pass over every stream, filter and mode for `taps` steps (complex work).
  void add_s4d_pass(const ssm::S4dCarryDims& d, double taps, double elems_read, double elems_written);
  void count_window_backward(const WindowAttnDims& d);
  Memory& memory_;
  Backend<T>* inner_ = nullptr;
  CallTimer* timer_ = nullptr;
  std::array<KernelCounts, kKernelClasses> counts_{};
  Conversions conversions_;
  const T* weights_ = nullptr;  // weights_fixed's range
  int64_t weights_n_ = 0;
  cuda::Bf16Activations bf16_activations_;  // linear_relu_forward's y_for_products
  void converted(double elements) {
    conversions_.elements += elements;
    ++conversions_.launches;
  }
  // Counts operand p ([rows, cols], row stride ld) as converted unless it reads the shadow or
  // is an activation kept in bf16.
  void operand(const T* p, double rows, double cols, int ld);
  // A linear backward's dy [rows, cols]: converted, unless held in bf16 for it (then let go).
  void output_gradient(const T* dy, double rows, double cols);
};

template <typename T>
template <typename F>
void CountingBackend<T>::run(KernelClass c, F&& call) {
  if (inner_ == nullptr) return;
  timer_->begin();
  call();
  timer_->end(int(c));
}

}  // namespace brt::kernels
