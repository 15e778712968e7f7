#include "launch/train/mfu.h"

#include <algorithm>
#include <cstdio>

#include "launch/run/device_backend.h"
#include "runtime/gemm_peak.h"

namespace brt::launch {

namespace {
constexpr int kPeakCalls = 7;

std::string gflops_text(double g) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", g);
  return buf;
}
}  // namespace

MfuPeak::MfuPeak(double configured_gflops, bool on_gpu, int cpu_peak_size) : cpu_peak_size_(cpu_peak_size) {
  if (configured_gflops > 0) {
    gflops_ = configured_gflops;
    source_ = "train.peak_gflops";
  } else if (on_gpu) {
    // MFU against the bf16 dense matrix peak measured now on this GPU.
    gflops_ = measure_gpu_bf16_peak_gflops();
    source_ = "measured: cuBLAS 8192^3 bf16 GEMM, fp32 accumulation";
  } else {
    const runtime::GemmPeak p = runtime::measure_sgemm_peak(cpu_peak_size_, kPeakCalls);
    gflops_ = p.best_gflops;
    remeasurable_ = true;
    const std::string n = std::to_string(cpu_peak_size_);
    source_ = "measured: best of " + std::to_string(p.calls) + " " + n + "^3 sgemm, " + std::to_string(p.threads) +
              " threads; measured again if an MFU above 100% would be printed";
  }
}

double MfuPeak::mfu(double achieved_gflops, int ranks, std::string& note) {
  double mfu = achieved_gflops / (gflops_ * ranks);
  while (mfu > 1.0 && remeasurable_ && remeasures_ < kMaxRemeasures) {
    ++remeasures_;
    const double again = runtime::measure_sgemm_peak(cpu_peak_size_, kPeakCalls).best_gflops;
    if (again > gflops_) gflops_ = again;
    mfu = achieved_gflops / (gflops_ * ranks);
  }
  note.clear();
  if (mfu > 1.0) {
    note = remeasurable_ ? "above 100%: the achieved rate exceeds the sgemm peak measured " +
                               std::to_string(remeasures_ + 1) + " times (" + gflops_text(gflops_) +
                               " GFLOP/s); the machine may have been busy while measuring — set train.peak_gflops"
                         : "above 100%: " + source_ + " = " + gflops_text(gflops_) +
                               " GFLOP/s per rank is below the achieved rate";
  }
  return mfu;
}

}  // namespace brt::launch
