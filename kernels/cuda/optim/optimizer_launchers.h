// Host-side entry points of the optimizer kernels (kernels/cuda/optim/optimizer.cu; internal to
// kernels/cuda): each enqueues its kernels on `stream` and checks the launch. Semantics and
// pointer conventions are kernels/optimizer_kernels.h's (all pointers in device memory).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/optim/adafactor_sums_tiling.h"
#include "kernels/optimizer_kernels.h"

namespace brt::kernels::cuda {

void launch_optim_sum_squares(OptimField field, const OptimChunk* chunks, int64_t n_chunks,
                              const OptimTensor<float>* tensors, double* partial,
                              cudaStream_t stream);
void launch_grad_norm_finish(int32_t n_params, const int64_t* first_chunk, double* partial, double clip_norm,
                             const double* loss_sum, OptimStepScalars<float>* step, cudaStream_t stream);
void launch_segment_sums(int32_t n_segments, const int64_t* first, const double* partial, double* sums,
                         cudaStream_t stream);
// StatKernels::gather_stats (scatter false) and scatter_stats (scatter true).
void launch_move_stats(int64_t n, const int64_t* index, const double* from, double* to, bool scatter,
                       cudaStream_t stream);
void launch_optim_scale(float* x, int64_t n, float s, cudaStream_t stream);
void launch_adamw_update(const AdamWStep<float>& constants, const OptimStepScalars<float>* step,
                         const OptimChunk* chunks, int64_t n_chunks, const OptimTensor<float>* tensors,
                         cudaStream_t stream);
void launch_adafactor_second_moment(const OptimChunk* chunks, int64_t n_chunks,
                                    const OptimTensor<float>* tensors, const OptimStepScalars<float>* step,
                                    float eps, double* param_squares, double* update_squares,
                                    cudaStream_t stream);
// Matrices (P1 = P2 = 1, groups P0 >= 1) in one tiled pass over G (adafactor_sums_tiling):
// `scratch` holds its .scratch() doubles; other layouts need none.
void launch_adafactor_gradient_sums(const OptimTensor<float>& tensor, const OptimStepScalars<float>* step, float eps,
                                    double* row_sums, double* col_sums, double* scratch, cudaStream_t stream);
void launch_adafactor_update_factors(const OptimTensor<float>& tensor, const OptimStepScalars<float>* step,
                                     const double* row_sums, const double* col_sums,
                                     double* mean_sums, cudaStream_t stream);
void launch_adafactor_compute_factors(const OptimTensor<float>& tensor, const double* mean_sums,
                                      cudaStream_t stream);
void launch_adafactor_factored_update_squares(const OptimChunk* chunks, int64_t n_chunks,
                                              const OptimTensor<float>* tensors,
                                              const OptimStepScalars<float>* step, double* update_squares,
                                              cudaStream_t stream);
void launch_adafactor_coefficients(int32_t n_tensors, const int64_t* first_chunk, const int64_t* rms_count,
                                   const double* param_squares, const double* update_squares,
                                   const AdafactorScalars& scalars, const OptimStepScalars<float>* step, float* coef,
                                   cudaStream_t stream);
void launch_adafactor_apply(const OptimChunk* chunks, int64_t n_chunks,
                            const OptimTensor<float>* tensors, const float* coef,
                            const OptimStepScalars<float>* step, float beta1, float one_minus_beta1,
                            cudaStream_t stream);

}  // namespace brt::kernels::cuda
