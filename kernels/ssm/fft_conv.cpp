// Causal depthwise FFT convolution (model.md §7.1); see fft_conv.h for the contract.
//
// The D skip term is folded into the kernel as an extra weight on tap 0 (y = (k + D·δ) ∗ u),
// so forward and backward need no separate pass; ddskip is the tap-0 entry of the kernel
// gradient.
#include "kernels/ssm/fft_conv.h"

#include <omp.h>

#include <algorithm>
#include <new>
#include <stdexcept>
#include <string>

#include "kernels/cpu_parallel.h"

namespace brt::kernels::ssm {

std::mutex& fftw_planner_mutex() {
  static std::mutex mutex;  // guards FFTW's own global planner state, not ours
  return mutex;
}

int fft_friendly_size(int min_n) {
  if (min_n < 1) min_n = 1;
  for (int n = min_n;; ++n) {
    int r = n;
    for (int p : {2, 3, 5})
      while (r % p == 0) r /= p;
    if (r == 1) return n;
  }
}

FftConvDeviceBytes cuda_fft_conv_device_bytes(int length, int channels, int max_batch,
                                              int max_features) {
  const long long n_fft = fft_friendly_size(2 * length), n_freq = n_fft / 2 + 1;
  const long long ru = (long long)max_batch * max_features, rk = (long long)channels * max_features,
                  ry = ru * channels;
  const auto aligned = [](long long bytes) { return (bytes + 255) / 256 * 256; };  // ArenaPlan's
  FftConvDeviceBytes b;
  // real [Ry][n_fft] floats; input, kernel, output, dinput, dkernel spectra (complex floats).
  b.buffers = aligned(ry * n_fft * 4) + aligned(ru * n_freq * 8) + aligned(rk * n_freq * 8) +
              aligned(ry * n_freq * 8) + aligned(ru * n_freq * 8) + aligned(rk * n_freq * 8);
  b.work_area = ry * n_freq * 8;
  return b;
}

namespace {
// Slices of one fftw_malloc block must keep FFTW's SIMD alignment (the new-array execute
// functions require the alignment the plan was made with): 16 elements = 64 bytes or more.
constexpr int kAlignElements = 16;
int round_up(int n) { return (n + kAlignElements - 1) / kAlignElements * kAlignElements; }
}  // namespace

template <typename T>
T* FftConv<T>::allocate(std::size_t bytes) {
  void* p = Fftw<T>::malloc(bytes);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<T*>(p);
}

template <typename T>
FftConv<T>::FftConv(int length, int channels, int max_threads, int expected_batch)
    : length_(length), channels_(channels) {
  if (length < 1 || channels < 1)
    throw std::runtime_error("kernels/ssm/fft_conv: length and channels must be >= 1 (got L=" +
                             std::to_string(length) + ", C=" + std::to_string(channels) + ")");
  n_fft_ = fft_friendly_size(2 * length);
  n_freq_ = n_fft_ / 2 + 1;
  spectrum_stride_ = round_up(n_freq_);
  real_stride_ = round_up(n_fft_);
  threads_ = max_threads > 0 ? max_threads : std::max(1, omp_get_max_threads());

  scratch_.resize(threads_);
  const std::size_t tile_spectra_bytes = sizeof(std::complex<T>) * spectrum_stride_ * kTile;
  const auto complex_block = [&] {
    return reinterpret_cast<std::complex<T>*>(allocate(tile_spectra_bytes));
  };
  for (ThreadScratch& s : scratch_) {
    s.real = allocate(sizeof(T) * real_stride_ * kTile);
    s.kernel = complex_block();
    s.grad = complex_block();
    s.dkernel = complex_block();
  }
  ensure_batch(std::max(1, expected_batch));
  std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  // FFTW_ESTIMATE: a fixed plan for a given size on every run and rank, so results are
  // reproducible bit for bit (FFTW_MEASURE picks plans by timing).
  r2c_ = Fftw<T>::plan_r2c(n_fft_, scratch_[0].real, scratch_[0].grad);
  c2r_ = Fftw<T>::plan_c2r(n_fft_, scratch_[0].grad, scratch_[0].real);
  if (r2c_ == nullptr || c2r_ == nullptr)
    throw std::runtime_error("kernels/ssm/fft_conv: FFTW planning failed for n_fft=" +
                             std::to_string(n_fft_));
}

template <typename T>
FftConv<T>::~FftConv() {
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    if (r2c_ != nullptr) Fftw<T>::destroy(r2c_);
    if (c2r_ != nullptr) Fftw<T>::destroy(c2r_);
  }
  for (ThreadScratch& s : scratch_)
    for (void* p :
         {static_cast<void*>(s.real), static_cast<void*>(s.kernel), static_cast<void*>(s.grad),
          static_cast<void*>(s.dkernel), static_cast<void*>(s.input), static_cast<void*>(s.dinput)})
      if (p != nullptr) Fftw<T>::free(p);
}

template <typename T>
void FftConv<T>::ensure_batch(int batch) {
  if (batch <= batch_capacity_) return;
  const std::size_t bytes = sizeof(std::complex<T>) * spectrum_stride_ * kTile * batch;
  for (ThreadScratch& s : scratch_) {
    for (std::complex<T>** block : {&s.input, &s.dinput}) {
      if (*block != nullptr) Fftw<T>::free(*block);
      *block = nullptr;
      *block = reinterpret_cast<std::complex<T>*>(allocate(bytes));
    }
  }
  batch_capacity_ = batch;
}

template <typename T>
void FftConv<T>::check_dims(const FftConvDims& d, const char* what) const {
  if (d.length != length_ || d.channels != channels_ || d.batch < 0 || d.features < 0)
    throw std::runtime_error(
        std::string("kernels/ssm/fft_conv: ") + what +
        " called with L=" + std::to_string(d.length) + ", C=" + std::to_string(d.channels) +
        " but planned for L=" + std::to_string(length_) + ", C=" + std::to_string(channels_));
}

template <typename T>
int FftConv<T>::tile_width(const FftConvDims& d) const {
  // Narrower tiles when there are few features, so every thread gets work. Each feature's
  // arithmetic is the same whatever tile it falls in, so this does not change results.
  const int per_thread = (d.features + threads_ - 1) / threads_;
  return std::clamp(per_thread, 1, kTile);
}

template <typename T>
void FftConv<T>::tile_spectra(const ThreadScratch& s, const T* x, int F, int f0, int width,
                              std::complex<T>* out) {
  for (int t = 0; t < length_; ++t) {
    const T* row = x + int64_t{t} * F + f0;
    for (int j = 0; j < width; ++j) s.real[int64_t{j} * real_stride_ + t] = row[j];
  }
  for (int j = 0; j < width; ++j) {
    T* col = column(s, j);
    std::fill(col + length_, col + n_fft_, T(0));
    Fftw<T>::r2c(r2c_, col, spectrum(out, j));
  }
}

template <typename T>
void FftConv<T>::kernel_tile_spectra(const ThreadScratch& s, const T* k, const T* dskip, int c,
                                     int F, int f0, int width) {
  for (int j = 0; j < width; ++j) {
    const int64_t filter = int64_t{c} * F + f0 + j;
    const T* kc = k + filter * length_;
    T* col = column(s, j);
    std::copy(kc, kc + length_, col);
    if (dskip != nullptr) col[0] += dskip[filter];
    std::fill(col + length_, col + n_fft_, T(0));
    Fftw<T>::r2c(r2c_, col, spectrum(s.kernel, j));
  }
}

template <typename T>
void FftConv<T>::forward(const FftConvDims& d, const T* k, const T* u, const T* dskip, T* y) {
  check_dims(d, "forward");
  ensure_batch(d.batch);
  const int B = d.batch, C = channels_, L = length_, F = d.features;
  const int tile = tile_width(d), tiles = (F + tile - 1) / tile;
  const T inv_n = T(1) / static_cast<T>(n_fft_);
  const bool parallel = tiles > 1 && int64_t{F} * (B + 1) * C * n_fft_ >= cpu::kParallelMinWork;
#pragma omp parallel for schedule(static) num_threads(threads_) if (parallel)
  for (int task = 0; task < tiles; ++task) {
    const ThreadScratch& s = scratch_[omp_get_thread_num()];
    const int f0 = task * tile, width = std::min(tile, F - f0);
    for (int b = 0; b < B; ++b)
      tile_spectra(s, u + int64_t{b} * L * F, F, f0, width, spectrum(s.input, int64_t{b} * kTile));
    for (int c = 0; c < C; ++c) {
      kernel_tile_spectra(s, k, dskip, c, F, f0, width);
      for (int b = 0; b < B; ++b) {
        for (int j = 0; j < width; ++j) {
          const std::complex<T>* uf = spectrum(s.input, int64_t{b} * kTile + j);
          const std::complex<T>* kf = spectrum(s.kernel, j);
          std::complex<T>* prod = spectrum(s.grad, j);
          for (int i = 0; i < n_freq_; ++i) prod[i] = cmul(uf[i], kf[i]);
          Fftw<T>::c2r(c2r_, prod, column(s, j));
        }
        T* yc = y + (int64_t{b} * C + c) * L * F + f0;
        for (int t = 0; t < L; ++t)
          for (int j = 0; j < width; ++j)
            yc[int64_t{t} * F + j] = s.real[int64_t{j} * real_stride_ + t] * inv_n;
      }
    }
  }
}

template <typename T>
void FftConv<T>::backward(const FftConvDims& d, const T* k, const T* u, const T* dskip, const T* dy,
                          T* du, T* dk, T* ddskip) {
  check_dims(d, "backward");
  ensure_batch(d.batch);
  if (dskip == nullptr) ddskip = nullptr;
  const bool want_du = du != nullptr, want_dk = dk != nullptr || ddskip != nullptr;
  if (!want_du && !want_dk) return;
  const int B = d.batch, C = channels_, L = length_, F = d.features;
  const int tile = tile_width(d), tiles = (F + tile - 1) / tile;
  const T inv_n = T(1) / static_cast<T>(n_fft_);
  const bool parallel = tiles > 1 && int64_t{F} * (B + 1) * C * n_fft_ >= cpu::kParallelMinWork;
#pragma omp parallel for schedule(static) num_threads(threads_) if (parallel)
  for (int task = 0; task < tiles; ++task) {
    const ThreadScratch& s = scratch_[omp_get_thread_num()];
    const int f0 = task * tile, width = std::min(tile, F - f0);
    if (want_dk)
      for (int b = 0; b < B; ++b)
        tile_spectra(s, u + int64_t{b} * L * F, F, f0, width,
                     spectrum(s.input, int64_t{b} * kTile));
    if (want_du)
      std::fill(s.dinput, s.dinput + int64_t{B} * kTile * spectrum_stride_, std::complex<T>(0));
    for (int c = 0; c < C; ++c) {
      if (want_du) kernel_tile_spectra(s, k, dskip, c, F, f0, width);
      if (want_dk)
        std::fill(s.dkernel, s.dkernel + int64_t{kTile} * spectrum_stride_, std::complex<T>(0));
      for (int b = 0; b < B; ++b) {
        tile_spectra(s, dy + (int64_t{b} * C + c) * L * F, F, f0, width, s.grad);
        // The gradient of a convolution is a correlation: multiply by the conjugate.
        for (int j = 0; j < width; ++j) {
          const std::complex<T>* g = spectrum(s.grad, j);
          if (want_dk) {
            const std::complex<T>* uf = spectrum(s.input, int64_t{b} * kTile + j);
            std::complex<T>* acc = spectrum(s.dkernel, j);
            for (int i = 0; i < n_freq_; ++i) acc[i] += cmul_conj(uf[i], g[i]);
          }
          if (want_du) {
            const std::complex<T>* kf = spectrum(s.kernel, j);
            std::complex<T>* acc = spectrum(s.dinput, int64_t{b} * kTile + j);
            for (int i = 0; i < n_freq_; ++i) acc[i] += cmul_conj(kf[i], g[i]);
          }
        }
      }
      if (want_dk) {
        for (int j = 0; j < width; ++j) {
          const int64_t filter = int64_t{c} * F + f0 + j;
          T* col = column(s, j);
          Fftw<T>::c2r(c2r_, spectrum(s.dkernel, j), col);
          if (dk != nullptr) {
            T* dkc = dk + filter * L;
            for (int t = 0; t < L; ++t) dkc[t] += col[t] * inv_n;
          }
          if (ddskip != nullptr) ddskip[filter] += col[0] * inv_n;  // the skip is tap 0
        }
      }
    }
    if (want_du) {
      for (int b = 0; b < B; ++b) {
        for (int j = 0; j < width; ++j)
          Fftw<T>::c2r(c2r_, spectrum(s.dinput, int64_t{b} * kTile + j), column(s, j));
        T* dub = du + int64_t{b} * L * F + f0;
        for (int t = 0; t < L; ++t)
          for (int j = 0; j < width; ++j)
            dub[int64_t{t} * F + j] += s.real[int64_t{j} * real_stride_ + t] * inv_n;
      }
    }
  }
}

template class FftConv<float>;
template class FftConv<double>;

}  // namespace brt::kernels::ssm
