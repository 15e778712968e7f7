// Command-line parsing shared by the subcommands: `brt-dist CMD [CONFIG] [key=value...]
// [--key value...]`. A `--section.key value` flag is the same as `section.key=value`; a few
// short flags name common keys (--steps, --peak-gflops, --resume).
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace brt::launch {

struct CommandLine {
  std::string command;                 // train, eval, prepare, ckpt, ...
  std::vector<std::string> positional;  // arguments that are neither flags nor key=value
  std::vector<std::string> overrides;   // "section.key=value"
  std::map<std::string, std::string> flags;  // other --flag value (without the dashes)
};

// `aliases` maps short flags to config keys (e.g. "steps" -> "train.steps"); `switches` are
// flags that take no value.
CommandLine parse_command_line(int argc, char** argv,
                               const std::map<std::string, std::string>& aliases,
                               const std::vector<std::string>& switches = {});

// The value of --name, or `fallback`.
std::string flag_or(const CommandLine& cl, const std::string& name, const std::string& fallback);
// std::invalid_argument naming the first flag not in `known`.
void reject_unknown_flags(const CommandLine& cl, std::initializer_list<const char*> known);

}  // namespace brt::launch
