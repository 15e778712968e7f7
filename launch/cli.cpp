#include "launch/cli.h"

#include <algorithm>
#include <stdexcept>

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
        if (i + 1 >= argc) throw std::invalid_argument("command line: --" + name + " needs a value");
        value = argv[++i];
      }
      if (auto it = aliases.find(name); it != aliases.end())
        cl.overrides.push_back(it->second + "=" + value);
      else if (name.find('.') != std::string::npos)
        cl.overrides.push_back(name + "=" + value);
      else
        cl.flags[name] = value;
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
    if (!ok) throw std::invalid_argument("command line: unknown flag --" + flag);
  }
}

}  // namespace brt::launch
