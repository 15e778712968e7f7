// `brt-dist config show CONFIG [key=value ...]` (the resolved TOML a run would use) and
// `brt-dist config keys` (every key, from the key table). No MPI.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "launch/cli.h"
#include "launch/commands.h"
#include "launch/config.h"
#include "launch/help.h"

namespace brt::launch {

int command_config(int argc, char** argv) {
  const CommandLine cl = parse_command_line(argc, argv, {});
  reject_unknown_flags(cl, {});
  const std::string verb = cl.positional.empty() ? "" : cl.positional[0];
  if (verb == "keys" && cl.positional.size() == 1) {
    std::fputs(config_keys_text().c_str(), stdout);
    return 0;
  }
  if (verb == "show" && cl.positional.size() == 2) {
    std::fputs(render_toml(load_run_config(resolve_config_path(cl.positional[1]), cl.overrides)).c_str(), stdout);
    return 0;
  }
  throw std::invalid_argument("usage: brt-dist config show CONFIG [key=value ...] | brt-dist config keys");
}

}  // namespace brt::launch
