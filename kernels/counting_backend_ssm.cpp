// The counting backend's SSM sublayer (model.md §7): the FFT convolutions, the S4D kernels, states
// and their carries, the implicit filter's sine and decay, counted as CountingBackend counts the
// rest (kernels/counting_backend.h; its other classes are in counting_backend.cpp).
#include <cmath>
#include <cstdint>
#include <memory>

#include "kernels/counting_backend.h"

namespace brt::kernels {
namespace {

// Elements of T that `n` doubles take (the S4D states).
template <typename T>
double as_elems(double doubles) {
  return doubles * 8.0 / double(sizeof(T));
}
constexpr KernelClass kElem = KernelClass::kElementwise, kSsm = KernelClass::kSsm;

}  // namespace

namespace {

// The causal FFT convolution of model.md §7.1 counted: real transforms of n_fft points (~2.5·n·log2 n
// flops each), the spectra's complex products and the skip term; around the wrapped backend's
// own convolver when there is one.
template <typename T>
class CountingFftConv final : public FftConvolver<T> {
 public:
  CountingFftConv(CountingBackend<T>& backend, std::unique_ptr<FftConvolver<T>> inner)
      : backend_(backend), inner_(std::move(inner)) {}
  void forward(const ssm::FftConvDims& d, const T* k, const T* u, const T* dskip, T* y) override {
    count(d, 1.0);
    if (inner_) backend_.run(KernelClass::kSsm, [&] { inner_->forward(d, k, u, dskip, y); });
  }
  void backward(const ssm::FftConvDims& d, const T* k, const T* u, const T* dskip, const T* dy, T* du, T* dk,
                T* ddskip) override {
    count(d, 2.0);
    if (inner_) backend_.run(KernelClass::kSsm, [&] { inner_->backward(d, k, u, dskip, dy, du, dk, ddskip); });
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
  std::unique_ptr<FftConvolver<T>> inner_;
};

}  // namespace

template <typename T>
std::unique_ptr<FftConvolver<T>> CountingBackend<T>::make_fft_conv(int length, int channels, int max_batch,
                                                                    int max_features) {
  return std::make_unique<CountingFftConv<T>>(
      *this, inner_ ? inner_->make_fft_conv(length, channels, max_batch, max_features) : nullptr);
}

template <typename T>
void CountingBackend<T>::copy_rows(const T* src, int64_t src_stride, int64_t rows, int64_t width, T* dst,
                                   int64_t dst_stride) {
  add(kElem, 0, double(rows) * double(width), double(rows) * double(width));
  run(kElem, [&] { inner_->copy_rows(src, src_stride, rows, width, dst, dst_stride); });
}

template <typename T>
void CountingBackend<T>::s4d_kernel_forward(const ssm::S4dDims& d, const ssm::S4dParams<T>& p, T* kernel) {
  const double taps = double(d.filters) * d.modes * d.length;
  add(kSsm, 8.0 * taps, 6.0 * d.filters * d.modes, double(d.filters) * d.length);
  run(kSsm, [&] { inner_->s4d_kernel_forward(d, p, kernel); });
}

template <typename T>
void CountingBackend<T>::s4d_kernel_backward(const ssm::S4dDims& d, const ssm::S4dParams<T>& p, const T* dkernel,
                                             const ssm::S4dGrads<T>& g) {
  const double taps = double(d.filters) * d.modes * d.length;
  add(kSsm, 16.0 * taps, double(d.filters) * d.length + 6.0 * d.filters * d.modes, 6.0 * d.filters * d.modes);
  run(kSsm, [&] { inner_->s4d_kernel_backward(d, p, dkernel, g); });
}

template <typename T>
void CountingBackend<T>::add_s4d_pass(const ssm::S4dCarryDims& d, double taps, double elems_read,
                                      double elems_written) {
  const double states = double(d.batch) * d.filters() * d.modes;
  add(kSsm, 8.0 * states * taps, elems_read, elems_written);
}

namespace {
template <typename T>
double state_elems(const ssm::S4dCarryDims& d) {  // [B, C, Ds, M, 2] doubles
  return as_elems<T>(2.0 * d.batch * d.filters() * d.modes);
}
}  // namespace

template <typename T>
void CountingBackend<T>::s4d_carry_update(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const T* u,
                                          double* state) {
  add_s4d_pass(d, d.length, double(d.batch) * d.length * d.features + state_elems<T>(d), state_elems<T>(d));
  run(kSsm, [&] { inner_->s4d_carry_update(d, p, u, state); });
}

template <typename T>
void CountingBackend<T>::s4d_carry_apply(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                         const double* state, T* y) {
  const double out = double(d.batch) * d.channels * d.length * d.features;
  add_s4d_pass(d, d.length, state_elems<T>(d) + out, out);
  run(kSsm, [&] { inner_->s4d_carry_apply(d, p, state, y); });
}

template <typename T>
void CountingBackend<T>::s4d_carry_apply_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                                  const double* state, const uint8_t* active, const T* dy,
                                                  const ssm::S4dGrads<T>& g) {
  const double out = double(d.batch) * d.channels * d.length * d.features;
  add_s4d_pass(d, 2.0 * d.length, state_elems<T>(d) + out, 6.0 * d.filters() * d.modes);
  run(kSsm, [&] { inner_->s4d_carry_apply_backward(d, p, state, active, dy, g); });
}

template <typename T>
void CountingBackend<T>::s4d_state_advance(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                           const double* h, double* x, bool adjoint) {
  add_s4d_pass(d, 1.0, 2.0 * state_elems<T>(d), state_elems<T>(d));
  run(kSsm, [&] { inner_->s4d_state_advance(d, p, h, x, adjoint); });
}

template <typename T>
void CountingBackend<T>::s4d_state_apply_grad(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const T* dy,
                                              double* g) {
  add_s4d_pass(d, d.length, double(d.batch) * d.channels * d.length * d.features, state_elems<T>(d));
  run(kSsm, [&] { inner_->s4d_state_apply_grad(d, p, dy, g); });
}

template <typename T>
void CountingBackend<T>::s4d_state_advance_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                                    const double* x_prev, const double* gnext,
                                                    const ssm::S4dGrads<T>& g) {
  add_s4d_pass(d, 2.0, 2.0 * state_elems<T>(d), 6.0 * d.filters() * d.modes);
  run(kSsm, [&] { inner_->s4d_state_advance_backward(d, p, x_prev, gnext, g); });
}

template <typename T>
void CountingBackend<T>::s4d_summary_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p, const T* u,
                                              const double* dh, T* du, const ssm::S4dGrads<T>& g) {
  const double in = double(d.batch) * d.length * d.features;
  add_s4d_pass(d, 2.0 * d.length, in + state_elems<T>(d), in + 6.0 * d.filters() * d.modes);
  run(kSsm, [&] { inner_->s4d_summary_backward(d, p, u, dh, du, g); });
}

template <typename T>
void CountingBackend<T>::sine_forward(const T* a, const T* freq, int n, int O, T* s) {
  const double e = double(n) * O;
  add(kSsm, 10.0 * e, e + O, e);
  run(kSsm, [&] { inner_->sine_forward(a, freq, n, O, s); });
}

template <typename T>
void CountingBackend<T>::sine_backward(const T* a, const T* freq, const T* ds, int n, int O, T* da, T* dfreq) {
  const double e = double(n) * O;
  add(kSsm, 20.0 * e, 2.0 * e + O, e + O);
  run(kSsm, [&] { inner_->sine_backward(a, freq, ds, n, O, da, dfreq); });
}

template <typename T>
void CountingBackend<T>::implicit_filter_decay(T* x, const double* rate, int filters, int length) {
  const double e = double(filters) * length;
  add(kSsm, 10.0 * e, e + as_elems<T>(filters), e);
  run(kSsm, [&] { inner_->implicit_filter_decay(x, rate, filters, length); });
}

// The members defined here, for both element types (counting_backend.cpp instantiates the class).
#define BRT_COUNTING_SSM_MEMBERS(T)                                                                          \
  template std::unique_ptr<FftConvolver<T>> CountingBackend<T>::make_fft_conv(int, int, int, int);           \
  template void CountingBackend<T>::copy_rows(const T*, int64_t, int64_t, int64_t, T*, int64_t);             \
  template void CountingBackend<T>::s4d_kernel_forward(const ssm::S4dDims&, const ssm::S4dParams<T>&, T*);   \
  template void CountingBackend<T>::s4d_kernel_backward(const ssm::S4dDims&, const ssm::S4dParams<T>&,       \
                                                        const T*, const ssm::S4dGrads<T>&);                  \
  template void CountingBackend<T>::add_s4d_pass(const ssm::S4dCarryDims&, double, double, double);         \
  template void CountingBackend<T>::s4d_carry_update(const ssm::S4dCarryDims&, const ssm::S4dParams<T>&,    \
                                                     const T*, double*);                                     \
  template void CountingBackend<T>::s4d_carry_apply(const ssm::S4dCarryDims&, const ssm::S4dParams<T>&,     \
                                                    const double*, T*);                                      \
  template void CountingBackend<T>::s4d_carry_apply_backward(const ssm::S4dCarryDims&,                      \
                                                             const ssm::S4dParams<T>&, const double*,        \
                                                             const uint8_t*, const T*,                       \
                                                             const ssm::S4dGrads<T>&);                       \
  template void CountingBackend<T>::s4d_state_advance(const ssm::S4dCarryDims&, const ssm::S4dParams<T>&,   \
                                                      const double*, double*, bool);                         \
  template void CountingBackend<T>::s4d_state_apply_grad(const ssm::S4dCarryDims&, const ssm::S4dParams<T>&, \
                                                         const T*, double*);                                 \
  template void CountingBackend<T>::s4d_state_advance_backward(const ssm::S4dCarryDims&,                    \
                                                               const ssm::S4dParams<T>&, const double*,      \
                                                               const double*, const ssm::S4dGrads<T>&);      \
  template void CountingBackend<T>::s4d_summary_backward(const ssm::S4dCarryDims&, const ssm::S4dParams<T>&, \
                                                         const T*, const double*, T*,                        \
                                                         const ssm::S4dGrads<T>&);                           \
  template void CountingBackend<T>::sine_forward(const T*, const T*, int, int, T*);                          \
  template void CountingBackend<T>::sine_backward(const T*, const T*, const T*, int, int, T*, T*);           \
  template void CountingBackend<T>::implicit_filter_decay(T*, const double*, int, int);
BRT_COUNTING_SSM_MEMBERS(float)
BRT_COUNTING_SSM_MEMBERS(double)
#undef BRT_COUNTING_SSM_MEMBERS

}  // namespace brt::kernels
