#include "kernels/counting_backend.h"

#include <cmath>

namespace brt::kernels {

const char* kernel_class_name(KernelClass c) {
  switch (c) {
    case KernelClass::kGemm: return "dense GEMMs";
    case KernelClass::kWindowAttention: return "window attention";
    case KernelClass::kCrossAttention: return "cross-attention";
    case KernelClass::kElementwise: return "elementwise";
    case KernelClass::kCrossEntropy: return "cross-entropy";
    case KernelClass::kSsm: return "SSM";
  }
  return "?";
}

template <typename T>
KernelCounts CountingBackend<T>::total() const {
  KernelCounts t;
  for (const KernelCounts& c : counts_) {
    t.flops += c.flops;
    t.bytes_read += c.bytes_read;
    t.bytes_written += c.bytes_written;
    t.launches += c.launches;
  }
  return t;
}

template <typename T>
void CountingBackend<T>::add(KernelClass c, double flops, double elems_read, double elems_written) {
  KernelCounts& k = counts_[size_t(c)];
  k.flops += flops;
  k.bytes_read += elems_read * double(sizeof(T));
  k.bytes_written += elems_written * double(sizeof(T));
  k.launches += 1;
}

namespace {
// Elements of T that `n` doubles take (the S4D states and the split loss's row statistics).
template <typename T>
double as_elems(double doubles) {
  return doubles * 8.0 / double(sizeof(T));
}
}  // namespace

template <typename T>
void CountingBackend<T>::gemm(Trans, Trans, int M, int N, int K, T, const T*, int, const T*, int, T beta, T*,
                              int) {
  const double m = M, n = N, k = K;
  add(KernelClass::kGemm, 2.0 * m * n * k, m * k + k * n + (beta != T(0) ? m * n : 0.0), m * n);
}

template <typename T>
void CountingBackend<T>::column_sum_accumulate(const T*, int n, int D, T*) {
  add(KernelClass::kElementwise, double(n) * D, double(n) * D + D, double(D));
}

template <typename T>
void CountingBackend<T>::add_rows_broadcast(T*, const T*, int rows_out, int rows_table, int D) {
  add(KernelClass::kElementwise, double(rows_out) * D, double(rows_out + rows_table) * D, double(rows_out) * D);
}

template <typename T>
void CountingBackend<T>::embedding_forward(const int32_t*, int n, const T*, int D, T*) {
  add(KernelClass::kElementwise, 0, double(n) * D, double(n) * D);
}

template <typename T>
void CountingBackend<T>::embedding_backward(const int32_t*, int n, const T*, int D, T*) {
  add(KernelClass::kElementwise, double(n) * D, 2.0 * n * D, double(n) * D);
}

template <typename T>
void CountingBackend<T>::rmsnorm_forward(const T*, const T*, int n, int D, T*, T*) {
  add(KernelClass::kElementwise, 4.0 * n * D, double(n) * D + D, double(n) * D + n);
}

template <typename T>
void CountingBackend<T>::rmsnorm_backward(const T*, const T*, const T*, const T*, int n, int D, T*, T*) {
  add(KernelClass::kElementwise, 8.0 * n * D, 2.0 * n * D + D + n, double(n) * D + D);
}

template <typename T>
void CountingBackend<T>::head_l2norm_forward(const T*, int n, int H, int dh, T*, T*) {
  const double a = double(n) * H * dh;
  add(KernelClass::kElementwise, 3.0 * a, a, a + double(n) * H);
}

template <typename T>
void CountingBackend<T>::head_l2norm_backward(const T*, const T*, const T*, int n, int H, int dh, T*) {
  const double a = double(n) * H * dh;
  add(KernelClass::kElementwise, 6.0 * a, 3.0 * a + double(n) * H, a);
}

// Every query scores the whole band of 2W keys (its block and the previous one, masked).
template <typename T>
void CountingBackend<T>::window_attention_forward(const WindowAttnDims& d, const T*, const T*, const T*,
                                                  const T*, const T*, const T*, const T*, T*, T*) {
  const double rows = double(d.batch) * d.seq, A = d.width(), band = 2.0 * d.window;
  const double scores = rows * d.heads * band;
  add(KernelClass::kWindowAttention, 4.0 * rows * band * A + 5.0 * scores,
      3.0 * rows * A + 2.0 * d.batch * d.window * A, rows * A + scores);
}

template <typename T>
void CountingBackend<T>::window_attention_backward(const WindowAttnDims& d, const T*, const T*, const T*,
                                                   const T*, const T*, const T*, const T*, const T*, const T*,
                                                   T*, T*, T*, T*, T*) {
  const double rows = double(d.batch) * d.seq, A = d.width(), band = 2.0 * d.window;
  const double scores = rows * d.heads * band;
  add(KernelClass::kWindowAttention, 8.0 * rows * band * A + 5.0 * scores,
      4.0 * rows * A + 2.0 * d.batch * d.window * A + scores, 3.0 * rows * A);
}

template <typename T>
void CountingBackend<T>::cross_attention_forward(const CrossAttnDims& d, const T*, const T*, const T*,
                                                 const T*, T*, T*) {
  const double q = double(d.batch) * d.queries, k = double(d.batch) * d.keys, A = d.width();
  const double scores = q * d.heads * d.keys;
  add(KernelClass::kCrossAttention, 4.0 * q * d.keys * A + 5.0 * scores, q * A + 2.0 * k * A, q * A + scores);
}

template <typename T>
void CountingBackend<T>::cross_attention_backward(const CrossAttnDims& d, const T*, const T*, const T*,
                                                  const T*, const T*, const T*, T*, T*, T*, T*) {
  const double q = double(d.batch) * d.queries, k = double(d.batch) * d.keys, A = d.width();
  const double scores = q * d.heads * d.keys;
  add(KernelClass::kCrossAttention, 8.0 * q * d.keys * A + 5.0 * scores, 2.0 * q * A + 2.0 * k * A + scores,
      q * A + 2.0 * k * A);
}

template <typename T>
void CountingBackend<T>::fixed_gate_forward(const T*, const T*, const T*, int n, int D, T*) {
  const double e = double(n) * D;
  add(KernelClass::kElementwise, 4.0 * e, 2.0 * e + D, e);
}

template <typename T>
void CountingBackend<T>::fixed_gate_backward(const T*, const T*, const T*, const T*, int n, int D, T*, T*, T*) {
  const double e = double(n) * D;
  add(KernelClass::kElementwise, 6.0 * e, 3.0 * e + D, 2.0 * e + D);
}

template <typename T>
void CountingBackend<T>::lstm_gate_forward(const T*, const T*, const T*, const T*, int n, int D, T*, T*, T*) {
  const double e = double(n) * D;
  add(KernelClass::kElementwise, 10.0 * e, 4.0 * e, 3.0 * e);
}

template <typename T>
void CountingBackend<T>::lstm_gate_backward(const T*, const T*, const T*, const T*, const T*, int n, int D, T*,
                                            T*, T*, T*) {
  const double e = double(n) * D;
  add(KernelClass::kElementwise, 14.0 * e, 5.0 * e, 4.0 * e);
}

template <typename T>
void CountingBackend<T>::copy_2d(const T*, int64_t, int rows, int64_t cols, T*, int64_t, bool accumulate) {
  const double e = double(rows) * double(cols);
  add(KernelClass::kElementwise, accumulate ? e : 0.0, accumulate ? 2.0 * e : e, e);
}

template <typename T>
void CountingBackend<T>::xent_split_max(const T*, int n, int V, double*) {
  add(KernelClass::kCrossEntropy, double(n) * V, double(n) * V, as_elems<T>(n));
}

template <typename T>
void CountingBackend<T>::xent_split_sums(const T*, const int32_t*, const uint8_t*, int n, int V, const double*,
                                         double*, double*) {
  add(KernelClass::kCrossEntropy, 3.0 * n * V, double(n) * V + as_elems<T>(n), as_elems<T>(2.0 * n));
}

template <typename T>
double CountingBackend<T>::xent_split_finish(const T*, const int32_t*, const uint8_t*, int n, int V, T,
                                             const double*, const double*, const double*, T*, T*) {
  add(KernelClass::kCrossEntropy, 4.0 * n * V, double(n) * V + as_elems<T>(3.0 * n), double(n) * V + n);
  return 0.0;
}

template <typename T>
double CountingBackend<T>::softmax_xent_forward_backward(const T*, const int32_t*, const uint8_t*, int n, int V,
                                                         T, T*, T*) {
  add(KernelClass::kCrossEntropy, 7.0 * n * V, 2.0 * n * V, double(n) * V + n);
  return 0.0;
}

template <typename T>
void CountingBackend<T>::softmax_xent_forward_backward_deferred(const T*, const int32_t*, const uint8_t*, int n,
                                                                int V, const T*, T*, T*, double*) {
  add(KernelClass::kCrossEntropy, 7.0 * n * V, 2.0 * n * V, double(n) * V + n);
}

namespace {

// The causal FFT convolution of model.md §7.1 counted: real transforms of n_fft points (~2.5·n·log2 n
// flops each), the spectra's complex products and the skip term.
template <typename T>
class CountingFftConv final : public FftConvolver<T> {
 public:
  explicit CountingFftConv(CountingBackend<T>& backend) : backend_(backend) {}
  void forward(const ssm::FftConvDims& d, const T*, const T*, const T*, T*) override { count(d, 1.0); }
  void backward(const ssm::FftConvDims& d, const T*, const T*, const T*, const T*, T*, T*, T*) override {
    count(d, 2.0);
  }

 private:
  void count(const ssm::FftConvDims& d, double passes) {
    const double n = ssm::fft_friendly_size(2 * d.length), fft = 2.5 * n * std::log2(n);
    const double kernels = double(d.channels) * d.features, inputs = double(d.batch) * d.features;
    const double outputs = double(d.batch) * kernels, L = d.length;
    const double flops = passes * (fft * (kernels + inputs + outputs) + 6.0 * (n / 2 + 1) * outputs) + 2.0 * outputs * L;
    backend_.add(KernelClass::kSsm, flops, passes * (kernels * L + inputs * L), passes * outputs * L);
  }
  CountingBackend<T>& backend_;
};

}  // namespace

template <typename T>
std::unique_ptr<FftConvolver<T>> CountingBackend<T>::make_fft_conv(int, int, int, int) {
  return std::make_unique<CountingFftConv<T>>(*this);
}

template <typename T>
void CountingBackend<T>::copy_rows(const T*, int64_t, int64_t rows, int64_t width, T*, int64_t) {
  add(KernelClass::kElementwise, 0, double(rows) * double(width), double(rows) * double(width));
}

template <typename T>
void CountingBackend<T>::s4d_kernel_forward(const ssm::S4dDims& d, const ssm::S4dParams<T>&, T*) {
  const double taps = double(d.filters) * d.modes * d.length;
  add(KernelClass::kSsm, 8.0 * taps, 6.0 * d.filters * d.modes, double(d.filters) * d.length);
}

template <typename T>
void CountingBackend<T>::s4d_kernel_backward(const ssm::S4dDims& d, const ssm::S4dParams<T>&, const T*,
                                             const ssm::S4dGrads<T>&) {
  const double taps = double(d.filters) * d.modes * d.length;
  add(KernelClass::kSsm, 16.0 * taps, double(d.filters) * d.length + 6.0 * d.filters * d.modes,
      6.0 * d.filters * d.modes);
}

template <typename T>
void CountingBackend<T>::add_s4d_pass(const ssm::S4dCarryDims& d, double taps, double elems_read,
                                      double elems_written) {
  const double states = double(d.batch) * d.filters() * d.modes;
  add(KernelClass::kSsm, 8.0 * states * taps, elems_read, elems_written);
}

template <typename T>
void CountingBackend<T>::s4d_carry_update(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const T*,
                                          double*) {
  const double state = as_elems<T>(2.0 * d.batch * d.filters() * d.modes);
  add_s4d_pass(d, d.length, double(d.batch) * d.length * d.features + state, state);
}

template <typename T>
void CountingBackend<T>::s4d_carry_apply(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const double*,
                                         T* ) {
  const double state = as_elems<T>(2.0 * d.batch * d.filters() * d.modes);
  const double y = double(d.batch) * d.channels * d.length * d.features;
  add_s4d_pass(d, d.length, state + y, y);
}

template <typename T>
void CountingBackend<T>::s4d_carry_apply_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&,
                                                  const double*, const uint8_t*, const T*,
                                                  const ssm::S4dGrads<T>&) {
  const double state = as_elems<T>(2.0 * d.batch * d.filters() * d.modes);
  const double y = double(d.batch) * d.channels * d.length * d.features;
  add_s4d_pass(d, 2.0 * d.length, state + y, 6.0 * d.filters() * d.modes);
}

template <typename T>
void CountingBackend<T>::s4d_state_advance(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const double*,
                                           double*, bool) {
  const double state = as_elems<T>(2.0 * d.batch * d.filters() * d.modes);
  add_s4d_pass(d, 1.0, 2.0 * state, state);
}

template <typename T>
void CountingBackend<T>::s4d_state_apply_grad(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const T*,
                                              double*) {
  const double state = as_elems<T>(2.0 * d.batch * d.filters() * d.modes);
  add_s4d_pass(d, d.length, double(d.batch) * d.channels * d.length * d.features, state);
}

template <typename T>
void CountingBackend<T>::s4d_state_advance_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&,
                                                    const double*, const double*, const ssm::S4dGrads<T>&) {
  const double state = as_elems<T>(2.0 * d.batch * d.filters() * d.modes);
  add_s4d_pass(d, 2.0, 2.0 * state, 6.0 * d.filters() * d.modes);
}

template <typename T>
void CountingBackend<T>::s4d_summary_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>&, const T*,
                                              const double*, T*, const ssm::S4dGrads<T>&) {
  const double state = as_elems<T>(2.0 * d.batch * d.filters() * d.modes);
  const double u = double(d.batch) * d.length * d.features;
  add_s4d_pass(d, 2.0 * d.length, u + state, u + 6.0 * d.filters() * d.modes);
}

template <typename T>
void CountingBackend<T>::sine_forward(const T*, const T*, int n, int O, T*) {
  const double e = double(n) * O;
  add(KernelClass::kSsm, 10.0 * e, e + O, e);
}

template <typename T>
void CountingBackend<T>::sine_backward(const T*, const T*, const T*, int n, int O, T*, T*) {
  const double e = double(n) * O;
  add(KernelClass::kSsm, 20.0 * e, 2.0 * e + O, e + O);
}

template <typename T>
void CountingBackend<T>::implicit_filter_decay(T*, const double*, int filters, int length) {
  const double e = double(filters) * length;
  add(KernelClass::kSsm, 10.0 * e, e + as_elems<T>(filters), e);
}

template class CountingBackend<float>;
template class CountingBackend<double>;

}  // namespace brt::kernels
