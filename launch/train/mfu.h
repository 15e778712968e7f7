// An honest MFU: the peak it divides by is robust to a busy start, and an
// MFU above 100% is never printed without saying why.
//  - Measured (CPU): the best of several 2048³ sgemm calls, since other load only ever slows a
//    call down; when an MFU above 100% would be printed, the peak is measured again (kept if
//    higher), up to kMaxRemeasures times.
//  - train.peak_gflops, or the GPU's bf16 GEMM peak: used as given; above 100% the note says
//    that the peak is below the achieved rate.
#pragma once

#include <string>

namespace brt::launch {

class MfuPeak {
 public:
  static constexpr int kMaxRemeasures = 3;
  static constexpr int kCpuPeakSize = 2048;
  // configured > 0: train.peak_gflops. Else measured now (on_gpu: the bf16 GEMM peak; on the
  // CPU by cpu_peak_size³ sgemm calls: training's 2048³ by default, smaller in tests).
  MfuPeak(double configured_gflops, bool on_gpu, int cpu_peak_size = kCpuPeakSize);

  double gflops() const { return gflops_; }
  const std::string& source() const { return source_; }
  // achieved / (ranks x peak). `note` is set (else cleared) when the result is above 1.
  double mfu(double achieved_gflops, int ranks, std::string& note);

 private:
  double gflops_ = 0;
  std::string source_;
  int cpu_peak_size_;
  bool remeasurable_ = false;
  int remeasures_ = 0;
};

}  // namespace brt::launch
