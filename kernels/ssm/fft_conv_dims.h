// The shape of one causal FFT convolution call (kernels/ssm/fft_conv.h has the contract), in
// a header of its own so kernels/backend.h can name it without FFTW's headers.
#pragma once

namespace brt::kernels::ssm {

struct FftConvDims {
  int batch;     // B independent sequences sharing the kernels
  int channels;  // C kernels per feature (SH 1, MH H, MF S_ctx)
  int length;    // L
  int features;  // F (Ds)
};

// Smallest n >= min_n whose only prime factors are 2, 3 and 5 (fast FFTW sizes).
int fft_friendly_size(int min_n);

}  // namespace brt::kernels::ssm
