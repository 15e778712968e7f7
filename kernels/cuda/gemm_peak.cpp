// The measured dense-matrix peak of the current GPU (the MFU denominator of `brt-dist train
// --device cuda` and of bench/cuda): a square cuBLAS product after warm-up, median of timed
// repeats with CUDA events, on random (never zero) operands: all-zero operands draw less
// power and overstate the peak.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/device_arena.h"

namespace brt::kernels::cuda {

double median_event_ms(CUstream_st* stream, int warmup, int repeats,
                       const std::function<void()>& body) {
  for (int i = 0; i < warmup; ++i) body();
  BRT_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop;
  BRT_CUDA_CHECK(cudaEventCreate(&start));
  BRT_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    BRT_CUDA_CHECK(cudaEventRecord(start, stream));
    body();
    BRT_CUDA_CHECK(cudaEventRecord(stop, stream));
    BRT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    BRT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double measure_gemm_peak_tflops(Precision precision, int n, unsigned seed) {
  const bool bf16 = precision == Precision::kBf16;
  const std::size_t elems = std::size_t(n) * n;
  DeviceArena arena(elems * (bf16 ? 2 * 2 + 4 : 3 * 4) + (std::size_t{64} << 20), "gemm peak");
  cudaStream_t stream;
  BRT_CUDA_CHECK(cudaStreamCreate(&stream));
  cublasHandle_t handle;
  BRT_CUBLAS_CHECK(cublasCreate(&handle));
  BRT_CUBLAS_CHECK(cublasSetStream(handle, stream));
  BRT_CUBLAS_CHECK(cublasSetMathMode(handle, bf16 ? CUBLAS_DEFAULT_MATH : CUBLAS_PEDANTIC_MATH));
  float* c = arena.allocate_array<float>(elems, "C");
  void* a = arena.allocate(elems * (bf16 ? 2 : 4), "A");
  void* b = arena.allocate(elems * (bf16 ? 2 : 4), "B");
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (void* dst : {a, b}) {
    if (bf16) {
      std::vector<__nv_bfloat16> host(elems);
      for (auto& x : host) x = __float2bfloat16(dist(gen));
      BRT_CUDA_CHECK(cudaMemcpy(dst, host.data(), elems * 2, cudaMemcpyHostToDevice));
    } else {
      std::vector<float> host(elems);
      for (auto& x : host) x = dist(gen);
      BRT_CUDA_CHECK(cudaMemcpy(dst, host.data(), elems * 4, cudaMemcpyHostToDevice));
    }
  }
  const float alpha = 1.0f, beta = 0.0f;
  const double ms = median_event_ms(stream, 3, 10, [&] {
    if (bf16) {
      BRT_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a,
                                    CUDA_R_16BF, n, b, CUDA_R_16BF, n, &beta, c, CUDA_R_32F, n,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    } else {
      BRT_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha,
                                   static_cast<float*>(a), n, static_cast<float*>(b), n, &beta,
                                   c, n));
    }
  });
  cublasDestroy(handle);
  cudaStreamDestroy(stream);
  return 2.0 * n * double(n) * n / (ms * 1e-3) / 1e12;
}

}  // namespace brt::kernels::cuda
