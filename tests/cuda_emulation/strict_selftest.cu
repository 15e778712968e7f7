// The strict emulator's own rules (tests/cuda_emulation/run.sh <build> strict; ctest
// cuda_emulated_strict_rules; docs/gpu.md "The host emulator"): for each rule, the call or
// launch that breaks it fails as on a GPU, and the correct form passes. Written as CUDA and
// rewritten by transform.py like kernels/cuda, so the launch and attribute rewrites are tested
// too. Emulator-only: it relies on the emulator's adversarial (but legal) scheduling.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

int failures = 0;
void expect(bool ok, const char* what) {
  std::printf("  %-86s %s\n", what, ok ? "ok" : "FAIL");
  if (!ok) ++failures;
}
float* device_floats(int n) {
  float* p = nullptr;
  cudaMalloc(&p, sizeof(float) * n);
  return p;
}
std::vector<float> download(const float* p, int n) {
  std::vector<float> h(n);
  cudaDeviceSynchronize();
  cudaMemcpy(h.data(), p, sizeof(float) * n, cudaMemcpyDeviceToHost);
  return h;
}

__global__ void fill_kernel(float* x, int n, float v) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) x[i] = v;
}
__global__ void copy_kernel(const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) y[i] = x[i];
}
__global__ void __launch_bounds__(256) bounded_kernel(float* x) { x[threadIdx.x] = 1.0f; }
__global__ void dynamic_shared_kernel(float* out) {
  extern __shared__ float smem[];
  smem[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = smem[(threadIdx.x + 1) % blockDim.x];
}
__global__ void divergent_barrier_kernel(float* x) {
  if (threadIdx.x < 16) __syncthreads();
  x[threadIdx.x] = 1.0f;
}
__global__ void partial_warp_shuffle_kernel(float* x) { x[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1); }
__global__ void racy_kernel(float* out, bool barrier) {
  __shared__ float value;
  if (threadIdx.x == 0) value = 7.0f;
  if (barrier) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = value;
}
__global__ void block_order_kernel(int* counter, float* order) {
  if (threadIdx.x == 0) order[blockIdx.x] = float(atomicAdd(counter, 1));
}

void launch_limits() {
  std::printf("launch limits (H200, sm_90)\n");
  float* x = device_floats(1024);
  fill_kernel<<<1, 1025>>>(x, 1024, 1.0f);
  expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "1025 threads a block: cudaErrorInvalidConfiguration");
  fill_kernel<<<dim3(1), dim3(1, 1, 65)>>>(x, 1024, 1.0f);
  expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "blockDim.z 65: cudaErrorInvalidConfiguration");
  fill_kernel<<<0, 32>>>(x, 1024, 1.0f);
  expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "an empty grid: cudaErrorInvalidConfiguration");
  fill_kernel<<<dim3(1, 65536), 32>>>(x, 1024, 1.0f);
  expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "gridDim.y 65536: cudaErrorInvalidConfiguration");
  bounded_kernel<<<1, 512>>>(x);
  expect(cudaGetLastError() == cudaErrorLaunchOutOfResources, "512 threads, __launch_bounds__(256): cudaErrorLaunchOutOfResources");
  bounded_kernel<<<1, 256>>>(x);
  expect(cudaGetLastError() == cudaSuccess, "256 threads, __launch_bounds__(256): launches");
  dynamic_shared_kernel<<<1, 32, 49 * 1024>>>(x);
  expect(cudaGetLastError() == cudaErrorInvalidValue, "49 KiB dynamic shared memory without the attribute: cudaErrorInvalidValue");
  expect(cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 228 * 1024) == cudaErrorInvalidValue,
         "cudaFuncAttributeMaxDynamicSharedMemorySize 228 KiB: cudaErrorInvalidValue");
  (void)cudaGetLastError();
  expect(cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024) == cudaSuccess,
         "cudaFuncAttributeMaxDynamicSharedMemorySize 64 KiB: accepted");
  dynamic_shared_kernel<<<1, 32, 49 * 1024>>>(x);
  expect(cudaGetLastError() == cudaSuccess, "49 KiB dynamic shared memory with the 64 KiB attribute: launches");
  dynamic_shared_kernel<<<1, 32, 65 * 1024>>>(x);
  expect(cudaGetLastError() == cudaErrorInvalidValue, "65 KiB dynamic shared memory with the 64 KiB attribute: cudaErrorInvalidValue");
  const std::vector<float> out = download(x, 32);
  expect(out[0] == 1.0f && out[31] == 0.0f, "the launched shared-memory kernel ran (out[i] = smem[i + 1])");
  cudaFree(x);
}

void kernel_faults() {
  std::printf("faults inside kernels (sticky, reported at the next synchronisation)\n");
  float* x = device_floats(64);
  divergent_barrier_kernel<<<1, 32>>>(x);
  expect(cudaGetLastError() == cudaSuccess && cudaDeviceSynchronize() == cudaErrorLaunchFailure,
         "__syncthreads reached by half the block: cudaErrorLaunchFailure at the synchronisation");
  cudaDeviceReset();
  partial_warp_shuffle_kernel<<<1, 16>>>(x);
  expect(cudaDeviceSynchronize() == cudaErrorLaunchFailure, "a full-mask shuffle in a 16-thread block: cudaErrorLaunchFailure");
  cudaDeviceReset();
  cudaFree(x);
}

void interleavings() {
  std::printf("shuffled blocks and thread interleavings\n");
  float* out = device_floats(64 * 64);
  racy_kernel<<<64, 64>>>(out, false);
  std::vector<float> v = download(out, 64 * 64);
  int sevens = 0;
  for (float f : v) sevens += f == 7.0f;
  expect(sevens > 0 && sevens < 64 * 64, "a shared value read without __syncthreads: some threads see it, some garbage");
  racy_kernel<<<64, 64>>>(out, true);
  v = download(out, 64 * 64);
  sevens = 0;
  for (float f : v) sevens += f == 7.0f;
  expect(sevens == 64 * 64, "the same read after __syncthreads: every thread sees it");
  int* counter = nullptr;
  cudaMalloc(&counter, sizeof(int));
  cudaMemset(counter, 0, sizeof(int));
  block_order_kernel<<<64, 32>>>(counter, out);
  v = download(out, 64);
  int in_order = 0;
  for (int i = 0; i < 64; ++i) in_order += v[i] == float(i);
  expect(in_order < 64, "blocks do not run in index order");
  cudaFree(counter);
  cudaFree(out);
}

// x (device) = 1..n from a host vector by `upload`, then y = x by a kernel on `consumer`.
bool uploaded_then_copied(cudaStream_t consumer, bool async_on_consumer) {
  const int n = 256;
  std::vector<float> h(n);
  for (int i = 0; i < n; ++i) h[i] = float(i + 1);
  float *x = device_floats(n), *y = device_floats(n);
  if (async_on_consumer) cudaMemcpyAsync(x, h.data(), sizeof(float) * n, cudaMemcpyHostToDevice, consumer);
  else cudaMemcpy(x, h.data(), sizeof(float) * n, cudaMemcpyHostToDevice);
  copy_kernel<<<2, 128, 0, consumer>>>(x, y, n);
  cudaStreamSynchronize(consumer);
  std::vector<float> got(n);
  cudaMemcpy(got.data(), y, sizeof(float) * n, cudaMemcpyDeviceToHost);
  cudaDeviceSynchronize();
  cudaFree(x);
  cudaFree(y);
  return got == h;
}

void streams() {
  std::printf("streams run when waited for; cross-stream order only through events\n");
  cudaStream_t nb = nullptr, blocking = nullptr, other = nullptr;
  cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking);
  cudaStreamCreate(&blocking);
  cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking);
  expect(!uploaded_then_copied(nb, false), "pageable cudaMemcpy, then a kernel on a non-blocking stream: reads stale memory");
  expect(uploaded_then_copied(blocking, false), "pageable cudaMemcpy, then a kernel on a blocking stream: ordered (legacy barrier)");
  expect(uploaded_then_copied(nb, true), "cudaMemcpyAsync on the kernel's own stream: ordered");
  const int n = 128;
  float *x = device_floats(n), *y = device_floats(n);
  fill_kernel<<<1, 128, 0, nb>>>(x, n, 3.0f);
  copy_kernel<<<1, 128, 0, other>>>(x, y, n);
  cudaStreamSynchronize(other);
  std::vector<float> got(n);
  cudaMemcpyAsync(got.data(), y, sizeof(float) * n, cudaMemcpyDeviceToHost, other);
  cudaStreamSynchronize(other);
  expect(got[0] != 3.0f, "producer and consumer on two streams without an event: the consumer runs first");
  cudaEvent_t produced = nullptr;
  cudaEventCreateWithFlags(&produced, cudaEventDisableTiming);
  fill_kernel<<<1, 128, 0, nb>>>(x, n, 4.0f);
  cudaEventRecord(produced, nb);
  cudaStreamWaitEvent(other, produced, 0);
  copy_kernel<<<1, 128, 0, other>>>(x, y, n);
  cudaMemcpyAsync(got.data(), y, sizeof(float) * n, cudaMemcpyDeviceToHost, other);
  cudaStreamSynchronize(other);
  expect(got[0] == 4.0f && got[n - 1] == 4.0f, "the same with cudaEventRecord + cudaStreamWaitEvent: ordered");
  fill_kernel<<<1, 128, 0, nb>>>(y, n, 5.0f);
  cudaMemcpy(got.data(), y, sizeof(float) * n, cudaMemcpyDeviceToHost);
  expect(got[0] != 5.0f, "cudaMemcpy D2H does not wait for a non-blocking stream");
  fill_kernel<<<1, 128, 0, blocking>>>(y, n, 7.0f);
  cudaMemcpy(got.data(), y, sizeof(float) * n, cudaMemcpyDeviceToHost);
  expect(got[0] == 7.0f, "... but waits for a blocking stream (the legacy stream's barrier)");
  expect(cudaStreamQuery(nb) == cudaErrorNotReady && cudaStreamQuery(nb) == cudaSuccess,
         "cudaStreamQuery of unfinished work: not ready once, then done");
  fill_kernel<<<1, 128, 0, nb>>>(y, n, 6.0f);
  cudaEventRecord(produced, nb);
  expect(cudaEventQuery(produced) == cudaErrorNotReady && cudaEventQuery(produced) == cudaSuccess,
         "cudaEventQuery likewise");
  std::vector<float> h(n, 8.0f);
  cudaMemcpyAsync(x, h.data(), sizeof(float) * n, cudaMemcpyHostToDevice, nb);
  h.assign(n, 9.0f);  // the host reuses its buffer before the copy ran
  cudaMemcpyAsync(got.data(), x, sizeof(float) * n, cudaMemcpyDeviceToHost, nb);
  cudaStreamSynchronize(nb);
  expect(got[0] == 9.0f, "cudaMemcpyAsync reads its host source when it runs, not when called");
  cudaEventDestroy(produced);
  cudaFree(x);
  cudaFree(y);
  cudaStreamDestroy(nb);
  cudaStreamDestroy(blocking);
  cudaStreamDestroy(other);
}

void capture() {
  std::printf("stream capture (cudaStreamCaptureModeThreadLocal, as kernels/cuda/stream_graph.cpp)\n");
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaGraph_t graph = nullptr;
  float* p = nullptr;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  expect(cudaMalloc(&p, 64) == cudaErrorStreamCaptureUnsupported, "cudaMalloc while capturing: cudaErrorStreamCaptureUnsupported");
  expect(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated && graph == nullptr, "... and the capture is invalidated");
  float* x = device_floats(32);
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  expect(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported, "cudaStreamSynchronize while capturing: refused");
  cudaStreamEndCapture(s, &graph);
  std::vector<float> pageable(32, 1.0f);
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  expect(cudaMemcpyAsync(x, pageable.data(), 128, cudaMemcpyHostToDevice, s) == cudaErrorStreamCaptureUnsupported,
         "cudaMemcpyAsync from pageable memory while capturing: refused");
  expect(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated, "... and the capture is invalidated");
  cudaStream_t blocking = nullptr;
  cudaStreamCreate(&blocking);
  cudaStreamBeginCapture(blocking, cudaStreamCaptureModeThreadLocal);
  expect(cudaMemsetAsync(x, 0, 128, nullptr) == cudaErrorStreamCaptureImplicit,
         "legacy-stream work while a blocking stream captures: cudaErrorStreamCaptureImplicit");
  cudaStreamEndCapture(blocking, &graph);
  cudaStreamDestroy(blocking);
  cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  expect(cudaMalloc(&p, 64) == cudaSuccess, "cudaMalloc in a relaxed capture: allowed");
  cudaStreamEndCapture(s, &graph);
  cudaGraphDestroy(graph);
  float* pinned = nullptr;
  cudaMallocHost(&pinned, 128);
  float *y = device_floats(32), *z = device_floats(32);
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  const bool recorded = cudaMemcpyAsync(y, pinned, 128, cudaMemcpyHostToDevice, s) == cudaSuccess;
  copy_kernel<<<1, 32, 0, s>>>(y, z, 32);
  expect(recorded && cudaStreamEndCapture(s, &graph) == cudaSuccess, "a copy from pinned memory and a kernel: captured");
  cudaGraphExec_t exec = nullptr;
  cudaGraphInstantiate(&exec, graph, 0);
  std::vector<float> got(32);
  for (float v : {5.0f, 6.0f}) {
    for (int i = 0; i < 32; ++i) pinned[i] = v;
    cudaGraphLaunch(exec, s);
    cudaMemcpyAsync(got.data(), z, 128, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    expect(got[31] == v, v == 5.0f ? "the replay reads the pinned buffer when it runs (5)" : "... and again (6)");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFreeHost(pinned);
  for (float* q : {p, x, y, z}) cudaFree(q);
  cudaStreamDestroy(s);
}

void cublas_rules() {
  std::printf("cuBLAS workspace (cuBLAS documentation: cublasSetStream resets it; 32 MiB on Hopper)\n");
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  const size_t big = size_t(32) << 20, small = size_t(4) << 20;
  void *ws = nullptr, *ws_small = nullptr;
  cudaMalloc(&ws, big);
  cudaMalloc(&ws_small, small);
  float* m = device_floats(16);
  cudaMemsetAsync(m, 0, 64, s);
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t h = nullptr;
  cublasCreate(&h);
  cublasSetWorkspace(h, ws, big);
  cublasSetStream(h, s);  // resets the workspace
  cudaGraph_t graph = nullptr;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  expect(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, m, 4, m, 4, &zero, m, 4) == CUBLAS_STATUS_NOT_SUPPORTED,
         "a GEMM captured after cublasSetStream reset the workspace: refused");
  cudaStreamEndCapture(s, &graph);
  cublasSetWorkspace(h, ws, big);
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  expect(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, m, 4, m, 4, &zero, m, 4) == CUBLAS_STATUS_SUCCESS,
         "with cublasSetWorkspace after cublasSetStream: captured");
  expect(cudaStreamEndCapture(s, &graph) == cudaSuccess, "... and the capture ends");
  cudaGraphDestroy(graph);
  cublasSetWorkspace(h, ws_small, small);
  expect(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, m, 4, m, 4, &zero, m, 4) == CUBLAS_STATUS_INVALID_VALUE,
         "a 4 MiB user workspace on (emulated) Hopper: refused");
  std::vector<char> host(small);
  expect(cublasSetWorkspace(h, host.data(), small) == CUBLAS_STATUS_INVALID_VALUE, "host memory as the workspace: refused");
  cublasDestroy(h);
  cudaStreamSynchronize(s);
  for (void* p : {ws, ws_small, static_cast<void*>(m)}) cudaFree(p);
  cudaStreamDestroy(s);
}

void cufft_rules() {
  std::printf("cuFFT plans and work areas\n");
  cufftHandle plan = 0;
  int n = 1 << 20;
  expect(cufftPlanMany(&plan, 1, &n, nullptr, 1, 0, nullptr, 1, 0, CUFFT_R2C, 4096) == CUFFT_INVALID_SIZE,
         "cufftPlanMany with n x batch over INT32_MAX: CUFFT_INVALID_SIZE");
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  const long long len = 64, rows = 3;
  cufftCreate(&plan);
  cufftSetAutoAllocation(plan, 0);
  long long length = len;
  size_t work = 0;
  expect(cufftMakePlanMany64(plan, 1, &length, nullptr, 1, 0, nullptr, 1, 0, CUFFT_R2C, rows, &work) == CUFFT_SUCCESS &&
             work == size_t(rows * (len / 2 + 1) * 8),
         "cufftMakePlanMany64 without auto-allocation: work size rows x (n/2 + 1) x 8");
  cufftSetStream(plan, s);
  float* in = device_floats(int(rows * len));
  float2* out = nullptr;
  cudaMalloc(&out, sizeof(float2) * rows * (len / 2 + 1));
  fill_kernel<<<1, 64, 0, s>>>(in, int(rows * len), 1.0f);
  expect(cufftExecR2C(plan, in, out) == CUFFT_INVALID_VALUE, "an exec without a work area: CUFFT_INVALID_VALUE");
  void *area = nullptr, *too_small = nullptr;
  cudaMalloc(&too_small, work - 8);
  cufftSetWorkArea(plan, too_small);
  expect(cufftExecR2C(plan, in, out) == CUFFT_INVALID_VALUE, "an exec with a work area 8 bytes short: CUFFT_INVALID_VALUE");
  cudaMalloc(&area, work);
  cufftSetWorkArea(plan, area);
  cudaGraph_t graph = nullptr;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  expect(cufftExecR2C(plan, in, out) == CUFFT_SUCCESS, "an exec with its work area, inside a capture: recorded");
  cudaStreamEndCapture(s, &graph);
  cudaGraphExec_t exec = nullptr;
  cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphLaunch(exec, s);
  std::vector<float2> spec(size_t(rows * (len / 2 + 1)));
  cudaMemcpyAsync(spec.data(), out, sizeof(float2) * spec.size(), cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  expect(spec[0].x == float(len) && spec[1].x == 0.0f, "the replayed transform: DC term n, the rest 0");
  cufftHandle late = 0;
  int m = 64;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
  expect(cufftPlanMany(&late, 1, &m, nullptr, 1, 0, nullptr, 1, 0, CUFFT_R2C, 2) != CUFFT_SUCCESS,
         "a plan (auto-allocated work area) made inside a capture: fails");
  expect(cudaStreamEndCapture(s, &graph) == cudaErrorStreamCaptureInvalidated, "... and the capture is invalidated");
  cudaGraphExecDestroy(exec);
  cufftDestroy(plan);
  for (void* p : {static_cast<void*>(in), static_cast<void*>(out), area, too_small}) cudaFree(p);
  cudaStreamDestroy(s);
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  launch_limits();
  kernel_faults();
  interleavings();
  streams();
  capture();
  cublas_rules();
  cufft_rules();
  std::printf("%s (%d failures)\n", failures ? "FAILED" : "all strict-emulator rules ok", failures);
  return failures ? 1 : 0;
}
