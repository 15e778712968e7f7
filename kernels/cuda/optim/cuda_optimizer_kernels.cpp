// CudaOptimizerKernels: kernels::OptimizerKernels<float> on a CudaBackend's stream and memory
// (the launchers are in optimizer.cu).
#include "kernels/cuda/optim/cuda_optimizer_kernels.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/optim/optimizer_launchers.h"

namespace brt::kernels::cuda {
namespace {

class CudaOptimizerKernels final : public OptimizerKernels<float> {
 public:
  explicit CudaOptimizerKernels(CudaBackend& backend) : memory_(backend.memory()), stream_(backend.stream()) {}

  const char* name() const override { return "cuda"; }
  Memory& memory() override { return memory_; }

  void sum_squares(OptimField field, const OptimChunk* chunks, int64_t n_chunks,
                   const OptimTensor<float>* tensors, double* partial) override {
    launch_optim_sum_squares(field, chunks, n_chunks, tensors, partial, stream_);
  }
  void grad_norm_finish(int32_t n_params, const int64_t* first_chunk, double* partial, double clip_norm,
                        const double* loss_sum, OptimStepScalars<float>* step) override {
    launch_grad_norm_finish(n_params, first_chunk, partial, clip_norm, loss_sum, step, stream_);
  }
  void segment_sums(int32_t n_segments, const int64_t* first, const double* partial, double* sums) override {
    launch_segment_sums(n_segments, first, partial, sums, stream_);
  }
  void gather_stats(int64_t n, const int64_t* index, const double* from, double* to) override {
    launch_move_stats(n, index, from, to, false, stream_);
  }
  void scatter_stats(int64_t n, const int64_t* index, const double* from, double* to) override {
    launch_move_stats(n, index, from, to, true, stream_);
  }
  void scale(float* x, int64_t n, float s) override { launch_optim_scale(x, n, s, stream_); }
  void adamw_update(const AdamWStep<float>& constants, const OptimStepScalars<float>* step, const OptimChunk* chunks,
                    int64_t n_chunks, const OptimTensor<float>* tensors) override {
    launch_adamw_update(constants, step, chunks, n_chunks, tensors, stream_);
  }
  void adafactor_second_moment(const OptimChunk* chunks, int64_t n_chunks, const OptimTensor<float>* tensors,
                               const OptimStepScalars<float>* step, float eps, double* param_squares,
                               double* update_squares) override {
    launch_adafactor_second_moment(chunks, n_chunks, tensors, step, eps, param_squares, update_squares, stream_);
  }
  void adafactor_gradient_sums(const OptimTensor<float>& tensor, const OptimStepScalars<float>* step, float eps,
                               double* row_sums, double* col_sums, double* scratch) override {
    launch_adafactor_gradient_sums(tensor, step, eps, row_sums, col_sums, scratch, stream_);
  }
  int64_t adafactor_sums_scratch(const OptimTensor<float>& tensor) const override {
    return adafactor_sums_tiling(tensor).scratch();
  }
  void adafactor_update_factors(const OptimTensor<float>& tensor, const OptimStepScalars<float>* step,
                                const double* row_sums, const double* col_sums, double* mean_sums) override {
    launch_adafactor_update_factors(tensor, step, row_sums, col_sums, mean_sums, stream_);
  }
  void adafactor_compute_factors(const OptimTensor<float>& tensor, const double* mean_sums) override {
    launch_adafactor_compute_factors(tensor, mean_sums, stream_);
  }
  void adafactor_factored_update_squares(const OptimChunk* chunks, int64_t n_chunks,
                                         const OptimTensor<float>* tensors, const OptimStepScalars<float>* step,
                                         double* update_squares) override {
    launch_adafactor_factored_update_squares(chunks, n_chunks, tensors, step, update_squares, stream_);
  }
  void adafactor_coefficients(int32_t n_tensors, const int64_t* first_chunk, const int64_t* rms_count,
                              const double* param_squares, const double* update_squares,
                              const AdafactorScalars& scalars, const OptimStepScalars<float>* step,
                              float* coef) override {
    launch_adafactor_coefficients(n_tensors, first_chunk, rms_count, param_squares, update_squares, scalars, step,
                                  coef, stream_);
  }
  void adafactor_apply(const OptimChunk* chunks, int64_t n_chunks, const OptimTensor<float>* tensors,
                       const float* coef, const OptimStepScalars<float>* step, float beta1,
                       float one_minus_beta1) override {
    launch_adafactor_apply(chunks, n_chunks, tensors, coef, step, beta1, one_minus_beta1, stream_);
  }

 private:
  Memory& memory_;
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<OptimizerKernels<float>> make_cuda_optimizer_kernels(Backend<float>& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (cuda == nullptr)
    throw std::runtime_error(std::string("make_cuda_optimizer_kernels: backend \"") + backend.name() +
                             "\" is not a CUDA backend");
  return std::make_unique<CudaOptimizerKernels>(*cuda);
}

}  // namespace brt::kernels::cuda
