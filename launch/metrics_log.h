// Training progress for people (one aligned line per logged step) and for programs (one JSON
// object per line in a JSONL file).
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace brt::launch {

struct StepMetrics {
  long step = 0;
  long total_steps = 0;
  double loss = 0;            // mean nats per target
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double gflops = 0;          // achieved, by MODEL §10's count
  double mfu = 0;             // gflops / peak
  std::string mfu_note;       // why an MFU above 100% is printed (launch/mfu.h); else empty
  double eta_s = 0;
  long tokens_seen = 0;
  long skipped_steps = 0;     // so far in the run (launch/step_guard.h)
};

class MetricsLog {
 public:
  // jsonl_path empty: no file. Throws naming the path if it cannot be opened.
  explicit MetricsLog(const std::string& jsonl_path, bool print = true);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void train_step(const StepMetrics& m);
  // A free-form record: {"event": kind, key: value...}; values are numbers.
  void event(const std::string& kind, const std::vector<std::pair<std::string, double>>& values,
             const std::string& message = "");

 private:
  std::FILE* file_ = nullptr;
  bool print_;
};

std::string format_duration(double seconds);

}  // namespace brt::launch
