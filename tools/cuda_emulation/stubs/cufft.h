// Host emulation of the cuFFT calls kernels/cuda/fft_conv.cpp makes, executed by FFTW.
#pragma once
#include <fftw3.h>
#include <vector>
#include "cuda_runtime.h"
typedef int cufftHandle;
enum cufftResult { CUFFT_SUCCESS = 0 };
enum cufftType { CUFFT_R2C, CUFFT_C2R };
struct EmuPlan { int n, rows; cufftType type; };
inline std::vector<EmuPlan>& emu_plans() { static std::vector<EmuPlan> p; return p; }
inline cufftResult cufftPlanMany(cufftHandle* plan, int, int* n, int*, int, int, int*, int, int, cufftType type, int batch) { emu_plans().push_back({n[0], batch, type}); *plan = int(emu_plans().size()); return CUFFT_SUCCESS; }
inline cufftResult cufftSetStream(cufftHandle, cudaStream_t) { return CUFFT_SUCCESS; }
inline cufftResult cufftDestroy(cufftHandle) { return CUFFT_SUCCESS; }
inline cufftResult cufftExecR2C(cufftHandle h, float* in, float2* out) {
  emu::enqueue(emu::NodeKind::kKernel, "cufftExecR2C", [h, in, out] {
    EmuPlan e = emu_plans()[h - 1]; int n = e.n;
    fftwf_plan p = fftwf_plan_many_dft_r2c(1, &n, e.rows, in, nullptr, 1, n, reinterpret_cast<fftwf_complex*>(out), nullptr, 1, n / 2 + 1, FFTW_ESTIMATE);
    fftwf_execute(p); fftwf_destroy_plan(p); });
  return CUFFT_SUCCESS; }
inline cufftResult cufftExecC2R(cufftHandle h, float2* in, float* out) {
  emu::enqueue(emu::NodeKind::kKernel, "cufftExecC2R", [h, in, out] {
    EmuPlan e = emu_plans()[h - 1]; int n = e.n;
    fftwf_plan p = fftwf_plan_many_dft_c2r(1, &n, e.rows, reinterpret_cast<fftwf_complex*>(in), nullptr, 1, n / 2 + 1, out, nullptr, 1, n, FFTW_ESTIMATE);
    fftwf_execute(p); fftwf_destroy_plan(p); });
  return CUFFT_SUCCESS; }
