#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "launch/cli.h"
#include "launch/commands.h"
#include "launch/config.h"
#include "launch/trainer.h"

namespace brt::launch {

int command_train(int argc, char** argv) {
  const CommandLine cl = parse_command_line(
      argc, argv, {{"steps", "train.steps"}, {"peak-gflops", "train.peak_gflops"},
                   {"seed", "train.seed"}, {"threads", "train.threads"},
                   {"precision", "train.precision"}, {"checkpoint-dir", "checkpoint.dir"}});
  std::string config_path = "configs/tiny.toml";
  if (auto it = cl.flags.find("config"); it != cl.flags.end()) config_path = it->second;
  if (!cl.positional.empty()) config_path = cl.positional[0];
  if (cl.positional.size() > 1)
    throw std::invalid_argument("command line: unexpected argument '" + cl.positional[1] + "'");
  std::vector<std::string> overrides = cl.overrides;
  // --resume DIR: checkpoint into DIR and continue from its newest good checkpoint.
  if (auto it = cl.flags.find("resume"); it != cl.flags.end()) {
    overrides.push_back("checkpoint.dir=" + it->second);
    overrides.push_back("checkpoint.resume=true");
  }
  for (const auto& [flag, value] : cl.flags)
    if (flag != "config" && flag != "resume")
      throw std::invalid_argument("command line: unknown flag --" + flag);
  TrainOptions options;
  options.config = load_run_config(config_path, overrides);
  std::printf("config: %s\n", config_path.c_str());
  const TrainResult r = run_training(options);
  return r.stopped_by_signal ? 0 : 0;
}

}  // namespace brt::launch
