// The CUDA backend: kernels::Backend<float> on DEVICE pointers (docs/gpu.md).
//
// Every buffer passed to a CudaBackend lives in device memory (DeviceArena); host pointers
// are undefined behaviour. Work is enqueued on the backend's stream in call order; the only
// call that waits for the device is softmax_xent_forward_backward (it returns the loss sum).
// The backend owns one scratch arena, sized by CudaOptions::workspace_bytes and allocated
// once at construction: kernels never allocate, and a call whose scratch does not fit throws
// std::runtime_error naming the kernel and the bytes it needed.
//
// Precision (CudaOptions::precision):
//  - kFp32: every kernel in fp32 with fp32 reductions; cuBLAS with TF32 disabled, so gemm
//    matches the CPU backend to fp32 rounding.
//  - kBf16: gemm operands are rounded to bf16 on the fly (fp32 accumulation, fp32 output,
//    cublasGemmEx), the weights once per forward into a shadow (bf16_weight_shadow); every
//    other kernel stays fp32.
// Determinism: same inputs, same device, same options -> bit-identical outputs. No kernel
// uses floating-point atomics; reductions have a fixed partition and order.
//
// This header needs no CUDA headers, so CPU-only code can include it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "kernels/call_timer.h"

struct CUstream_st;  // = cudaStream_t's pointee

namespace brt::kernels::cuda {

enum class Precision { kFp32, kBf16 };
const char* precision_name(Precision precision);
// "fp32" or "bf16"; throws std::runtime_error naming the value otherwise.
Precision parse_precision(const std::string& name);

struct CudaOptions {
  int device = 0;                       // CUDA device ordinal the backend runs on
  Precision precision = Precision::kFp32;
  CUstream_st* stream = nullptr;        // null: the backend creates (and owns) its stream
  std::size_t workspace_bytes = std::size_t{256} << 20;  // scratch arena, allocated once
  // bf16: round the model's weights once per forward into a bf16 shadow (Backend::weights_fixed)
  // that the products read, instead of rounding a weight operand at every call. Off: per call
  // (the same results; tests compare the two).
  bool bf16_weight_shadow = true;
};

// What cudaGetDeviceCount said: the count, and when it failed the CUDA error's name and text
// ("cudaErrorInsufficientDriver (CUDA driver version is insufficient for CUDA runtime
// version)"), so a machine whose GPU the runtime cannot use is never mistaken for one without
// a GPU. Never throws.
struct CudaDeviceQuery {
  int count = 0;
  std::string error;  // "" when the query succeeded (count may still be 0)
  // "1 CUDA device", "no CUDA device", or "no usable CUDA device: cudaError... (...)".
  std::string describe() const;
};
CudaDeviceQuery query_cuda_devices();
// Number of usable CUDA devices (query_cuda_devices().count): 0 when there is no driver, no
// GPU or any CUDA error. Never throws and never aborts, so tests can call it to decide whether
// to skip; query_cuda_devices() says why it is 0.
int cuda_device_count();
// "NVIDIA H200 (sm_90, 132 SMs, 139 GiB)" for run logs; throws if the device is unusable.
std::string cuda_device_description(int device);
// Total memory of the device, bytes (cudaDeviceProp::totalGlobalMem).
std::size_t cuda_device_memory_bytes(int device);

// Selects the GPU of this process: cudaSetDevice(local_rank % cuda_device_count()). Returns
// the ordinal chosen; throws std::runtime_error naming the rank when there is no GPU.
int select_device_for_local_rank(int local_rank);

// Blocks until all work on the backend's stream has finished (throws on a device error).
void synchronize(Backend<float>& backend);

std::unique_ptr<Backend<float>> make_cuda_backend(const CudaOptions& options = {});

// A CallTimer (kernels/call_timer.h) of CUDA events on `backend`'s stream: begin() and end()
// record an event each (no wait), collect() waits for the last one and sums each pair's
// cudaEventElapsedTime by slot. The events are made as needed and reused after each collect.
// Throws std::invalid_argument for another backend; not for use inside a graph capture.
std::unique_ptr<CallTimer> make_event_timer(Backend<float>& backend);

// Where a CUDA backend in bf16 has run the MLP's ReLU and the residual products so far:
// cuBLASLt (its epilogues, the residual as C) or, where it has no algorithm, the products and
// their own kernels (EpilogueGemm::describe); "" for fp32, before any step, or for another
// backend.
std::string describe_epilogues(Backend<float>& backend);

// Whether a CUDA backend holds p ([rows, cols], dense) in bf16 for its products
// (Backend::linear_relu_forward's y_for_products, where the epilogue ran); false for another
// backend. For tests and diagnostics: p's bytes are then not fp32.
bool holds_bf16_activation(Backend<float>& backend, const float* p, int rows, int cols);

// The stream a CUDA backend enqueues on (a cudaStream_t), so collectives (NCCL) and timers can
// be ordered after its kernels. Throws std::invalid_argument for another backend.
CUstream_st* stream_handle(Backend<float>& backend);

// Every host wait of the backend (synchronize, its Memory's copies to and from the host) polls
// its stream and calls `watch(seconds waited)` between polls, instead of blocking in
// cudaStreamSynchronize: a run with NCCL collectives on that stream installs the communicators'
// health check here, so a dead peer ends the job with the timeout report instead of a hang
// (kernels/cuda/device/stream_wait.h). An empty watch restores plain waits. Throws
// std::invalid_argument for another backend.
void set_wait_watch(Backend<float>& backend, std::function<void(double waited_seconds)> watch);

// TFLOP/s of an n×n×n cuBLAS product on the current device: bf16 operands with fp32
// accumulation on the tensor cores (the bf16 dense peak, MFU's denominator), or plain fp32
// (no TF32). Warm-up, then the median of timed repeats on random operands.
double measure_gemm_peak_tflops(Precision precision, int n = 8192, unsigned seed = 12345);
// Median milliseconds (CUDA events on `stream`) of `repeats` runs of body after `warmup`.
double median_event_ms(CUstream_st* stream, int warmup, int repeats,
                       const std::function<void()>& body);

}  // namespace brt::kernels::cuda
