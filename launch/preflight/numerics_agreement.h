// Every rank's numerics, compared at start (docs/reliability.md "Numerics"). Beside the config
// check (config_agreement.h): each rank takes its fingerprint (runtime/numerics.h: BLAS and its
// core, the GEMM probe's bits, CPU, compiler, build; on GPUs device and CUDA libraries), the
// fingerprints are gathered with the host names, and world rank 0 prints one line when all
// agree, one line per host and fingerprint when not, followed by a warning naming the fields,
// ranks and hosts that differ — results then differ from a one-process run in the last bits.
// Under train.deterministic=true a difference refuses the start (exit 2), as does a failed BLAS
// self-check on any rank (always: that core computes wrong results). The job's record goes
// into every checkpoint.
#pragma once

#include <string>
#include <vector>

#include "runtime/numerics.h"

namespace brt::parallel {
class MpiSession;
}

namespace brt::launch {

// This rank's fingerprint: the CPU side with `threads` OpenMP threads, plus the GPU's when
// `gpu_device` >= 0.
runtime::Numerics local_numerics(int threads, int gpu_device);

// The fault suite's `wrongblas` (launch/process/fault_injection.h): the self-check as a BLAS that
// computes wrong results would leave it.
void inject_wrong_blas(runtime::Numerics& numerics);

struct NumericsAgreement {
  std::vector<runtime::NumericsGroup> groups;  // by host and fingerprint, in rank order
  bool agree = true;
  std::string record;  // runtime::numerics_record(groups)
};

// Collective over MPI_COMM_WORLD (its own communicator, deadline `timeout_s`). Throws
// parallel::LaunchRefused on every rank alike for a failed self-check, or a difference when
// `deterministic`.
NumericsAgreement agree_on_numerics(parallel::MpiSession& session, const runtime::Numerics& mine,
                                    bool deterministic, double timeout_s);

// The start-up lines: "numerics: SUMMARY (the same on all 4 ranks, 2 hosts)", or
// "numerics: the ranks differ" and one indented line per group.
std::string numerics_start_lines(const NumericsAgreement& agreement);
// The warning for ranks that differ ("" when they agree).
std::string numerics_warning(const NumericsAgreement& agreement);

}  // namespace brt::launch
