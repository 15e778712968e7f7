// Progress of long work for people: on a terminal one line refreshed in
// place (at most 5 times a second); in a log file (not a terminal) one line every
// `log_every_s` seconds, so a batch log gets a record without flooding. Disabled: silent
// (--quiet). Used by prepare (documents, MB, MB/s, ETA), eval (segments, tokens/s, ETA) and
// checkpoint saves and loads that take longer than a couple of seconds (MB, MB/s).
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace brt::launch {

class Progress {
 public:
  // `what` starts every line ("eval validation"). `delay_s`: nothing is shown before that
  // much time has passed (short work stays quiet).
  Progress(std::string what, bool enabled, double delay_s = 0, double log_every_s = 10, std::FILE* out = stderr);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `fraction` of the work done (< 0: unknown), `detail` the counts and rates to show. The ETA
  // is added from the fraction and the elapsed time.
  void update(double fraction, const std::string& detail);
  // The last line (a terminal's refreshing line is ended), if anything was shown.
  void finish(const std::string& detail);
  double elapsed_s() const;

  // "12.3 MB" / "1.2 GB" and "3.4 MB/s": the units the lines use.
  static std::string bytes_text(double bytes);
  static std::string rate_text(double bytes, double seconds);

 private:
  void emit(const std::string& line, bool final_line);
  std::string what_;
  bool enabled_, terminal_;
  double delay_s_, log_every_s_;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_, last_;
  bool shown_ = false, open_line_ = false;
  size_t last_width_ = 0;
};

// "4m05s", "1h02m" (the ETA of progress and training lines); "?" when not finite.
std::string format_duration(double seconds);

}  // namespace brt::launch
