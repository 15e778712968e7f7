// The subcommands of brt-dist, each taking the raw argv (argv[1] is the command name).
#pragma once

#include "launch/config/config.h"

namespace brt::launch {

int command_train(int argc, char** argv);
int command_prepare(int argc, char** argv);
int command_eval(int argc, char** argv);
int command_ckpt(int argc, char** argv);
int command_generate(int argc, char** argv);
int command_plan(int argc, char** argv);    // launch/cli/commands/command_plan.cpp
int command_doctor(int argc, char** argv);  // launch/cli/commands/command_doctor.cpp
int command_config(int argc, char** argv);  // launch/cli/commands/command_config.cpp
int command_launch(int argc, char** argv);  // launch/cli/commands/command_launch.cpp
int command_export(int argc, char** argv);  // launch/cli/commands/command_export.cpp

// The run config `brt-dist train ARGS` would train with (argv[1] == "train"): the config file
// with its overrides and flags, as command_train reads them (launch --min-dp sizes a shrink by it).
RunConfig train_config_of(int argc, char** argv);

}  // namespace brt::launch
