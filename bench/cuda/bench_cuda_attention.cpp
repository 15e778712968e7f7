// GPU benchmark: the measured bf16 (and fp32) cuBLAS GEMM peak, then the sliding-window
// attention (model.md §3.2) forward and backward at a production shape on both backends a run can
// use: fp32 (the fused warp-per-row kernels on the CUDA cores) and bf16 (the tensor-core path
// of attention_tc.cu, which `--precision bf16` training runs), reported as achieved TFLOP/s and
// as ratios to those peaks (model.md §10 counts: forward 4·W·A per token, the unmasked half of the
// W×2W tile; backward counted as 2× forward). Timed with CUDA events after warm-up, median of
// repeats, on random (never zero) inputs: all-zero operands draw less power and overstate the rate.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device/device_arena.h"
#include "kernels/cuda/launchers.h"

namespace {

using brt::kernels::cuda::DeviceArena;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("bench_cuda_attention: ") + what + ": " +
                             cudaGetErrorString(status));
  }
}

double median_ms(cudaStream_t stream, int warmup, int repeats, const std::function<void()>& body) {
  return brt::kernels::cuda::median_event_ms(stream, warmup, repeats, body);
}

void fill_random(float* dev, std::size_t n, float sd, std::mt19937& gen, cudaStream_t stream) {
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> host(n);
  for (float& x : host) x = dist(gen);
  check(cudaMemcpyAsync(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream),
        "upload");
  check(cudaStreamSynchronize(stream), "upload");  // `host` is freed on return
}

}  // namespace

int main() {
  namespace kc = brt::kernels::cuda;
  if (const kc::CudaDeviceQuery query = kc::query_cuda_devices(); query.count == 0) {
    // Under BRT_REQUIRE_GPU=1 (scripts/gpu-check.sh on a machine with a GPU) that is a failure.
    const char* required = std::getenv("BRT_REQUIRE_GPU");
    const bool fail = required != nullptr && std::string(required) == "1";
    std::printf("bench_cuda_attention: %s; %s\n", query.describe().c_str(), fail ? "FAILED" : "skipped");
    return fail ? 1 : 0;
  }
  try {
    std::mt19937 gen(12345);
    std::printf("device: %s\n", kc::cuda_device_description(0).c_str());
    const double bf16_peak = kc::measure_gemm_peak_tflops(kc::Precision::kBf16, 8192);
    const double fp32_peak = kc::measure_gemm_peak_tflops(kc::Precision::kFp32, 8192);
    std::printf("cuBLAS 8192^3 bf16 (fp32 accumulate): %.1f TFLOP/s (measured peak)\n", bf16_peak);
    std::printf("cuBLAS 8192^3 fp32 (no TF32):         %.1f TFLOP/s\n", fp32_peak);

    // A 1.3b-like layer: W = 512, H = 8, dh = 128 (A = 1024), B = 4 streams of N = 4096.
    const brt::kernels::WindowAttnDims d{4, 4096, 512, 8, 128};
    const std::size_t act = std::size_t(d.batch) * d.seq * d.width();
    const std::size_t cache = std::size_t(d.batch) * d.window * d.width();
    const std::size_t probs = std::size_t(d.batch) * d.blocks() * d.heads * d.window * 2 * d.window;
    DeviceArena arena((9 * act + 2 * cache + probs) * sizeof(float) + (std::size_t{16} << 20),
                      "attention bench");
    cudaStream_t stream;  // the backends' stream, so events time exactly their kernels
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
    auto buf = [&](std::size_t n, float sd) {
      float* p = arena.allocate_array<float>(n, "bench buffer");
      fill_random(p, n, sd, gen, stream);
      return p;
    };
    float *q = buf(act, 0.1f), *k = buf(act, 0.1f), *v = buf(act, 1.0f);
    float *kc_ = buf(cache, 0.1f), *vc = buf(cache, 1.0f);
    float *bias = buf(std::size_t(d.heads) * 32, 0.2f), *scale = buf(d.heads, 1.0f);
    float *out = buf(act, 1.0f), *dout = buf(act, 1.0f);
    float *dq = buf(act, 1.0f), *dk = buf(act, 1.0f), *dv = buf(act, 1.0f);
    float *dbias = buf(std::size_t(d.heads) * 32, 1.0f), *dscale = buf(d.heads, 1.0f);
    float* p = arena.allocate_array<float>(probs, "probs");
    const double tokens = double(d.batch) * d.seq;
    const double fwd_flops = 4.0 * d.window * d.width() * tokens;
    std::printf("window attention B=%d N=%d W=%d H=%d dh=%d\n", d.batch, d.seq, d.window, d.heads,
                d.head_dim);
    for (const kc::Precision precision : {kc::Precision::kFp32, kc::Precision::kBf16}) {
      kc::CudaOptions options;
      options.stream = stream;
      options.precision = precision;
      // The tensor-core path's packed operands and score tiles live in the backend's scratch.
      options.workspace_bytes = std::max(options.workspace_bytes,
                                         kc::window_attention_tc_scratch_bytes(d) + (std::size_t{64} << 20));
      auto backend = kc::make_cuda_backend(options);
      auto timed = [&](const std::function<void()>& body) {
        check(cudaStreamSynchronize(stream), "sync");
        return median_ms(stream, 2, 7, body);
      };
      const double fwd_ms = timed([&] {
        backend->window_attention_forward(d, q, k, v, kc_, vc, bias, scale, out, p);
      });
      const double bwd_ms = timed([&] {
        backend->window_attention_backward(d, q, k, v, kc_, vc, bias, scale, p, dout, dq, dk, dv,
                                           dbias, dscale);
      });
      const double fwd_tflops = fwd_flops / (fwd_ms * 1e-3) / 1e12;
      const double bwd_tflops = 2 * fwd_flops / (bwd_ms * 1e-3) / 1e12;
      std::printf("%s\n", precision == kc::Precision::kFp32
                              ? " fp32 (fused kernels on the CUDA cores):"
                              : " bf16 (tensor cores, cuBLAS batched GEMMs: what --precision bf16 trains with):");
      std::printf("  forward : %8.3f ms  %6.2f TFLOP/s  = %.4f of bf16 peak, %.3f of fp32 gemm\n",
                  fwd_ms, fwd_tflops, fwd_tflops / bf16_peak, fwd_tflops / fp32_peak);
      std::printf("  backward: %8.3f ms  %6.2f TFLOP/s  = %.4f of bf16 peak, %.3f of fp32 gemm\n",
                  bwd_ms, bwd_tflops, bwd_tflops / bf16_peak, bwd_tflops / fp32_peak);
    }
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
