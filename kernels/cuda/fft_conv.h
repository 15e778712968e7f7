// cuFFT version of the SSM's causal depthwise FFT convolution (MODEL §7.1), with the same
// contract as kernels/ssm/fft_conv.h but on DEVICE pointers:
//
//   y[b, c, t, f] = sum_{tau<=t} k[c, f, tau] u[b, t - tau, f] + dskip[c, f] u[b, t, f]
//   layouts u [B, L, F], k [C, F, L], dskip [C, F] (may be null), y [B, C, L, F];
//   forward overwrites y; backward ACCUMULATES du, dk, ddskip (any may be null).
//
// n_fft is the same 2^a·3^b·5^c >= 2L as the CPU version (zero padding, no wrap of the future
// into the past); the inverse is normalised once by 1/n_fft; the skip term is tap 0 of the
// kernel. cuFFT plans (and their work areas) and all spectra are created in the constructor
// for at most (max_batch, max_features); calls may use any B <= max_batch, F <= max_features
// (unused planned rows are zeros). Sums over channels (du) and over the batch (dk) run in a
// fixed order in the spectral domain: deterministic. One CudaFftConv serves one stream.
// Needs no CUDA headers.
#pragma once

#include <cstddef>
#include <memory>

#include "kernels/ssm/fft_conv.h"

struct CUstream_st;

namespace brt::kernels::cuda {

class CudaFftConv {
 public:
  CudaFftConv(int length, int channels, int max_batch, int max_features,
              CUstream_st* stream = nullptr);
  ~CudaFftConv();
  CudaFftConv(const CudaFftConv&) = delete;
  CudaFftConv& operator=(const CudaFftConv&) = delete;

  int n_fft() const;
  std::size_t device_bytes() const;  // spectra and staging held by this object

  void forward(const ssm::FftConvDims& d, const float* k, const float* u, const float* dskip,
               float* y);
  void backward(const ssm::FftConvDims& d, const float* k, const float* u, const float* dskip,
                const float* dy, float* du, float* dk, float* ddskip);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace brt::kernels::cuda
