// The system's reason for a failed call, as every preflight and lock message names it:
// "Read-only file system (EROFS)" — the text users search for and the name scripts match.
#pragma once

#include <cstring>
#include <string>

namespace brt::launch {

inline std::string errno_text(int error) {
  const char* name = strerrorname_np(error);  // glibc 2.32+
  return std::string(std::strerror(error)) + (name != nullptr ? std::string(" (") + name + ")" : "");
}

}  // namespace brt::launch
