#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/cpu/blas.h"
#include "kernels/ssm/fft_conv.h"

namespace brt::kernels::cpu {

template <typename T>
void CpuBackend<T>::gemm(Trans ta, Trans tb, int M, int N, int K, T alpha, const T* A, int lda,
                         const T* B, int ldb, T beta, T* C, int ldc) {
  // Catch bad strides here: OpenBLAS would only print a warning and skip the product.
  const int need_lda = ta == Trans::N ? K : M;
  const int need_ldb = tb == Trans::N ? N : K;
  if (M < 0 || N < 0 || K < 0 || lda < std::max(1, need_lda) || ldb < std::max(1, need_ldb) ||
      ldc < std::max(1, N)) {
    throw std::runtime_error("kernels/cpu gemm: invalid shape M=" + std::to_string(M) +
                             " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                             " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) +
                             " ldc=" + std::to_string(ldc));
  }
  blas_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

namespace {

// The FFTW convolution behind the backend interface (its scratch grows to max_batch now, so a
// step never allocates).
template <typename T>
class CpuFftConvolver final : public FftConvolver<T> {
 public:
  CpuFftConvolver(int length, int channels, int max_batch) : conv_(length, channels, 0, max_batch) {}
  void forward(const ssm::FftConvDims& d, const T* k, const T* u, const T* dskip, T* y) override {
    conv_.forward(d, k, u, dskip, y);
  }
  void backward(const ssm::FftConvDims& d, const T* k, const T* u, const T* dskip, const T* dy,
                T* du, T* dk, T* ddskip) override {
    conv_.backward(d, k, u, dskip, dy, du, dk, ddskip);
  }

 private:
  ssm::FftConv<T> conv_;
};

}  // namespace

template <typename T>
std::unique_ptr<FftConvolver<T>> CpuBackend<T>::make_fft_conv(int length, int channels,
                                                              int max_batch, int /*max_features*/) {
  return std::make_unique<CpuFftConvolver<T>>(length, channels, max_batch);
}

template <typename T>
void CpuBackend<T>::copy_rows(const T* src, int64_t src_stride, int64_t rows, int64_t width,
                              T* dst, int64_t dst_stride) {
  for (int64_t r = 0; r < rows; ++r)
    std::copy(src + r * src_stride, src + r * src_stride + width, dst + r * dst_stride);
}

std::string blas_description() {
  // openblas_get_parallel(): 0 sequential, 1 pthreads, 2 OpenMP. Only the OpenMP build runs
  // single-threaded inside the kernels' OpenMP regions instead of oversubscribing the cores.
  return std::string("OpenBLAS ") + openblas_get_config() + " | core " +
         openblas_get_corename() +
         " | OpenMP build: " + (openblas_get_parallel() == 2 ? "yes" : "no");
}

template class CpuBackend<float>;
template class CpuBackend<double>;

}  // namespace brt::kernels::cpu

namespace brt::kernels {

template <typename T>
std::unique_ptr<Backend<T>> make_cpu_backend() {
  return std::make_unique<cpu::CpuBackend<T>>();
}

template std::unique_ptr<Backend<float>> make_cpu_backend<float>();
template std::unique_ptr<Backend<double>> make_cpu_backend<double>();

}  // namespace brt::kernels
