#include "launch/supervise/line_stream.h"

#include <unistd.h>

#include <cerrno>

namespace brt::launch {

void LineStream::write_out(const std::string& text) const {
  const char* data = text.data();
  size_t size = text.size();
  while (size > 0) {
    const ssize_t n = ::write(out_fd_, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= size_t(n);
  }
}

void LineStream::feed(const char* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    pending_.push_back(data[i]);
    if (data[i] != '\n') {
      if (head_.size() < 4096) head_.push_back(data[i]);
      if (pending_.size() > 65536) flush_partial();
      continue;
    }
    if (judge_(head_, !flushed_) || flushed_) write_out(pending_);
    head_.clear();
    pending_.clear();
    flushed_ = false;
  }
}

void LineStream::flush_partial() {
  if (pending_.empty()) return;
  write_out(pending_);
  pending_.clear();
  flushed_ = true;
}

}  // namespace brt::launch
