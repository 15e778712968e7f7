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

// Device memory of the CUDA convolver (kernels/cuda/ssm/fft_conv.h) planned for (length, channels,
// max_batch, max_features), for brt-dist plan: `buffers` its staging rows [B·C·F, n_fft] and
// five spectra (each 256-byte aligned, exactly what it allocates); `work_area` the model of the
// cuFFT work area its largest plan needs (one copy of that plan's complex data; the real need is
// cuFFT's, printed by the GPU tests), shared by every convolver of a backend.
struct FftConvDeviceBytes {
  long long buffers = 0, work_area = 0;
};
FftConvDeviceBytes cuda_fft_conv_device_bytes(int length, int channels, int max_batch,
                                              int max_features);

}  // namespace brt::kernels::ssm
