// What `brt-dist eval` and `brt-dist generate` share: a checkpoint's model on this command's
// layout (--tp) and device (--device, --precision), every wait under train.timeout_s and every
// error named (docs/reliability.md).
#pragma once

#include <memory>
#include <string>

#include "launch/cli/cli.h"
#include "launch/config/config.h"
#include "launch/run/run_model.h"

namespace brt::parallel {
class MpiSession;
class ProcessGroups;
}  // namespace brt::parallel

namespace brt::launch {

// The checkpoint's config (its attributes verified: checkpoint/reader.h) with this command's
// overrides (their sources recorded in `sources`), computing where this command says (train.tp
// 1, cpu, fp32 unless given); the monitor's deadline set from train.timeout_s and the threads
// applied (refused above 4 x the cores, launch/preflight/preflight.h). UsageError without
// --checkpoint.
RunConfig checkpoint_command_config(parallel::MpiSession& mpi, const CommandLine& cl, const std::string& checkpoint,
                                    const char* command, ConfigSources* sources);

// The checkpoint file `given` names, the same on every rank (world rank 0 decides): a file as
// it is; a checkpoint directory, its newest committed checkpoint (a live run's newest is safe
// from its pruning, which removes the oldest). A file that does not exist is an error saying
// what happened when its directory still holds checkpoints: a live run keeps only its newest
// checkpoint.keep, and pruned this one.
std::string resolve_checkpoint_argument(parallel::MpiSession& mpi, const std::string& given, const char* command);

// The checkpoint's model at `streams` streams over `groups`, its parameters loaded under the
// deadline phase by phase (and the fault suite's injection points): the CPU, or (--device cuda)
// the GPU of this rank's local rank in fp32 or bf16. Throws naming the key and rank on a bad
// setting (train.precision = "fp64" is refused: these commands compute in fp32, or bf16).
std::unique_ptr<RunModel<float>> load_checkpoint_model(parallel::MpiSession& mpi, const RunConfig& cfg,
                                                       const parallel::ProcessGroups& groups, int streams,
                                                       const std::string& checkpoint, const char* command);

}  // namespace brt::launch
