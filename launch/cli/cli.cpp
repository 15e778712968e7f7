#include "launch/cli/cli.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace brt::launch {

CommandLine parse_command_line(int argc, char** argv,
                               const std::map<std::string, std::string>& aliases,
                               const std::vector<std::string>& switches) {
  CommandLine cl;
  if (argc >= 2) cl.command = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      std::string name = arg.substr(2), value;
      const auto eq = name.find('=');
      const bool is_switch = std::find(switches.begin(), switches.end(), name) != switches.end();
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      } else if (is_switch) {
        value = "true";
      } else {
        if (i + 1 >= argc) throw UsageError("command line: --" + name + " needs a value");
        value = argv[++i];
      }
      if (auto it = aliases.find(name); it != aliases.end()) {
        cl.overrides.push_back(it->second + "=" + value);
        cl.alias_of_key[it->second] = "--" + name;
      } else if (name.find('.') != std::string::npos) {
        cl.overrides.push_back(name + "=" + value);
      } else {
        cl.flags[name] = value;
      }
    } else if (arg.find('=') != std::string::npos) {
      cl.overrides.push_back(arg);
    } else {
      cl.positional.push_back(arg);
    }
  }
  return cl;
}

std::string flag_or(const CommandLine& cl, const std::string& name, const std::string& fallback) {
  auto it = cl.flags.find(name);
  return it == cl.flags.end() ? fallback : it->second;
}

void reject_unknown_flags(const CommandLine& cl, std::initializer_list<const char*> known) {
  for (const auto& [flag, value] : cl.flags) {
    bool ok = false;
    for (const char* k : known) ok = ok || flag == k;
    if (!ok) throw UsageError("command line: unknown flag --" + flag + " (see brt-dist " + cl.command + " --help)");
  }
}

void reject_extra_arguments(const CommandLine& cl, size_t allowed) {
  if (cl.positional.size() > allowed)
    throw UsageError("command line: unexpected argument '" + cl.positional[allowed] + "' (see brt-dist " + cl.command +
                     " --help)");
}

std::string required_flag(const CommandLine& cl, const std::string& name, const std::string& why) {
  const std::string value = flag_or(cl, name, "");
  if (value.empty()) throw UsageError("--" + name + " " + why + " is required (see brt-dist " + cl.command + " --help)");
  return value;
}

bool Range::contains(double v) const {
  return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
}

namespace {

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::string Range::text() const {
  if (std::isinf(hi)) return std::string(lo_open ? "> " : ">= ") + number_text(lo);
  if (std::isinf(lo)) return std::string(hi_open ? "< " : "<= ") + number_text(hi);
  return std::string("in ") + (lo_open ? "(" : "[") + number_text(lo) + ", " + number_text(hi) + (hi_open ? ")" : "]");
}

int64_t parse_int_flag(const std::string& flag, const std::string& text, int64_t min, int64_t max) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec == std::errc::invalid_argument || end != text.data() + text.size())
    throw UsageError("--" + flag + " needs a whole number, got '" + text + "'");
  const std::string range = max == std::numeric_limits<int64_t>::max()
                                ? ">= " + std::to_string(min)
                                : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (ec == std::errc::result_out_of_range || v < min || v > max)
    throw UsageError("--" + flag + " must be " + range + ", got " + text);
  return v;
}

uint64_t parse_uint64_flag(const std::string& flag, const std::string& text) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    throw UsageError("--" + flag + " needs a whole number in [0, 2^64), got '" + text + "'");
  return v;
}

double parse_double_flag(const std::string& flag, const std::string& text, const Range& range) {
  char* end = nullptr;
  const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw UsageError("--" + flag + " needs a number, got '" + text + "'");
  if (!std::isfinite(v) || !range.contains(v))
    throw UsageError("--" + flag + " must be " + range.text() + ", got " + text);
  return v;
}

int64_t int_flag(const CommandLine& cl, const std::string& name, int64_t fallback, int64_t min, int64_t max) {
  const auto it = cl.flags.find(name);
  return it == cl.flags.end() ? fallback : parse_int_flag(name, it->second, min, max);
}

uint64_t uint64_flag(const CommandLine& cl, const std::string& name, uint64_t fallback) {
  const auto it = cl.flags.find(name);
  return it == cl.flags.end() ? fallback : parse_uint64_flag(name, it->second);
}

double double_flag(const CommandLine& cl, const std::string& name, double fallback, const Range& range) {
  const auto it = cl.flags.find(name);
  return it == cl.flags.end() ? fallback : parse_double_flag(name, it->second, range);
}

std::string choice_flag(const CommandLine& cl, const std::string& name, const std::string& fallback,
                        std::initializer_list<const char*> choices) {
  const auto it = cl.flags.find(name);
  if (it == cl.flags.end()) return fallback;
  std::string list;
  for (const char* c : choices) {
    if (it->second == c) return it->second;
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  throw UsageError("--" + name + " must be one of " + list + ", got '" + it->second + "'");
}

}  // namespace brt::launch
