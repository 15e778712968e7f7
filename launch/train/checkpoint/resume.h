// Where a training run starts (docs/reliability.md), decided before any step:
//  - checkpoint.resume_from (--resume) FILE: exactly that checkpoint; damaged is an error;
//  - checkpoint.resume_from DIR: its newest good checkpoint; a DIR that does not exist or holds
//    no checkpoint is an error (nothing to resume);
//  - checkpoint.dir with checkpoint.resume (Slurm's every start): its newest good checkpoint, or
//    step 0 when it has none yet;
//  - every checkpoint damaged: an error naming them, unless checkpoint.allow_fresh_start (they
//    are then set aside, *.damaged);
//  - checkpoints in checkpoint.dir that are not this run's past (a fresh start over another run,
//    or checkpoints newer than the FILE resumed from, which later resumes would prefer): an
//    error unless checkpoint.overwrite, which deletes them.
// Damaged checkpoints newer than the one chosen are set aside and `latest` repointed
// (checkpoint/retention.h). World rank 0 decides and touches the file system; the plan (or the
// error) goes to every rank, so all ranks start alike or all fail with the same message.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "launch/config/config.h"

namespace brt::parallel {
class Communicator;
}

namespace brt::launch {

struct ResumePlan {
  std::optional<std::filesystem::path> from;  // nullopt: a fresh start at step 0
  std::vector<std::string> notes;             // what was set aside, deleted or chosen, for the log
};

// `world` (null: one process) carries rank 0's decision to every rank. `good` receives the
// checkpoint chosen. `on_phase` reports the files being verified. Throws std::runtime_error
// with the same message on every rank.
ResumePlan plan_resume(const CheckpointConfig& cfg, parallel::Communicator* world,
                       checkpoint::GoodCheckpoints& good, const checkpoint::PhaseCallback& on_phase = {});

}  // namespace brt::launch
