// Command-line parsing shared by the subcommands: `brt-dist CMD [CONFIG] [key=value...]
// [--key value...]`. A `--section.key value` flag is the same as `section.key=value`; a few
// short flags name common keys (--steps, --peak-gflops, --resume).
//
// Every flag of every command is read through the typed helpers below: a value that
// is not a number of the flag's kind ("1e3" for a count) or lies outside the range the help
// states is an error naming the flag — "--top-p must be in (0, 1], got 1.5" — and every
// command-line error is a parallel::UsageError: exit status 2, as `brt-dist help` documents.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "launch/config/config.h"
#include "parallel/mpi/launch_env.h"

namespace brt::launch {

using parallel::UsageError;

struct CommandLine {
  std::string command;                 // train, eval, prepare, ckpt, ...
  std::vector<std::string> positional;  // arguments that are neither flags nor key=value
  std::vector<std::string> overrides;   // "section.key=value"
  std::map<std::string, std::string> flags;  // other --flag value (without the dashes)
  std::map<std::string, std::string> alias_of_key;  // "train.steps" -> "--steps" when given so
};

// `aliases` maps short flags to config keys (e.g. "steps" -> "train.steps"); `switches` are
// flags that take no value. A flag without its value is a UsageError.
CommandLine parse_command_line(int argc, char** argv,
                               const std::map<std::string, std::string>& aliases,
                               const std::vector<std::string>& switches = {});

// The value of --name, or `fallback`.
std::string flag_or(const CommandLine& cl, const std::string& name, const std::string& fallback);
// UsageError naming the first flag not in `known`.
void reject_unknown_flags(const CommandLine& cl, std::initializer_list<const char*> known);
// UsageError naming the first positional argument beyond the first `allowed`.
void reject_extra_arguments(const CommandLine& cl, size_t allowed);
// The value of --name; UsageError "--name VALUE is required (why)" when absent or empty.
std::string required_flag(const CommandLine& cl, const std::string& name, const std::string& why);

// An interval of allowed values, printed as the help states it: ">= 1", "> 0", "in (0, 1]".
struct Range {
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  bool lo_open = false, hi_open = false;
  static Range at_least(double lo) { return {lo, std::numeric_limits<double>::infinity(), false, false}; }
  static Range above(double lo) { return {lo, std::numeric_limits<double>::infinity(), true, false}; }
  bool contains(double v) const;
  std::string text() const;
};

// Whole numbers: std::from_chars over the whole text ("1e3", "2.0", "", "12abc" are errors).
int64_t parse_int_flag(const std::string& flag, const std::string& text, int64_t min,
                       int64_t max = std::numeric_limits<int64_t>::max());
uint64_t parse_uint64_flag(const std::string& flag, const std::string& text);
// Real numbers: strtod over the whole text; finite and inside `range`.
double parse_double_flag(const std::string& flag, const std::string& text, const Range& range);

// --name's value parsed as above, or `fallback` when absent. `flag` is the name without dashes.
int64_t int_flag(const CommandLine& cl, const std::string& name, int64_t fallback, int64_t min,
                 int64_t max = std::numeric_limits<int64_t>::max());
uint64_t uint64_flag(const CommandLine& cl, const std::string& name, uint64_t fallback);
double double_flag(const CommandLine& cl, const std::string& name, double fallback, const Range& range);
// One of `choices`, or `fallback`.
std::string choice_flag(const CommandLine& cl, const std::string& name, const std::string& fallback,
                        std::initializer_list<const char*> choices);

// Runs `load` (which reads a config and applies the command line's key=value overrides); a
// ConfigError about the command line becomes a UsageError (exit 2) naming the flag it came
// from when that was a short flag ("--steps"); one about a file stays a ConfigError (exit 1).
template <typename F>
auto with_command_line_config(const CommandLine& cl, F&& load) -> decltype(load()) {
  try {
    return load();
  } catch (const ConfigError& e) {
    if (e.source() != "command line") throw;
    const auto alias = cl.alias_of_key.find(e.key());
    throw UsageError(alias == cl.alias_of_key.end() ? std::string(e.what())
                                                    : std::string(e.what()) + " (given as " + alias->second + ")");
  }
}

}  // namespace brt::launch
