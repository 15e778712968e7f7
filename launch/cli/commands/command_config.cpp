// `brt-dist config show CONFIG [key=value ...]` (the resolved TOML a run would use) and
// `brt-dist config keys [--json]` (every key, from the key table). No MPI.
#include <cstdio>
#include <stdexcept>
#include <string>

#include "launch/cli/cli.h"
#include "launch/cli/commands/commands.h"
#include "launch/cli/help.h"
#include "launch/config/config.h"
#include "launch/config/config_keys.h"

namespace brt::launch {

int command_config(int argc, char** argv) {
  const CommandLine cl = parse_command_line(argc, argv, {}, {"json"});
  reject_unknown_flags(cl, {"json"});
  const std::string verb = cl.positional.empty() ? "" : cl.positional[0];
  const bool json = cl.flags.count("json") > 0;
  if (verb == "keys" && cl.positional.size() == 1) {
    // --json: the schema the Python package and bench/peer read (python/brt_dist/config_keys.json).
    std::fputs((json ? config_keys_json() : config_keys_text()).c_str(), stdout);
    return 0;
  }
  if (verb == "show" && cl.positional.size() == 2 && !json) {
    const std::string path = resolve_config_path(cl.positional[1]);
    std::fputs(render_toml(with_command_line_config(cl, [&] { return load_run_config(path, cl.overrides); })).c_str(),
               stdout);
    return 0;
  }
  throw UsageError("usage: brt-dist config show CONFIG [key=value ...] | brt-dist config keys [--json]");
}

}  // namespace brt::launch
