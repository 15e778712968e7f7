// A backend that runs nothing and counts what each call would do: its floating-point
// operations, the bytes it reads and writes and one launch, by kernel class. Over meta memory
// (kernels/meta_memory.h) it takes one whole training step of a model at its real shapes
// (core::Model::device_work) on any machine in milliseconds, so the planner can predict a
// device's step per component from counts instead of an assumed efficiency (launch/plan).
//
// The counts are the work as the kernels' contracts in kernels/backend.h define it, which is
// model.md §10 where §10 counts it, with two known differences: window attention scores the
// whole band of 2W keys per query (§10 counts the W a query sees on average), and the
// elementwise, normalisation, loss and SSM classes, which §10 leaves out, are counted too
// (their bytes are what matters for them). tests/kernels/test_counting_backend.cpp checks a
// step's counts against §10.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "kernels/backend.h"

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
  explicit CountingBackend(Memory& memory) : memory_(memory) {}
  const char* name() const override { return "counting"; }
  Memory& memory() override { return memory_; }

  const KernelCounts& counts(KernelClass c) const { return counts_[size_t(c)]; }
  KernelCounts total() const;
  void reset() { counts_ = {}; }
  // Adds a call of class `c`: `flops`, and elements of T read and written (bytes: × sizeof(T)).
  void add(KernelClass c, double flops, double elems_read, double elems_written);

  void gemm(Trans ta, Trans tb, int M, int N, int K, T alpha, const T* A, int lda, const T* B, int ldb,
            T beta, T* C, int ldc) override;
  void fill(T*, int64_t n, T) override { add(KernelClass::kElementwise, 0, 0, double(n)); }
  void copy(const T*, int64_t n, T*) override { add(KernelClass::kElementwise, 0, double(n), double(n)); }
  void add_inplace(T*, const T*, int64_t n) override { add(KernelClass::kElementwise, double(n), 2.0 * n, double(n)); }
  void scale_inplace(T*, int64_t n, T) override { add(KernelClass::kElementwise, double(n), double(n), double(n)); }
  void column_sum_accumulate(const T*, int n, int D, T*) override;
  void add_rows_broadcast(T*, const T*, int rows_out, int rows_table, int D) override;
  void embedding_forward(const int32_t*, int n, const T*, int D, T*) override;
  void embedding_backward(const int32_t*, int n, const T*, int D, T*) override;
  void rmsnorm_forward(const T*, const T*, int n, int D, T*, T*) override;
  void rmsnorm_backward(const T*, const T*, const T*, const T*, int n, int D, T*, T*) override;
  void head_l2norm_forward(const T*, int n, int H, int dh, T*, T*) override;
  void head_l2norm_backward(const T*, const T*, const T*, int n, int H, int dh, T*) override;
  void window_attention_forward(const WindowAttnDims& d, const T*, const T*, const T*, const T*, const T*,
                                const T*, const T*, T*, T*) override;
  void window_attention_backward(const WindowAttnDims& d, const T*, const T*, const T*, const T*, const T*,
                                 const T*, const T*, const T*, const T*, T*, T*, T*, T*, T*) override;
  void cross_attention_forward(const CrossAttnDims& d, const T*, const T*, const T*, const T*, T*, T*) override;
  void cross_attention_backward(const CrossAttnDims& d, const T*, const T*, const T*, const T*, const T*,
                                const T*, T*, T*, T*, T*) override;
  void relu_forward(const T*, int64_t n, T*) override { add(KernelClass::kElementwise, double(n), double(n), double(n)); }
  void relu_backward(const T*, const T*, int64_t n, T*) override {
    add(KernelClass::kElementwise, double(n), 3.0 * n, double(n));
  }
  void fixed_gate_forward(const T*, const T*, const T*, int n, int D, T*) override;
  void fixed_gate_backward(const T*, const T*, const T*, const T*, int n, int D, T*, T*, T*) override;
  void lstm_gate_forward(const T*, const T*, const T*, const T*, int n, int D, T*, T*, T*) override;
  void lstm_gate_backward(const T*, const T*, const T*, const T*, const T*, int n, int D, T*, T*, T*,
                          T*) override;
  void copy_2d(const T*, int64_t, int rows, int64_t cols, T*, int64_t, bool accumulate) override;
  void xent_split_max(const T*, int n, int V, double*) override;
  void xent_split_sums(const T*, const int32_t*, const uint8_t*, int n, int V, const double*, double*,
                       double*) override;
  double xent_split_finish(const T*, const int32_t*, const uint8_t*, int n, int V, T, const double*,
                           const double*, const double*, T*, T*) override;
  double softmax_xent_forward_backward(const T*, const int32_t*, const uint8_t*, int n, int V, T, T*,
                                       T*) override;
  void softmax_xent_forward_backward_deferred(const T*, const int32_t*, const uint8_t*, int n, int V, const T*,
                                              T*, T*, double*) override;
  std::unique_ptr<FftConvolver<T>> make_fft_conv(int length, int channels, int max_batch,
                                                 int max_features) override;
  void copy_rows(const T*, int64_t, int64_t rows, int64_t width, T*, int64_t) override;
  void s4d_kernel_forward(const ssm::S4dDims& d, const ssm::S4dParams<T>&, T*) override;
  void s4d_kernel_backward(const ssm::S4dDims& d, const ssm::S4dParams<T>&, const T*,
                           const ssm::S4dGrads<T>&) override;
  void s4d_carry_update(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const T*, double*) override;
  void s4d_carry_apply(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const double*, T*) override;
  void s4d_carry_apply_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const double*,
                                const uint8_t*, const T*, const ssm::S4dGrads<T>&) override;
  void s4d_state_advance(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const double*, double*,
                         bool) override;
  void s4d_state_apply_grad(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const T*, double*) override;
  void s4d_state_advance_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const double*,
                                  const double*, const ssm::S4dGrads<T>&) override;
  void s4d_summary_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const T*, const double*,
                            T*, const ssm::S4dGrads<T>&) override;
  void sine_forward(const T*, const T*, int n, int O, T*) override;
  void sine_backward(const T*, const T*, const T*, int n, int O, T*, T*) override;
  void implicit_filter_decay(T*, const double*, int filters, int length) override;

 private:
  // An S4D state pass over every stream, filter and mode for `length` taps (complex work).
  void add_s4d_pass(const ssm::S4dCarryDims& d, double taps, double elems_read, double elems_written);
  Memory& memory_;
  std::array<KernelCounts, kKernelClasses> counts_{};
};

}  // namespace brt::kernels
