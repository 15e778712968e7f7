#include "kernels/cuda/cuda_backend.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ssm/fft_conv.h"
#include "kernels/cuda/weight_shadow.h"

namespace brt::kernels::cuda {

namespace {

// cuBLAS keeps its results reproducible when it gets a fixed workspace of its own
// (cuBLAS docs, "Results reproducibility"); 32 MiB is its recommendation for Hopper.
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;

cublasOperation_t to_cublas(Trans t) { return t == Trans::N ? CUBLAS_OP_N : CUBLAS_OP_T; }

}  // namespace

const char* precision_name(Precision precision) {
  return precision == Precision::kBf16 ? "bf16" : "fp32";
}

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  throw std::runtime_error("kernels/cuda: precision '" + name + "' is not fp32 or bf16");
}

std::string CudaDeviceQuery::describe() const {
  if (!error.empty()) return "no usable CUDA device: " + error;
  if (count == 0) return "no CUDA device";
  return std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s");
}

CudaDeviceQuery query_cuda_devices() {
  CudaDeviceQuery query;
  const cudaError_t status = cudaGetDeviceCount(&query.count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // clear the (non-sticky) error so later queries start clean
    query.count = 0;
    query.error = std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
  }
  return query;
}

int cuda_device_count() { return query_cuda_devices().count; }

std::string cuda_device_description(int device) {
  cudaDeviceProp prop{};
  BRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) +
         " SMs, " + std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
}

std::size_t cuda_device_memory_bytes(int device) {
  cudaDeviceProp prop{};
  BRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.totalGlobalMem;
}

int select_device_for_local_rank(int local_rank) {
  const CudaDeviceQuery query = query_cuda_devices();
  if (query.count == 0) {
    throw std::runtime_error("kernels/cuda: local rank " + std::to_string(local_rank) +
                             " found " + query.describe());
  }
  const int device = local_rank % query.count;
  BRT_CUDA_CHECK(cudaSetDevice(device));
  return device;
}

CudaBackend::CudaBackend(const CudaOptions& options) : options_(options) {
  const CudaDeviceQuery query = query_cuda_devices();
  if (options.device < 0 || options.device >= query.count) {
    throw std::runtime_error("kernels/cuda: device " + std::to_string(options.device) +
                             " is not usable (" + query.describe() + ")");
  }
  BRT_CUDA_CHECK(cudaSetDevice(options.device));
  try {
    if (options.stream != nullptr) {
      stream_ = options.stream;
    } else {
      BRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      owns_stream_ = true;
    }
    memory_ = std::make_unique<DeviceMemory>(options.device, stream_, waits_);
    scratch_ = DeviceArena(options.workspace_bytes, "CudaBackend scratch");
    cublas_workspace_ = DeviceArena(kCublasWorkspaceBytes, "cuBLAS workspace");
    const std::vector<int> buckets = t5_bucket_table(kT5TableDistances);
    t5_table_ = DeviceArena(buckets.size() * sizeof(int), "T5 bucket table");
    // On the backend's stream, whose kernels read it: that stream is non-blocking, so it
    // would not wait for a copy on the legacy default stream.
    BRT_CUDA_CHECK(cudaMemcpyAsync(t5_table_.base(), buckets.data(), buckets.size() * sizeof(int),
                                   cudaMemcpyHostToDevice, stream_));
    BRT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `buckets` is freed on return
    BRT_CUBLAS_CHECK(cublasCreate(&cublas_));
    BRT_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    BRT_CUBLAS_CHECK(
        cublasSetWorkspace(cublas_, cublas_workspace_.base(), kCublasWorkspaceBytes));
    // fp32: pedantic math forbids TF32 and reduced-precision reductions, so gemm matches the
    // CPU to fp32 rounding. bf16: the default math mode lets GemmEx use the tensor cores.
    BRT_CUBLAS_CHECK(cublasSetMathMode(cublas_, options.precision == Precision::kFp32
                                                    ? CUBLAS_PEDANTIC_MATH
                                                    : CUBLAS_DEFAULT_MATH));
    if (options.precision == Precision::kBf16)
      epilogue_gemm_ = std::make_unique<EpilogueGemm>(cublas_workspace_.base(), kCublasWorkspaceBytes);
  } catch (...) {
    release_handles();  // no destructor runs for a half-built object
    throw;
  }
}

CudaBackend::~CudaBackend() { release_handles(); }

void CudaBackend::release_handles() noexcept {
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  cublas_ = nullptr;
  if (owns_stream_ && stream_ != nullptr) cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

void CudaBackend::synchronize() { wait_for_stream(stream_, *waits_, "CudaBackend::synchronize"); }

void CudaBackend::gemm(Trans ta, Trans tb, int M, int N, int K, float alpha, const float* A,
                       int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  const int need_lda = ta == Trans::N ? K : M;
  const int need_ldb = tb == Trans::N ? N : K;
  if (M < 0 || N < 0 || K < 0 || lda < std::max(1, need_lda) || ldb < std::max(1, need_ldb) ||
      ldc < std::max(1, N)) {
    throw std::runtime_error("kernels/cuda gemm: invalid shape M=" + std::to_string(M) +
                             " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                             " lda=" + std::to_string(lda) + " ldb=" + std::to_string(ldb) +
                             " ldc=" + std::to_string(ldc));
  }
  if (M == 0 || N == 0) return;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  if (options_.precision == Precision::kFp32 || K == 0) {
    BRT_CUBLAS_CHECK(cublasSgemm(cublas_, to_cublas(tb), to_cublas(ta), N, M, K, &alpha, B, ldb,
                                 A, lda, &beta, C, ldc));
    return;
  }
  // bf16: round both operands to packed bf16 copies in the scratch arena, multiply on the
  // tensor cores with fp32 accumulation, write fp32 C (beta applies in fp32).
  DeviceArena& arena = scratch();
  const int a_rows = ta == Trans::N ? M : K, a_cols = ta == Trans::N ? K : M;
  const int b_rows = tb == Trans::N ? K : N, b_cols = tb == Trans::N ? N : K;
  const void* a16 = bf16_operand(A, a_rows, a_cols, lda, arena.allocate(std::size_t{2} * a_rows * a_cols, "gemm bf16 A"));
  const void* b16 = bf16_operand(B, b_rows, b_cols, ldb, arena.allocate(std::size_t{2} * b_rows * b_cols, "gemm bf16 B"));
  gemm_bf16(ta, tb, M, N, K, alpha, a16, a_cols, b16, b_cols, beta, C, ldc);
}

void CudaBackend::weights_fixed(const float* values, int64_t n) {
  if (values == nullptr || n <= 0) bf16_activations_.release_all();  // the model's end: y_for_products ends
  const bool shadow = options_.precision == Precision::kBf16 && options_.bf16_weight_shadow && values != nullptr && n > 0;
  weights_ = shadow ? values : nullptr;
  weights_n_ = shadow ? n : 0;
  if (!shadow) return;
  const std::size_t bytes = std::size_t{2} * std::size_t(n);
  if (weight_shadow_.capacity() < bytes) weight_shadow_ = DeviceArena(bytes, "CudaBackend bf16 weight shadow");
  auto* shadow16 = static_cast<unsigned char*>(weight_shadow_.base());
  for (int64_t at = 0; at < n; at += kWeightShadowRun) {  // the same rounding as a product's operand
    const int run = int(std::min(kWeightShadowRun, n - at));
    launch_convert_to_bf16(values + at, 1, run, run, shadow16 + 2 * at, stream_);
  }
}

void CudaBackend::linear_forward_shared(const float* x, int n, int in, int count, const float* const* w, int out,
                                        float* const* y) {
  if (options_.precision == Precision::kFp32 || n <= 0 || in <= 0 || out <= 0) {
    Backend<float>::linear_forward_shared(x, n, in, count, w, out, y);
    return;
  }
  // The same operands and products as a gemm each (bit-identical to them), x rounded once.
  DeviceArena& arena = scratch();
  const void* x16 = bf16_operand(x, n, in, in, arena.allocate(std::size_t{2} * n * in, "shared products bf16 x"));
  void* w16_buffer = arena.allocate(std::size_t{2} * in * out, "shared products bf16 w");
  for (int j = 0; j < count; ++j) {  // stream order: product j has read w16_buffer before j + 1's copy
    const void* w16 = bf16_operand(w[j], in, out, out, w16_buffer);
    gemm_bf16(Trans::N, Trans::N, n, out, in, 1.0f, x16, in, w16, out, 0.0f, y[j], out);
  }
}

void CudaBackend::linear_relu_forward(const float* x, int n, int in, const float* w, int out, float* y, void* mask,
                                      bool y_for_products) {
  bf16_activations_.release(y);  // written in fp32 unless the epilogue keeps it in bf16 below
  if (epilogue_gemm_ == nullptr || n <= 0 || in <= 0 || out <= 0) {
    Backend<float>::linear_relu_forward(x, n, in, w, out, y, mask, y_for_products);
    relu_masks_[mask] = false;
    return;
  }
  DeviceArena& arena = scratch();
  const void* x16 = bf16_operand(x, n, in, in, arena.allocate(std::size_t{2} * n * in, "linear_relu bf16 x"));
  const void* w16 = bf16_operand(w, in, out, out, arena.allocate(std::size_t{2} * in * out, "linear_relu bf16 w"));
  // Column-major: yᵀ [out, n] = wᵀ [out, in] · xᵀ [in, n]; y in bf16 where only products read it
  // (the rounding their operand conversion would apply: bf16(relu(fp32 product))).
  EpilogueGemm::Product product{out, n, in, false, w16, x16, nullptr, y};
  product.d_bf16 = y_for_products;
  bool fused = epilogue_gemm_->relu_aux(product, mask, stream_);
  if (fused && y_for_products) bf16_activations_.hold(y, n, out);
  if (!fused && y_for_products) {  // no bf16 output for RELU_AUX here: the epilogue in fp32 still
    product.d_bf16 = false;
    fused = epilogue_gemm_->relu_aux(product, mask, stream_);
  }
  relu_masks_[mask] = fused;
  if (fused) return;
  gemm_bf16(Trans::N, Trans::N, n, out, in, 1.0f, x16, in, w16, out, 0.0f, y, out);
  launch_relu_forward(y, int64_t{n} * out, y, stream_);
}

void CudaBackend::linear_forward_residual(const float* x, int n, int in, const float* w, int out,
                                          const float* residual, float* y) {
  if (epilogue_gemm_ == nullptr || residual == y || n <= 0 || in <= 0 || out <= 0) {
    Backend<float>::linear_forward_residual(x, n, in, w, out, residual, y);
    return;
  }
  DeviceArena& arena = scratch();
  const void* x16 = bf16_operand(x, n, in, in, arena.allocate(std::size_t{2} * n * in, "residual product bf16 x"));
  const void* w16 = bf16_operand(w, in, out, out, arena.allocate(std::size_t{2} * in * out, "residual product bf16 w"));
  // Column-major: yᵀ [out, n] = wᵀ [out, in] · xᵀ [in, n] + residualᵀ.
  if (epilogue_gemm_->residual({out, n, in, false, w16, x16, residual, y}, stream_)) return;
  launch_copy(residual, int64_t{n} * out, y, stream_);
  gemm_bf16(Trans::N, Trans::N, n, out, in, 1.0f, x16, in, w16, out, 1.0f, y, out);
}

void CudaBackend::relu_linear_backward(const float* x, const void* mask, int n, int in, const float* w, int out,
                                       const float* dy, const float* dx_add, float* dx, float* dw) {
  const auto written = relu_masks_.find(mask);
  if (written == relu_masks_.end() || !written->second || n <= 0 || in <= 0 || out <= 0) {
    // No mask from the epilogue: the products, the add and the ReLU's gradient from x itself.
    Backend<float>::relu_linear_backward(x, mask, n, in, w, out, dy, dx_add, dx, dw);
    return;
  }
  const auto [dy16, other16] = backward_bf16(dy, n, in, out);
  const void* w16 = bf16_operand(w, in, out, out, other16);
  // Column-major: dxᵀ [in, n] = (wᵀ [out, in])ᵀ · dyᵀ [out, n], plus dx_add, times the mask.
  const bool x_bf16 = bf16_activations_.holds(x, n, in, in);
  if (!epilogue_gemm_->drelu({in, n, out, true, w16, dy16, dx_add, dx}, mask, stream_)) {
    gemm_bf16(Trans::N, Trans::T, n, in, out, 1.0f, dy16, out, w16, out, 0.0f, dx, in);
    if (dx_add != nullptr) launch_add_inplace(dx, dx_add, int64_t{n} * in, stream_);
    if (x_bf16) launch_relu_backward_bf16(x, dx, int64_t{n} * in, dx, stream_);  // x holds bf16
    else launch_relu_backward(x, dx, int64_t{n} * in, dx, stream_);
  }
  const void* x16 = bf16_operand(x, n, in, in, other16);
  gemm_bf16(Trans::T, Trans::N, in, out, n, 1.0f, x16, in, dy16, out, 1.0f, dw, out);
}

void CudaBackend::mlp_products_backward(const float* x, const float* w1, const float* m, const void* mask, int n,
                                        int in, int hidden, const float* w2, int out, const float* du,
                                        const float* dm_extra, float* dm, float* dx, float* dw1, float* dw2) {
  const auto written = relu_masks_.find(mask);
  const bool epilogue_mask = written != relu_masks_.end() && written->second;
  // dm_extra would be the DRELU's C, which must then be bf16 too: such MLPs keep dm in fp32.
  if (!epilogue_mask || dm_extra != nullptr || n <= 0 || in <= 0 || hidden <= 0 || out <= 0) {
    Backend<float>::mlp_products_backward(x, w1, m, mask, n, in, hidden, w2, out, du, dm_extra, dm, dx, dw1, dw2);
    return;
  }
  // The operands of relu_linear_backward and linear_backward, each rounded as they round it; one
  // buffer serves w2, m, w1 and x in turn (stream order: each product has read it before the next
  // conversion writes it).
  DeviceArena& arena = scratch();
  void* du16 = arena.allocate(std::size_t{2} * n * out, "MLP backward bf16 du");
  const std::size_t other = std::max({std::size_t(hidden) * out, std::size_t(n) * hidden, std::size_t(in) * hidden,
                                      std::size_t(n) * in});
  void* other16 = arena.allocate(2 * other, "MLP backward bf16 w2, m, w1, then x");
  launch_convert_to_bf16(du, n, out, out, du16, stream_);
  const void* w2_16 = bf16_operand(w2, hidden, out, out, other16);
  // Column-major: dmᵀ [hidden, n] = (w2ᵀ [out, hidden])ᵀ · duᵀ [out, n], times the mask, in bf16.
  EpilogueGemm::Product product{hidden, n, out, true, w2_16, du16, nullptr, dm};
  product.d_bf16 = true;
  if (!epilogue_gemm_->drelu(product, mask, stream_)) {
    Backend<float>::mlp_products_backward(x, w1, m, mask, n, in, hidden, w2, out, du, dm_extra, dm, dx, dw1, dw2);
    return;
  }
  const void* m16 = bf16_operand(m, n, hidden, hidden, other16);
  gemm_bf16(Trans::T, Trans::N, hidden, out, n, 1.0f, m16, hidden, du16, out, 1.0f, dw2, out);
  const void* w1_16 = bf16_operand(w1, in, hidden, hidden, other16);
  gemm_bf16(Trans::N, Trans::T, n, in, hidden, 1.0f, dm, hidden, w1_16, hidden, 0.0f, dx, in);
  const void* x16 = bf16_operand(x, n, in, in, other16);
  gemm_bf16(Trans::T, Trans::N, in, hidden, n, 1.0f, x16, in, dm, hidden, 1.0f, dw1, hidden);
}

CudaBackend::BackwardBf16 CudaBackend::backward_bf16(const float* dy, int n, int in, int out) {
  DeviceArena& arena = scratch();
  void* other16 = arena.allocate(std::size_t{2} * std::max(std::size_t(in) * out, std::size_t(n) * in),
                                 "linear backward bf16 w, then x");
  if (bf16_activations_.holds(dy, n, out, out)) {  // head_l2norm_backward_for_product wrote it in bf16
    bf16_activations_.release(dy);                  // read by this call only: fp32 again after it
    return {dy, other16};
  }
  void* dy16 = arena.allocate(std::size_t{2} * n * out, "linear backward bf16 dy");
  launch_convert_to_bf16(dy, n, out, out, dy16, stream_);
  return {dy16, other16};
}

const void* CudaBackend::bf16_operand(const float* p, int rows, int cols, int ld, void* dst) {
  if (bf16_activations_.holds(p, rows, cols, ld)) return p;  // kept in bf16 by linear_relu_forward
  const int64_t at = weight_shadow_offset(weights_, weights_n_, p, rows, cols, ld, sizeof(float));
  if (at >= 0) return static_cast<const unsigned char*>(weight_shadow_.base()) + 2 * at;
  launch_convert_to_bf16(p, rows, cols, ld, dst, stream_);
  return dst;
}

void CudaBackend::gemm_bf16(Trans ta, Trans tb, int M, int N, int K, float alpha, const void* a16, int a_cols,
                            const void* b16, int b_cols, float beta, float* C, int ldc) {
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  BRT_CUBLAS_CHECK(cublasGemmEx(cublas_, to_cublas(tb), to_cublas(ta), N, M, K, &alpha, b16,
                                CUDA_R_16BF, b_cols, a16, CUDA_R_16BF, a_cols, &beta, C,
                                CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::linear_backward(const float* x, int n, int in, const float* w, int out, const float* dy,
                                  float* dx, float* dw, float dx_beta) {
  if (options_.precision == Precision::kFp32 || n <= 0 || in <= 0 || out <= 0) {
    Backend<float>::linear_backward(x, n, in, w, out, dy, dx, dw, dx_beta);
    return;
  }
  // The same operands, rounding and products as the two gemm calls: bit-identical to them.
  const auto [dy16, other16] = backward_bf16(dy, n, in, out);
  if (dx != nullptr) {
    const void* w16 = bf16_operand(w, in, out, out, other16);
    gemm_bf16(Trans::N, Trans::T, n, in, out, 1.0f, dy16, out, w16, out, dx_beta, dx, in);
  }
  const void* x16 = bf16_operand(x, n, in, in, other16);
  gemm_bf16(Trans::T, Trans::N, in, out, n, 1.0f, x16, in, dy16, out, 1.0f, dw, out);
}

namespace {

// The cuFFT convolution (fft_conv.h) behind the backend interface, on the backend's stream.
class CudaFftConvolver final : public FftConvolver<float> {
 public:
  CudaFftConvolver(int length, int channels, int max_batch, int max_features, cudaStream_t stream,
                   std::shared_ptr<CufftWorkArea> work)
      : conv_(length, channels, max_batch, max_features, stream, std::move(work)) {}
  void forward(const ssm::FftConvDims& d, const float* k, const float* u, const float* dskip,
               float* y) override {
    conv_.forward(d, k, u, dskip, y);
  }
  void backward(const ssm::FftConvDims& d, const float* k, const float* u, const float* dskip,
                const float* dy, float* du, float* dk, float* ddskip) override {
    conv_.backward(d, k, u, dskip, dy, du, dk, ddskip);
  }

 private:
  CudaFftConv conv_;
};

}  // namespace

std::unique_ptr<FftConvolver<float>> CudaBackend::make_fft_conv(int length, int channels,
                                                                int max_batch, int max_features) {
  BRT_CUDA_CHECK(cudaSetDevice(options_.device));
  // Every convolver of this backend runs on its one stream, so one work area serves all plans.
  if (!fft_work_) fft_work_ = std::make_shared<CufftWorkArea>(stream_);
  return std::make_unique<CudaFftConvolver>(length, channels, max_batch, max_features, stream_,
                                            fft_work_);
}

double CudaBackend::softmax_xent_forward_backward(const float* logits, const int32_t* targets,
                                                  const uint8_t* mask, int n, int V,
                                                  float grad_scale, float* dlogits,
                                                  float* row_loss) {
  const double* device_result = launch_softmax_xent(logits, targets, mask, n, V, grad_scale, nullptr,
                                                    dlogits, row_loss, scratch(), stream_);
  double result[2] = {0, -1};
  BRT_CUDA_CHECK(cudaMemcpyAsync(result, device_result, sizeof result, cudaMemcpyDeviceToHost,
                                 stream_));
  synchronize();
  if (result[1] >= 0) throw_bad_target(targets, int64_t(result[1]), V);
  return result[0];
}

void CudaBackend::throw_bad_target(const int32_t* targets, int64_t row, int V) {
  int32_t target = 0;
  BRT_CUDA_CHECK(cudaMemcpyAsync(&target, targets + row, sizeof target, cudaMemcpyDeviceToHost,
                                 stream_));
  synchronize();
  throw std::runtime_error(bad_target_message("cuda", target, row, V));
}

double CudaBackend::xent_split_finish(const float* logits, const int32_t* local_targets,
                                      const uint8_t* mask, int n, int V, float grad_scale,
                                      const double* row_max, const double* sum_exp,
                                      const double* target_logit, float* dlogits,
                                      float* row_loss) {
  const double* device_total =
      launch_xent_split_finish(logits, local_targets, mask, n, V, grad_scale, row_max, sum_exp,
                               target_logit, dlogits, row_loss, scratch(), stream_);
  double total = 0;
  BRT_CUDA_CHECK(cudaMemcpyAsync(&total, device_total, sizeof(double), cudaMemcpyDeviceToHost,
                                 stream_));
  synchronize();  // the loss is returned to the host (once per step, like softmax_xent)
  return total;
}

void synchronize(Backend<float>& backend) {
  auto* cuda_backend = dynamic_cast<CudaBackend*>(&backend);
  if (cuda_backend == nullptr) {
    throw std::runtime_error(std::string("kernels/cuda synchronize: backend '") +
                             backend.name() + "' is not the CUDA backend");
  }
  cuda_backend->synchronize();
}

std::string describe_epilogues(Backend<float>& backend) {
  auto* cuda_backend = dynamic_cast<CudaBackend*>(&backend);
  return cuda_backend != nullptr ? cuda_backend->epilogues() : "";
}

bool holds_bf16_activation(Backend<float>& backend, const float* p, int rows, int cols) {
  auto* cuda_backend = dynamic_cast<CudaBackend*>(&backend);
  return cuda_backend != nullptr && cuda_backend->holds_bf16(p, rows, cols);
}

CUstream_st* stream_handle(Backend<float>& backend) {
  auto* cuda_backend = dynamic_cast<CudaBackend*>(&backend);
  if (cuda_backend == nullptr) {
    throw std::invalid_argument(std::string("kernels/cuda stream_handle: backend '") +
                                backend.name() + "' is not the CUDA backend");
  }
  return cuda_backend->stream();
}

void set_wait_watch(Backend<float>& backend, std::function<void(double)> watch) {
  auto* cuda_backend = dynamic_cast<CudaBackend*>(&backend);
  if (cuda_backend == nullptr) {
    throw std::invalid_argument(std::string("kernels/cuda set_wait_watch: backend '") +
                                backend.name() + "' is not the CUDA backend");
  }
  cuda_backend->set_wait_watch(std::move(watch));
}

std::unique_ptr<Backend<float>> make_cuda_backend(const CudaOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

}  // namespace brt::kernels::cuda
