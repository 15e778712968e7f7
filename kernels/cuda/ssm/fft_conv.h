// cuFFT version of the SSM's causal depthwise FFT convolution (model.md §7.1), with the same
// contract as kernels/ssm/fft_conv.h but on DEVICE pointers:
//
//   y[b, c, t, f] = sum_{tau<=t} k[c, f, tau] u[b, t - tau, f] + dskip[c, f] u[b, t, f]
//   layouts u [B, L, F], k [C, F, L], dskip [C, F] (may be null), y [B, C, L, F];
//   forward overwrites y; backward ACCUMULATES du, dk, ddskip (any may be null).
//
// n_fft is the same 2^a·3^b·5^c >= 2L as the CPU version (zero padding, no wrap of the future
// into the past); the inverse is normalised once by 1/n_fft; the skip term is tap 0 of the
// kernel. cuFFT plans and all spectra are created in the constructor for at most (max_batch,
// max_features); calls may use any B <= max_batch, F <= max_features (unused planned rows are
// zeros). Sums over channels (du) and over the batch (dk) run in a fixed order in the spectral
// domain: deterministic. One CudaFftConv serves one stream.
//
// Plans are 64-bit (cufftMakePlanMany64: rows × n_fft may pass 2^31 at 1.3b) and never
// allocate their own work areas (cufftSetAutoAllocation(0)): every plan of every convolver
// built on one stream runs in one CufftWorkArea, sized by the largest plan's need, since the
// transforms of one stream never overlap. Needs no CUDA headers.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/ssm/fft_conv.h"

struct CUstream_st;

namespace brt::kernels::cuda {

// One device work area shared by the cuFFT plans of one stream (the backend owns one). It
// grows, at setup only, to the largest plan's need and re-points every plan it serves.
class CufftWorkArea {
 public:
  explicit CufftWorkArea(CUstream_st* stream);
  ~CufftWorkArea();
  CufftWorkArea(const CufftWorkArea&) = delete;
  CufftWorkArea& operator=(const CufftWorkArea&) = delete;
  // Serves `plan` (a cufftHandle), which needs `bytes`; grows the area first if needed.
  void attach(int plan, std::size_t bytes);
  void detach(int plan);
  std::size_t bytes() const { return bytes_; }

 private:
  CUstream_st* stream_;
  void* area_ = nullptr;
  std::size_t bytes_ = 0;
  std::vector<int> plans_;
};

class CudaFftConv {
 public:
  // work_area: the stream's shared area (null: this convolver makes one of its own).
  CudaFftConv(int length, int channels, int max_batch, int max_features,
              CUstream_st* stream = nullptr, std::shared_ptr<CufftWorkArea> work_area = nullptr);
  ~CudaFftConv();
  CudaFftConv(const CudaFftConv&) = delete;
  CudaFftConv& operator=(const CudaFftConv&) = delete;

  int n_fft() const;
  // Spectra and staging held by this object (= ssm::cuda_fft_conv_device_bytes().buffers).
  std::size_t device_bytes() const;
  std::size_t work_area_bytes() const;  // the largest of this object's plans' cuFFT needs

  void forward(const ssm::FftConvDims& d, const float* k, const float* u, const float* dskip,
               float* y);
  void backward(const ssm::FftConvDims& d, const float* k, const float* u, const float* dskip,
                const float* dy, float* du, float* dk, float* ddskip);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace brt::kernels::cuda
