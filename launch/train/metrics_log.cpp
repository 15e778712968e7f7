#include "launch/train/metrics_log.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "data/output_file.h"
#include "launch/process/progress.h"

namespace brt::launch {

namespace {

using Record = nlohmann::ordered_json;  // keys in the order written: "event" first, then "step"

// A whole number stays one in the file ("step":5, not 5.0); JSON has no NaN: null (a skipped
// step's loss).
Record number(double v) {
  if (!std::isfinite(v)) return nullptr;
  if (v == std::floor(v) && std::fabs(v) < 9007199254740992.0) return int64_t(v);
  return v;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, bool print, std::string run_id)
    : print_(print), run_id_(std::move(run_id)) {
  if (!path.empty()) file_ = std::make_unique<data::RecordLog>(path);
}

MetricsLog::~MetricsLog() {
  if (lost_ > 0)
    std::fprintf(stderr, "warning: %ld metrics record%s not written to %s (from step %ld: %s)\n", lost_,
                 lost_ == 1 ? " was" : "s were", file_->path().c_str(), first_lost_step_, first_error_.c_str());
}

template <typename Record>
void MetricsLog::append(Record& r, long step) {
  if (file_ == nullptr) return;
  if (!run_id_.empty()) r["run_id"] = run_id_;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  r["time"] = std::round(now * 1000) / 1000;  // ms: records of one step's events stay ordered
  const std::string error = file_->append(r.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  if (error.empty()) return;
  if (lost_++ == 0) {
    first_lost_step_ = step;
    first_error_ = error;
    std::fprintf(stderr,
                 "warning: cannot write the metrics file %s: %s; its record of step %ld is lost (the file "
                 "keeps only whole records). Training continues; later records are written if space "
                 "comes back\n",
                 file_->path().c_str(), error.c_str(), step);
    std::fflush(stderr);
  }
}

void MetricsLog::train_step(const StepMetrics& m) {
  const double bits = m.loss / std::log(2.0);
  if (print_) {
    std::printf(
        "step %6ld/%ld | loss %.4f%s | bits/tok %.4f | lr %.3e | gnorm %.3f | %8.0f tok/s | "
        "%7.2f GFLOP/s | MFU %5.1f%%%s | ETA %s%s\n",
        m.step, m.total_steps, m.loss, m.loss_of_skipped_step ? " (skipped)" : "", bits, m.lr, m.grad_norm,
        m.tokens_per_s, m.gflops, 100.0 * m.mfu, m.mfu_note.empty() ? "" : (" (" + m.mfu_note + ")").c_str(),
        format_duration(m.eta_s).c_str(),
        m.skipped_steps > 0 ? (" | skipped " + std::to_string(m.skipped_steps)).c_str() : "");
    std::fflush(stdout);
  }
  // No step of the window was applied: its skip events are the record (a train record's loss is
  // always an applied step's, so programs reading the curve never meet a skipped one's).
  if (file_ == nullptr || m.loss_of_skipped_step) return;
  // "step" then "loss", adjacent: tests/faults/lib.sh's losses() reads them so.
  Record r;
  r["event"] = "train";
  r["step"] = m.step;
  r["loss"] = number(m.loss);
  r["bits_per_token"] = number(bits);
  r["lr"] = number(m.lr);
  r["grad_norm"] = number(m.grad_norm);
  r["tokens_per_s"] = number(m.tokens_per_s);
  r["gflops"] = number(m.gflops);
  r["mfu"] = number(m.mfu);
  r["tokens_seen"] = m.tokens_seen;
  r["eta_s"] = number(std::round(m.eta_s * 1000) / 1000);
  r["skipped_steps"] = m.skipped_steps;
  append(r, m.step);
}

void MetricsLog::event(const std::string& kind,
                       const std::vector<std::pair<std::string, double>>& values,
                       const std::string& message) {
  if (print_ && !message.empty()) {
    std::printf("%s\n", message.c_str());
    std::fflush(stdout);
  }
  if (file_ == nullptr) return;
  Record r;
  r["event"] = kind;
  long step = 0;
  for (const auto& [k, v] : values) {
    r[k] = number(v);
    if (k == "step" && std::isfinite(v)) step = long(v);
  }
  append(r, step);
}

}  // namespace brt::launch
