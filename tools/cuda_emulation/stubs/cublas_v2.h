// Host emulation: only the types kernels/cuda/cuda_check.h names.
#pragma once
enum cublasStatus_t { CUBLAS_STATUS_SUCCESS = 0 };
inline const char* cublasGetStatusName(cublasStatus_t) { return "err"; }
