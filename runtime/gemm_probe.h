// A fixed set of BLAS products whose result bits identify the kernels a process runs (the
// numerics fingerprint's "GEMM probe", runtime/numerics.h), each checked against a reference in
// higher precision: two processes with the same probe hash ran the same reduction orders on
// these shapes; a result outside the rounding bound means the BLAS core computes wrong results
// on this CPU. The shapes are the models' kinds of products (kernels/cpu/blas.h): sgemm in
// every transpose form with K across several of OpenBLAS's K blocks, thin products OpenBLAS
// may route to gemv, sgemv itself, and a dgemm (fp64 training). A few ms with one thread.
#pragma once

#include <string>
#include <vector>

namespace brt::runtime {

struct GemmProbeCase {
  char trans_a = 'N', trans_b = 'N';
  int m = 0, n = 0, k = 0;
  bool fp64 = false;
  bool gemv = false;  // cblas_sgemv y = op(A) x (n = 1; trans_a picks op)
};

// The probe's products.
const std::vector<GemmProbeCase>& gemm_probe_cases();

struct CaseCheck {
  double worst_ratio = 0;  // max |c - reference| / bound over the outputs (<= 1: within rounding)
  uint64_t hash = 0;       // FNV-1a of the result bytes
};
// Runs one case on seeded inputs (seed = the case's index) and checks it: the bound is
// gamma_(K+2) * sum_k |a_ik| |b_kj| with unit roundoff 2^-24 (float) or 2^-53 (double).
CaseCheck run_probe_case(const GemmProbeCase& c, unsigned seed);

struct GemmProbe {
  std::string hash;   // 16 hex digits over every case's result bits
  std::string check;  // "ok (worst 0.031 of the rounding bound, 8 products)" or what failed
};
GemmProbe run_gemm_probe();

}  // namespace brt::runtime
