// Host emulation of the cuFFT calls kernels/cuda/ssm/fft_conv.cpp makes, executed by FFTW in
// stream order. Strict about plans and work areas:
//   cufftPlanMany (32-bit sizes) refuses n × batch over INT32_MAX (CUFFT_INVALID_SIZE) and
//   allocates its work area with cudaMalloc, so it fails inside a capture;
//   cufftCreate + cufftSetAutoAllocation(0) + cufftMakePlanMany[64] report a work size of
//   batch × (n/2 + 1) × 8 bytes (one complex half-spectrum per row: the emulator's stand-in
//   for cuFFT's own estimate) and expect cufftSetWorkArea with device memory of that size;
//   an exec without one (or with a smaller one) fails with CUFFT_INVALID_VALUE. An exec
//   scribbles over the plan's whole work area when it runs, so a work area shared with
//   live data, or by plans running at the same time on different streams, shows.
#pragma once
#include <fftw3.h>

#include <climits>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cuda_runtime.h"
typedef int cufftHandle;
enum cufftResult {
  CUFFT_SUCCESS = 0,
  CUFFT_INVALID_PLAN = 1,
  CUFFT_ALLOC_FAILED = 2,
  CUFFT_INVALID_TYPE = 3,
  CUFFT_INVALID_VALUE = 4,
  CUFFT_EXEC_FAILED = 6,
  CUFFT_SETUP_FAILED = 7,
  CUFFT_INVALID_SIZE = 8,
};
enum cufftType { CUFFT_R2C = 0x2a, CUFFT_C2R = 0x2c };
struct EmuPlan {
  long long n = 0, rows = 0;
  cufftType type = CUFFT_R2C;
  bool made = false, auto_allocate = true, destroyed = false;
  size_t work_size = 0;
  void* work_area = nullptr;
  bool owns_work_area = false;
  cudaStream_t stream = nullptr;
};
inline std::vector<EmuPlan>& emu_plans() { static std::vector<EmuPlan> p; return p; }
namespace emu {
inline cufftResult cufft_fail(cufftResult r, const std::string& why) {
  std::fprintf(stderr, "[cuda emulator] cufftResult %d: %s\n", int(r), why.c_str());
  return r;
}
inline EmuPlan* plan_of(cufftHandle h) {
  if (h < 1 || size_t(h) > emu_plans().size() || emu_plans()[size_t(h - 1)].destroyed) return nullptr;
  return &emu_plans()[size_t(h - 1)];
}
inline size_t fft_work_size(long long n, long long rows) { return size_t(rows) * size_t(n / 2 + 1) * 8; }
// Plans a 1-D transform of `rows` rows of length n (contiguous: the only layout fft_conv uses).
inline cufftResult make_plan(EmuPlan& p, long long n, cufftType type, long long rows, size_t* work_size) {
  if (n <= 0 || rows <= 0) return cufft_fail(CUFFT_INVALID_SIZE, "plan of a non-positive size");
  if (type != CUFFT_R2C && type != CUFFT_C2R) return cufft_fail(CUFFT_INVALID_TYPE, "plan type");
  p.n = n; p.rows = rows; p.type = type;
  p.work_size = fft_work_size(n, rows);
  if (work_size != nullptr) *work_size = p.work_size;
  if (p.auto_allocate) {
    if (cudaMalloc(&p.work_area, p.work_size) != cudaSuccess)
      return cufft_fail(CUFFT_ALLOC_FAILED, "the plan's work area (cudaMalloc; inside a capture?)");
    p.owns_work_area = true;
  }
  p.made = true;
  return CUFFT_SUCCESS;
}
}  // namespace emu
inline cufftResult cufftCreate(cufftHandle* plan) {
  emu_plans().emplace_back();
  *plan = int(emu_plans().size());
  return CUFFT_SUCCESS;
}
inline cufftResult cufftSetAutoAllocation(cufftHandle h, int on) {
  EmuPlan* p = emu::plan_of(h);
  if (p == nullptr || p->made) return emu::cufft_fail(CUFFT_INVALID_PLAN, "cufftSetAutoAllocation after the plan was made");
  p->auto_allocate = on != 0;
  return CUFFT_SUCCESS;
}
inline cufftResult cufftMakePlanMany64(cufftHandle h, int rank, long long* n, long long*, long long, long long,
                                       long long*, long long, long long, cufftType type, long long batch, size_t* work) {
  EmuPlan* p = emu::plan_of(h);
  if (p == nullptr || p->made) return emu::cufft_fail(CUFFT_INVALID_PLAN, "cufftMakePlanMany64 on an unknown or made plan");
  if (rank != 1) return emu::cufft_fail(CUFFT_INVALID_VALUE, "rank other than 1 is not emulated");
  return emu::make_plan(*p, n[0], type, batch, work);
}
inline cufftResult cufftMakePlanMany(cufftHandle h, int rank, int* n, int*, int, int, int*, int, int, cufftType type,
                                     int batch, size_t* work) {
  if (rank == 1 && (long long)n[0] * batch > INT_MAX) return emu::cufft_fail(CUFFT_INVALID_SIZE, "n × batch over INT32_MAX: use cufftMakePlanMany64");
  long long n64 = n[0];
  return cufftMakePlanMany64(h, rank, &n64, nullptr, 1, 0, nullptr, 1, 0, type, batch, work);
}
inline cufftResult cufftPlanMany(cufftHandle* plan, int rank, int* n, int* inembed, int istride, int idist, int* onembed,
                                 int ostride, int odist, cufftType type, int batch) {
  cufftCreate(plan);
  return cufftMakePlanMany(*plan, rank, n, inembed, istride, idist, onembed, ostride, odist, type, batch, nullptr);
}
inline cufftResult cufftGetSize(cufftHandle h, size_t* work) {
  EmuPlan* p = emu::plan_of(h);
  if (p == nullptr || !p->made) return emu::cufft_fail(CUFFT_INVALID_PLAN, "cufftGetSize");
  *work = p->work_size;
  return CUFFT_SUCCESS;
}
inline cufftResult cufftSetWorkArea(cufftHandle h, void* area) {
  EmuPlan* p = emu::plan_of(h);
  if (p == nullptr) return emu::cufft_fail(CUFFT_INVALID_PLAN, "cufftSetWorkArea");
  p->work_area = area;
  return CUFFT_SUCCESS;
}
inline cufftResult cufftSetStream(cufftHandle h, cudaStream_t s) {
  EmuPlan* p = emu::plan_of(h);
  if (p == nullptr) return emu::cufft_fail(CUFFT_INVALID_PLAN, "cufftSetStream");
  p->stream = s;
  return CUFFT_SUCCESS;
}
inline cufftResult cufftDestroy(cufftHandle h) {
  EmuPlan* p = emu::plan_of(h);
  if (p == nullptr) return emu::cufft_fail(CUFFT_INVALID_PLAN, "cufftDestroy");
  if (p->owns_work_area && cudaFree(p->work_area) != cudaSuccess) return emu::cufft_fail(CUFFT_INVALID_VALUE, "cufftDestroy: freeing the work area");
  p->destroyed = true;
  return CUFFT_SUCCESS;
}
namespace emu {
// Checks the plan and queues the transform (FFTW, planned when it runs) on the plan's stream.
inline cufftResult fft_exec(cufftHandle h, cufftType want, const char* name, void* in, void* out) {
  EmuPlan* p = plan_of(h);
  if (p == nullptr || !p->made) return cufft_fail(CUFFT_INVALID_PLAN, std::string(name) + " with an unknown, unmade or destroyed plan");
  if (p->type != want) return cufft_fail(CUFFT_INVALID_TYPE, std::string(name) + " on a plan of the other type");
  if (p->work_area == nullptr || !is_device(p->work_area, p->work_size))
    return cufft_fail(CUFFT_INVALID_VALUE, std::string(name) + ": no work area of " + std::to_string(p->work_size) +
                                               " device bytes (auto-allocation off and cufftSetWorkArea missing or too small)");
  const EmuPlan e = *p;
  const cudaError_t r = enqueue(e.stream, NodeKind::kKernel, name, [e, in, out] {
    std::memset(e.work_area, 0x5A, e.work_size);
    int n = int(e.n);
    fftwf_plan f = e.type == CUFFT_R2C
        ? fftwf_plan_many_dft_r2c(1, &n, int(e.rows), static_cast<float*>(in), nullptr, 1, n,
                                  static_cast<fftwf_complex*>(out), nullptr, 1, n / 2 + 1, FFTW_ESTIMATE)
        : fftwf_plan_many_dft_c2r(1, &n, int(e.rows), static_cast<fftwf_complex*>(in), nullptr, 1, n / 2 + 1,
                                  static_cast<float*>(out), nullptr, 1, n, FFTW_ESTIMATE);
    fftwf_execute(f);
    fftwf_destroy_plan(f);
  });
  return r == cudaSuccess ? CUFFT_SUCCESS : cufft_fail(CUFFT_EXEC_FAILED, std::string(name) + ": " + cudaGetErrorName(r));
}
}  // namespace emu
inline cufftResult cufftExecR2C(cufftHandle h, float* in, float2* out) { return emu::fft_exec(h, CUFFT_R2C, "cufftExecR2C", in, out); }
inline cufftResult cufftExecC2R(cufftHandle h, float2* in, float* out) { return emu::fft_exec(h, CUFFT_C2R, "cufftExecC2R", in, out); }
