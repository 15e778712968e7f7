// Causal depthwise long convolution by real FFT, with the D skip term (model.md §7.1):
//
//   y[b, c, t, f] = sum_{tau=0..t} k[c, f, tau] * u[b, t - tau, f]  +  dskip[c, f] * u[b, t, f]
//
// for batch b in [0, B), channel c in [0, C), feature f in [0, F), t in [0, L). All C channels
// convolve the same input u (one W_dn output shared by every channel, model.md §7.1), so the
// input spectrum is computed once per (b, f) and reused by every channel.
//
// Layouts (row-major):
//   u      [B, L, F]      activations, as U = Z·W_dn produces them
//   k      [C, F, L]      one length-L kernel per (c, f), contiguous in time (as the kernel
//                         generators write them: s4d_kernel.h, implicit_filter.h)
//   dskip  [C, F]         may be null (no skip term)
//   y      [B, C, L, F]   Y_c of model.md §7.1 for each stream; Y_c is [L, F] contiguous, ready for
//                         the W_up product
// The FFT length n_fft is the smallest 2^a·3^b·5^c >= 2L (zero padding; a shorter length
// would wrap the future into the past) and the inverse is normalised once by 1/n_fft.
//
// Kernel conventions (backend.h): forward overwrites y; backward ACCUMULATES into du, dk and
// ddskip. Work is split over features f with OpenMP; every output element is owned by one
// feature's task and summed in a fixed order, so results do not depend on the thread count.
// FFTW plans and all scratch are created in the constructor (the only place FFTW's planner
// runs); forward/backward never allocate. One FftConv serves one calling thread at a time
// and must not be called from inside an OpenMP parallel region.
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

#include "kernels/ssm/fft_conv_dims.h"
#include "kernels/ssm/fftw_api.h"

namespace brt::kernels::ssm {

template <typename T>
class FftConv {
 public:
  // Plans for (L, C). `max_threads` bounds the OpenMP threads used (0: omp_get_max_threads());
  // `expected_batch` pre-sizes the per-batch scratch (a larger B later grows it once, like
  // the CPU backend's workspace).
  FftConv(int length, int channels, int max_threads = 0, int expected_batch = 1);
  ~FftConv();
  FftConv(const FftConv&) = delete;
  FftConv& operator=(const FftConv&) = delete;

  int length() const { return length_; }
  int channels() const { return channels_; }
  int n_fft() const { return n_fft_; }

  // y = causal_conv(k, u) + dskip ⊙ u (see the header comment). d.length and d.channels
  // must equal the constructor's; B and F are free per call.
  void forward(const FftConvDims& d, const T* k, const T* u, const T* dskip, T* y);

  // Given dy [B, C, L, F], accumulates
  //   du[b, t, f]    += sum_c sum_{s>=t} k[c, f, s - t] dy[b, c, s, f] + dskip[c, f] dy[b, c, t, f]
  //   dk[c, f, tau]  += sum_b sum_{t>=tau} dy[b, c, t, f] u[b, t - tau, f]
  //   ddskip[c, f]   += sum_b sum_t dy[b, c, t, f] u[b, t, f]
  // (correlations, computed by FFT). Any of du, dk, ddskip may be null to skip it; ddskip
  // is ignored when dskip is null.
  void backward(const FftConvDims& d, const T* k, const T* u, const T* dskip, const T* dy, T* du,
                T* dk, T* ddskip);

 private:
  // Features are processed in tiles of up to kTile columns: gathering a [L, tile] slab of a
  // row-major [L, F] activation reads whole cache lines, where one strided column per
  // feature would touch a new line (and often a new page) per element.
  static constexpr int kTile = 16;
  struct ThreadScratch {
    T* real = nullptr;                   // [kTile][real_stride] time-domain columns
    std::complex<T>* kernel = nullptr;   // [kTile][stride] kernel spectra (one channel)
    std::complex<T>* grad = nullptr;     // [kTile][stride] dy spectra / products
    std::complex<T>* dkernel = nullptr;  // [kTile][stride] dk accumulators
    std::complex<T>* input = nullptr;    // [batch_capacity][kTile][stride] u spectra
    std::complex<T>* dinput = nullptr;   // [batch_capacity][kTile][stride] du accumulators
  };
  void check_dims(const FftConvDims& d, const char* what) const;
  int tile_width(const FftConvDims& d) const;
  void ensure_batch(int batch);  // grow-only; serial code only
  std::complex<T>* spectrum(std::complex<T>* base, int64_t index) const {
    return base + index * spectrum_stride_;
  }
  T* column(const ThreadScratch& s, int j) const { return s.real + int64_t{j} * real_stride_; }
  // Copies x[t, f0 + j] (row stride F, t < L) into column j of s.real, zero-pads to n_fft
  // and transforms each of the `width` columns into out[j].
  void tile_spectra(const ThreadScratch& s, const T* x, int F, int f0, int width,
                    std::complex<T>* out);
  // Spectra of k[c, f0 + j, :] (+ dskip[c, f0 + j] at tap 0: the skip term is a kernel tap)
  // into s.kernel[j].
  void kernel_tile_spectra(const ThreadScratch& s, const T* k, const T* dskip, int c, int F, int f0,
                           int width);
  T* allocate(std::size_t bytes);

  int length_;
  int channels_;
  int n_fft_;
  int n_freq_;           // n_fft / 2 + 1
  int spectrum_stride_;  // n_freq rounded up so every slice stays SIMD-aligned for FFTW
  int real_stride_;      // n_fft rounded up likewise
  int threads_;
  int batch_capacity_ = 0;
  typename Fftw<T>::Plan r2c_ = nullptr;
  typename Fftw<T>::Plan c2r_ = nullptr;
  std::vector<ThreadScratch> scratch_;
};

}  // namespace brt::kernels::ssm
