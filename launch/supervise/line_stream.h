// One of the launcher's output streams (stdout or stderr), copied to the supervisor's own as it
// comes, line by line: each complete line is offered to a judge, which reads it and may keep it
// out of the log (the heartbeats); what arrives of a line before its end is written when the
// launcher pauses mid-line (a prompt) or the line passes 64 KiB, and then that line is kept.
#pragma once

#include <functional>
#include <string>

namespace brt::launch {

class LineStream {
 public:
  // judge(line without its newline, whole): false to keep the line out of the log. `whole` is
  // false when part of it was already written.
  using Judge = std::function<bool(const std::string& line, bool whole)>;
  LineStream(int out_fd, Judge judge) : out_fd_(out_fd), judge_(std::move(judge)) {}
  void feed(const char* data, size_t size);
  // What has arrived of the current line, written now (the launcher paused, or its end).
  void flush_partial();

 private:
  void write_out(const std::string& text) const;
  int out_fd_;
  Judge judge_;
  std::string head_;     // the line's first 4 KiB: what the judge reads
  std::string pending_;  // what of the line is not yet written
  bool flushed_ = false;
};

}  // namespace brt::launch
