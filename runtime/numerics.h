// A rank's numerics fingerprint (docs/reliability.md "Numerics"): what decides the bits a rank
// computes for the same inputs — the BLAS library, its version and the core whose kernels it
// runs, the result bits of a fixed set of GEMMs (the probe: it catches what the names do not,
// e.g. blocking sizes tuned to a host's caches), the instruction set the binary was compiled for,
// the compiler and build type, the OpenMP thread count (OpenBLAS 0.3.21's sgemm and sgemv give
// other bits with 2 threads than with 1 on the probe's shapes, measured with both cores on an
// AVX-512 Xeon); on GPUs the device, its compute capability and the CUDA runtime, cuBLAS, cuFFT
// and NCCL versions. Fields that describe without deciding (the CPU model and its instruction
// set, how the core was chosen, the GPU driver) are shown but never make two ranks "differ".
//
// Two ranks whose decisive fields are equal compute the same bits for the same problem; when
// they differ, a sharded run no longer equals a one-process run in the last bits and a resume
// is not bit-exact. The launch layer gathers every rank's fingerprint (launch/preflight/
// numerics_agreement.h), checkpoints record the job's (`numerics` root attribute).
#pragma once

#include <string>
#include <vector>

namespace brt::runtime {

struct NumericsField {
  std::string key;    // "blas_core"
  std::string label;  // "OpenBLAS core" (for messages)
  std::string value;  // "SkylakeX"
  bool decisive = true;
};

struct Numerics {
  std::vector<NumericsField> fields;

  void add(std::string key, std::string label, std::string value, bool decisive = true);
  // The field's value, "" when absent.
  std::string value(const std::string& key) const;
  // "key\tlabel\tdecisive\tvalue" lines, for sending between ranks; from_text reads them back.
  std::string to_text() const;
  static Numerics from_text(const std::string& text);
  // The decisive fields only ("key=value\n"): equal for ranks that compute the same bits.
  std::string decisive_text() const;
  // One line for people: "OpenBLAS 0.3.21 core SkylakeX (OpenBLAS's own choice), gemm probe
  // 9c1f...; Intel(R) Xeon(R) ... (avx512f); GCC 12.2.0 Release (-march: avx512f); 1 thread".
  std::string summary() const;
};

// This process's CPU-side fingerprint with `threads` OpenMP threads (set now, as the run sets
// them): runs the GEMM probe (a few ms) and checks its results against a float64 reference (blas_check; a failure is a field, the
// caller decides, see blas_self_check_problem).
Numerics cpu_numerics(int threads);

// "" when the probe's sgemm/sgemv results were within fp32 rounding of the reference; otherwise
// what was wrong and what to do ("OpenBLAS core X computed ... set OPENBLAS_CORETYPE=Haswell").
std::string blas_self_check_problem(const Numerics& numerics);

// The ranks of a job that share one host and one fingerprint.
struct NumericsGroup {
  std::string host;
  std::vector<int> ranks;
  Numerics numerics;
};

// "0", "0-3", "0,2,5-7" for ranks in increasing order (every rank list the launch layer prints).
std::string rank_ranges(const std::vector<int>& ranks);
// "ranks 0-1 on h1" / "rank 3 on h2".
std::string ranks_on_host(const NumericsGroup& group);
// Whether every group's decisive fields are equal.
bool numerics_agree(const std::vector<NumericsGroup>& groups);
// For each decisive field that differs, "OpenBLAS core: SkylakeX on ranks 2-3 on h2, Haswell on
// ranks 0-1 on h1", joined by "; ". "" when they agree.
std::string numerics_differences(const std::vector<NumericsGroup>& groups);

// The job's record, as JSON (checkpoints' `numerics` attribute): the groups with every field.
std::string numerics_record(const std::vector<NumericsGroup>& groups);
// Reads numerics_record's JSON; empty for "" or text it cannot read.
std::vector<NumericsGroup> parse_numerics_record(const std::string& json);
// The decisive fields that differ between a stored record and this job's, named with both values
// ("OpenBLAS core Haswell in the checkpoint, SkylakeX now"); "" when each distinct fingerprint
// of one is one of the other (or the stored record is empty: a checkpoint from before records).
std::string numerics_record_change(const std::string& stored_json, const std::string& current_json,
                                   const std::string& stored_name = "the checkpoint",
                                   const std::string& current_name = "now");
// The record as lines for `ckpt inspect` ("  ranks 0-3 on h1: OpenBLAS ..."), one per group.
std::string numerics_record_lines(const std::string& json, const std::string& indent);

}  // namespace brt::runtime
