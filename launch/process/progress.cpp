#include "launch/process/progress.h"

#include <unistd.h>

#include <cmath>

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

namespace {
double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
}  // namespace

Progress::Progress(std::string what, bool enabled, double delay_s, double log_every_s, std::FILE* out)
    : what_(std::move(what)), enabled_(enabled), terminal_(::isatty(::fileno(out)) == 1), delay_s_(delay_s),
      log_every_s_(log_every_s), out_(out), start_(std::chrono::steady_clock::now()), last_(start_) {}

Progress::~Progress() {
  if (open_line_) std::fputc('\n', out_);
}

double Progress::elapsed_s() const { return seconds_between(start_, std::chrono::steady_clock::now()); }

std::string Progress::bytes_text(double bytes) {
  char buf[32];
  if (bytes >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  else std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

std::string Progress::rate_text(double bytes, double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB/s", seconds > 0 ? bytes / 1e6 / seconds : 0.0);
  return buf;
}

void Progress::update(double fraction, const std::string& detail) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = seconds_between(start_, now);
  if (elapsed < delay_s_) return;
  const double since = seconds_between(last_, now);
  if (shown_ && since < (terminal_ ? 0.2 : log_every_s_)) return;
  std::string line = what_ + ": " + detail;
  if (fraction > 0 && fraction < 1) line += ", ETA " + format_duration(elapsed / fraction * (1 - fraction));
  emit(line, false);
  last_ = now;
}

void Progress::finish(const std::string& detail) {
  if (!enabled_ || (!shown_ && elapsed_s() < delay_s_)) return;
  emit(what_ + ": " + detail, true);
}

void Progress::emit(const std::string& line, bool final_line) {
  shown_ = true;
  if (terminal_) {
    std::string padded = line;
    if (padded.size() < last_width_) padded.resize(last_width_, ' ');  // erase a longer earlier line
    std::fprintf(out_, "\r%s%s", padded.c_str(), final_line ? "\n" : "");
    last_width_ = line.size();
    open_line_ = !final_line;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace brt::launch
