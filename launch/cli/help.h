// `brt-dist help [COMMAND]` and `COMMAND --help|-h`: usage, flags with their
// meaning and examples for every command; for the commands that take config keys, every key
// with its type, default and meaning, generated from the one key table (launch/config/config_keys.cpp)
// so the help can never drift from what the parser accepts. Printed before MPI starts.
#pragma once

#include <string>

namespace brt::launch {

// The overview: every command with one line.
std::string overview_text();
// One command's help ("train", "ckpt", ...); std::invalid_argument naming it if unknown.
std::string help_text(const std::string& command);
// Every config key, grouped by section: name, type, default, meaning.
std::string config_keys_text();
// True when argv[2..] holds --help or -h (then the command prints its help, whatever else).
bool wants_help(int argc, char** argv);

}  // namespace brt::launch
