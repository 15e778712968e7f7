#include "kernels/cuda/ssm/fft_conv.h"

#include <cuda_runtime.h>
#include <cufft.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/device_arena.h"
#include "kernels/cuda/launchers.h"

namespace brt::kernels::cuda {

namespace {

void check_cufft(cufftResult status, const char* what) {
  if (status != CUFFT_SUCCESS) {
    throw std::runtime_error(std::string("kernels/cuda fft_conv: ") + what +
                             " failed with cufftResult " + std::to_string(int(status)));
  }
}

// A batched 1-D transform of length n over `rows` contiguous rows (real rows of n entries,
// complex rows of n/2 + 1), 64-bit sizes, without a work area of its own (the shared one is
// attached by the caller); *work gets the bytes it needs.
cufftHandle make_plan(long long n, long long rows, cufftType type, cudaStream_t stream,
                      const char* what, std::size_t* work) {
  cufftHandle plan = 0;
  check_cufft(cufftCreate(&plan), what);
  try {
    check_cufft(cufftSetAutoAllocation(plan, 0), what);
    long long length = n;
    check_cufft(cufftMakePlanMany64(plan, 1, &length, nullptr, 1, 0, nullptr, 1, 0, type, rows,
                                    work),
                what);
    check_cufft(cufftSetStream(plan, stream), what);
  } catch (...) {
    cufftDestroy(plan);
    throw;
  }
  return plan;
}

}  // namespace

CufftWorkArea::CufftWorkArea(CUstream_st* stream) : stream_(stream) {}

CufftWorkArea::~CufftWorkArea() {
  if (area_ != nullptr) cudaFree(area_);
}

void CufftWorkArea::attach(int plan, std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 256);
  if (bytes > bytes_) {
    // Setup only (plans are made when layers are built): nothing of this stream may still run
    // in the old area when it is replaced.
    BRT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    void* grown = nullptr;
    const cudaError_t status = cudaMalloc(&grown, bytes);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      throw std::runtime_error("kernels/cuda fft_conv: out of device memory for the shared cuFFT "
                               "work area (" + std::to_string(bytes) + " bytes): " +
                               cudaGetErrorString(status));
    }
    if (area_ != nullptr) cudaFree(area_);
    area_ = grown;
    bytes_ = bytes;
    for (const int p : plans_) check_cufft(cufftSetWorkArea(p, area_), "cufftSetWorkArea");
  }
  check_cufft(cufftSetWorkArea(plan, area_), "cufftSetWorkArea");
  plans_.push_back(plan);
}

void CufftWorkArea::detach(int plan) {
  plans_.erase(std::remove(plans_.begin(), plans_.end(), plan), plans_.end());
}

struct CudaFftConv::State {
  FftConvShape shape{};
  long long Ru = 0, Rk = 0, Ry = 0;  // planned rows: input (Bm*Fm), kernel (C*Fm), output (Bm*C*Fm)
  cudaStream_t stream = nullptr;
  DeviceArena arena;
  float* real = nullptr;        // [Ry][n_fft] staging for any transform
  float2* input_spec = nullptr;   // [Ru][n_freq]
  float2* kernel_spec = nullptr;  // [Rk][n_freq]
  float2* output_spec = nullptr;  // [Ry][n_freq]: Y, or dY in backward
  float2* dinput_spec = nullptr;  // [Ru][n_freq]
  float2* dkernel_spec = nullptr; // [Rk][n_freq]
  std::shared_ptr<CufftWorkArea> work;
  std::size_t work_needed = 0;  // the largest plan's
  cufftHandle r2c_u = 0, r2c_k = 0, r2c_y = 0, c2r_u = 0, c2r_k = 0, c2r_y = 0;

  cufftHandle plan(long long rows, cufftType type, const char* what) {
    std::size_t need = 0;
    const cufftHandle p = make_plan(shape.n_fft, rows, type, stream, what, &need);
    try {
      work->attach(p, need);
    } catch (...) {
      cufftDestroy(p);
      throw;
    }
    work_needed = std::max(work_needed, need);
    return p;
  }
  ~State() {
    for (cufftHandle p : {r2c_u, r2c_k, r2c_y, c2r_u, c2r_k, c2r_y}) {
      if (p == 0) continue;
      work->detach(p);
      cufftDestroy(p);
    }
  }
};

CudaFftConv::CudaFftConv(int length, int channels, int max_batch, int max_features,
                         CUstream_st* stream, std::shared_ptr<CufftWorkArea> work_area)
    : state_(std::make_unique<State>()) {
  if (length < 1 || channels < 1 || max_batch < 1 || max_features < 1) {
    throw std::runtime_error("kernels/cuda fft_conv: L, C, max_batch, max_features must be >= 1"
                             " (got L=" + std::to_string(length) + ", C=" +
                             std::to_string(channels) + ", B=" + std::to_string(max_batch) +
                             ", F=" + std::to_string(max_features) + ")");
  }
  State& s = *state_;
  const int n_fft = ssm::fft_friendly_size(2 * length);
  s.shape = {max_batch, channels, length, max_features, max_batch, max_features, n_fft,
             n_fft / 2 + 1};
  s.stream = stream;
  s.work = work_area ? std::move(work_area) : std::make_shared<CufftWorkArea>(stream);
  s.Ru = (long long)max_batch * max_features;
  s.Rk = (long long)channels * max_features;
  s.Ry = s.Ru * channels;
  ArenaPlan plan;
  const std::size_t nf = static_cast<std::size_t>(s.shape.n_freq);
  const std::size_t real_at = plan.add_array<float>("real", std::size_t(s.Ry) * n_fft);
  const std::size_t in_at = plan.add_array<float2>("input_spec", s.Ru * nf);
  const std::size_t k_at = plan.add_array<float2>("kernel_spec", s.Rk * nf);
  const std::size_t out_at = plan.add_array<float2>("output_spec", s.Ry * nf);
  const std::size_t din_at = plan.add_array<float2>("dinput_spec", s.Ru * nf);
  const std::size_t dk_at = plan.add_array<float2>("dkernel_spec", s.Rk * nf);
  // brt-dist plan counts this convolver by the same arithmetic (kernels/ssm/fft_conv_dims.h).
  if ((long long)plan.total_bytes() !=
      ssm::cuda_fft_conv_device_bytes(length, channels, max_batch, max_features).buffers)
    throw std::logic_error("kernels/cuda fft_conv: the planner's byte count of the convolver "
                           "(cuda_fft_conv_device_bytes) no longer matches its arena:\n" +
                           plan.describe());
  s.arena = DeviceArena(plan.total_bytes(), "CudaFftConv");
  s.real = static_cast<float*>(s.arena.at(real_at, 0));
  s.input_spec = static_cast<float2*>(s.arena.at(in_at, 0));
  s.kernel_spec = static_cast<float2*>(s.arena.at(k_at, 0));
  s.output_spec = static_cast<float2*>(s.arena.at(out_at, 0));
  s.dinput_spec = static_cast<float2*>(s.arena.at(din_at, 0));
  s.dkernel_spec = static_cast<float2*>(s.arena.at(dk_at, 0));
  s.r2c_u = s.plan(s.Ru, CUFFT_R2C, "plan r2c input");
  s.r2c_k = s.plan(s.Rk, CUFFT_R2C, "plan r2c kernel");
  s.r2c_y = s.plan(s.Ry, CUFFT_R2C, "plan r2c output");
  s.c2r_u = s.plan(s.Ru, CUFFT_C2R, "plan c2r input");
  s.c2r_k = s.plan(s.Rk, CUFFT_C2R, "plan c2r kernel");
  s.c2r_y = s.plan(s.Ry, CUFFT_C2R, "plan c2r output");
}

CudaFftConv::~CudaFftConv() = default;

int CudaFftConv::n_fft() const { return state_->shape.n_fft; }
std::size_t CudaFftConv::device_bytes() const { return state_->arena.capacity(); }
std::size_t CudaFftConv::work_area_bytes() const { return state_->work_needed; }

namespace {

FftConvShape call_shape(const FftConvShape& planned, const ssm::FftConvDims& d, const char* who) {
  if (d.length != planned.L || d.channels != planned.C || d.batch < 1 || d.features < 1 ||
      d.batch > planned.Bm || d.features > planned.Fm) {
    throw std::runtime_error(
        std::string("kernels/cuda fft_conv ") + who + ": dims B=" + std::to_string(d.batch) +
        " C=" + std::to_string(d.channels) + " L=" + std::to_string(d.length) +
        " F=" + std::to_string(d.features) + " do not fit the plan (L=" +
        std::to_string(planned.L) + ", C=" + std::to_string(planned.C) + ", B <= " +
        std::to_string(planned.Bm) + ", F <= " + std::to_string(planned.Fm) + ")");
  }
  FftConvShape s = planned;
  s.B = d.batch;
  s.F = d.features;
  return s;
}

}  // namespace

void CudaFftConv::forward(const ssm::FftConvDims& d, const float* k, const float* u,
                          const float* dskip, float* y) {
  State& st = *state_;
  const FftConvShape s = call_shape(st.shape, d, "forward");
  launch_fft_gather_input(s, u, st.real, st.stream);
  check_cufft(cufftExecR2C(st.r2c_u, st.real, st.input_spec), "r2c input");
  launch_fft_gather_kernel(s, k, dskip, st.real, st.stream);
  check_cufft(cufftExecR2C(st.r2c_k, st.real, st.kernel_spec), "r2c kernel");
  launch_fft_multiply(s, st.input_spec, st.kernel_spec, st.output_spec, st.stream);
  check_cufft(cufftExecC2R(st.c2r_y, st.output_spec, st.real), "c2r output");
  launch_fft_scatter_output(s, st.real, y, st.stream);
}

void CudaFftConv::backward(const ssm::FftConvDims& d, const float* k, const float* u,
                           const float* dskip, const float* dy, float* du, float* dk,
                           float* ddskip) {
  State& st = *state_;
  const FftConvShape s = call_shape(st.shape, d, "backward");
  if (dskip == nullptr) ddskip = nullptr;  // contract: ignored without a skip term
  const bool want_du = du != nullptr, want_dk = dk != nullptr || ddskip != nullptr;
  if (!want_du && !want_dk) return;
  launch_fft_gather_output_grad(s, dy, st.real, st.stream);
  check_cufft(cufftExecR2C(st.r2c_y, st.real, st.output_spec), "r2c output gradient");
  if (want_du) {
    launch_fft_gather_kernel(s, k, dskip, st.real, st.stream);
    check_cufft(cufftExecR2C(st.r2c_k, st.real, st.kernel_spec), "r2c kernel");
  }
  if (want_dk) {
    launch_fft_gather_input(s, u, st.real, st.stream);
    check_cufft(cufftExecR2C(st.r2c_u, st.real, st.input_spec), "r2c input");
  }
  launch_fft_correlate(s, st.input_spec, st.kernel_spec, st.output_spec,
                       want_du ? st.dinput_spec : nullptr, want_dk ? st.dkernel_spec : nullptr,
                       st.stream);
  if (want_du) {
    check_cufft(cufftExecC2R(st.c2r_u, st.dinput_spec, st.real), "c2r input gradient");
    launch_fft_scatter_input_grad(s, st.real, du, st.stream);
  }
  if (want_dk) {
    check_cufft(cufftExecC2R(st.c2r_k, st.dkernel_spec, st.real), "c2r kernel gradient");
    launch_fft_scatter_kernel_grad(s, st.real, dk, ddskip, st.stream);
  }
}

}  // namespace brt::kernels::cuda
