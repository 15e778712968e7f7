// Training progress for people (one aligned line per logged step) and for programs (one JSON
// object per line in a JSONL file, written through nlohmann-json). The file never stops a run:
// a record that cannot be written (a full disk) is cut back off the file whole
// (data/output_file.h, RecordLog), a warning naming the file and the reason is printed once,
// and training goes on; the count of lost records is printed when the run ends.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace brt::data {
class RecordLog;
}

namespace brt::launch {

struct StepMetrics {
  long step = 0;
  long total_steps = 0;
  double loss = 0;            // mean nats per target of the applied steps since the last line
  // No step since the last line was applied (launch/train/step_guard.h): `loss` is the last skipped
  // step's (not finite, or a spike), shown as such on the line instead of a made-up 0; the JSONL
  // gets no train record for it (the skip events are its record).
  bool loss_of_skipped_step = false;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double gflops = 0;          // achieved, by model.md §10's count
  double mfu = 0;             // gflops / peak
  std::string mfu_note;       // why an MFU above 100% is printed (launch/train/mfu.h); else empty
  double eta_s = 0;
  long tokens_seen = 0;
  long skipped_steps = 0;     // so far in the run (launch/train/step_guard.h)
};

class MetricsLog {
 public:
  // jsonl_path empty: no file. Throws naming the path and the reason if it cannot be opened.
  // Every record ends with "run_id" (launch/train/run_identity.h; omitted when empty) and "time",
  // the wall clock in Unix seconds.
  explicit MetricsLog(const std::string& jsonl_path, bool print = true, std::string run_id = "");
  ~MetricsLog();  // reports the records a failing disk lost, if any
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void train_step(const StepMetrics& m);
  // A free-form record: {"event": kind, key: value...}; values are numbers.
  void event(const std::string& kind, const std::vector<std::pair<std::string, double>>& values,
             const std::string& message = "");

 private:
  template <typename Record>
  void append(Record& record, long step);
  std::unique_ptr<data::RecordLog> file_;
  bool print_;
  std::string run_id_;
  long lost_ = 0, first_lost_step_ = 0;
  std::string first_error_;
};


}  // namespace brt::launch
