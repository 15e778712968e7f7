#include "launch/metrics_log.h"

#include <cmath>
#include <filesystem>
#include <stdexcept>

namespace brt::launch {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  const long t = long(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  return buf;
}

MetricsLog::MetricsLog(const std::string& path, bool print) : print_(print) {
  if (path.empty()) return;
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  file_ = std::fopen(path.c_str(), "a");
  if (file_ == nullptr) throw std::runtime_error("cannot open metrics file " + path);
}

MetricsLog::~MetricsLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsLog::train_step(const StepMetrics& m) {
  const double bits = m.loss / std::log(2.0);
  if (print_) {
    std::printf(
        "step %6ld/%ld | loss %.4f | bits/tok %.4f | lr %.3e | gnorm %.3f | %8.0f tok/s | "
        "%7.2f GFLOP/s | MFU %5.1f%%%s | ETA %s%s\n",
        m.step, m.total_steps, m.loss, bits, m.lr, m.grad_norm, m.tokens_per_s, m.gflops,
        100.0 * m.mfu, m.mfu_note.empty() ? "" : (" (" + m.mfu_note + ")").c_str(), format_duration(m.eta_s).c_str(),
        m.skipped_steps > 0 ? (" | skipped " + std::to_string(m.skipped_steps)).c_str() : "");
    std::fflush(stdout);
  }
  if (file_ != nullptr) {
    std::fprintf(file_,
                 "{\"event\":\"train\",\"step\":%ld,\"loss\":%.17g,\"bits_per_token\":%.8g,"
                 "\"lr\":%.8g,\"grad_norm\":%.8g,\"tokens_per_s\":%.8g,\"gflops\":%.8g,"
                 "\"mfu\":%.8g,\"tokens_seen\":%ld,\"eta_s\":%.3f,\"skipped_steps\":%ld}\n",
                 m.step, m.loss, bits, m.lr, m.grad_norm, m.tokens_per_s, m.gflops, m.mfu,
                 m.tokens_seen, m.eta_s, m.skipped_steps);
    std::fflush(file_);
  }
}

void MetricsLog::event(const std::string& kind,
                       const std::vector<std::pair<std::string, double>>& values,
                       const std::string& message) {
  if (print_ && !message.empty()) {
    std::printf("%s\n", message.c_str());
    std::fflush(stdout);
  }
  if (file_ == nullptr) return;
  std::fprintf(file_, "{\"event\":\"%s\"", kind.c_str());
  for (const auto& [k, v] : values) {
    if (std::isfinite(v)) std::fprintf(file_, ",\"%s\":%.10g", k.c_str(), v);
    else std::fprintf(file_, ",\"%s\":null", k.c_str());  // JSON has no NaN (a skipped step's loss)
  }
  std::fprintf(file_, "}\n");
  std::fflush(file_);
}

}  // namespace brt::launch
