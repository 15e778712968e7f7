// Which of a run's checkpoints count as good (docs/reliability.md, "Divergence-safe
// checkpoints").
//
// The step that blows the weights up has a finite loss: its forward ran on the weights from
// before it. So the checkpoint saved right after it looks like any other, and only the next
// step, run on its weights, shows the damage. A checkpoint is therefore provisional when saved
// and confirmed once checkpoint.confirm_steps (G) steps have been applied after it. Skipped
// steps in between neither count nor refute it (a skip leaves the weights as they were). A
// provisional checkpoint is not counted toward checkpoint.keep (checkpoint/retention.h) and is
// never a rollback target. When the step guard gives up (a rollback, a stop, or the run's end
// inside a run of skipped steps), the provisional checkpoints are set aside as *.unconfirmed,
// so no later start resumes from them either.
//
// Nothing extra is stored: confirmation follows from the checkpoints themselves. Saves are made
// only outside a run of skipped steps, and each checkpoint holds its step and the guard's count
// of skipped steps (/data/guard_counters), so the steps applied between two checkpoints of one
// run are (step difference) - (skipped difference), and a later start recomputes which
// checkpoints are confirmed. Every rank keeps the same state (every input is agreed on); only
// world rank 0 touches the file system.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace brt::parallel {
class Communicator;
}

namespace brt::launch {

class CheckpointTrust {
 public:
  // `dir`: checkpoint.dir; `file_system`: this rank renames and repoints (world rank 0).
  CheckpointTrust(std::filesystem::path dir, int confirm_steps, checkpoint::GoodCheckpoints& good, bool file_system);

  // The run starts from `file` (step `step`, `skipped` steps skipped before it, from its guard):
  // it is provisional; the older checkpoints of its directory are confirmed as far as the steps
  // applied since them show (world rank 0 reads them, `world` carries the result; null: one
  // process). Collective over `world`.
  void start(const std::filesystem::path& file, int64_t step, int64_t skipped, parallel::Communicator* world);

  // A save of `file` begins: provisional from before its commit prunes.
  void saving(const std::filesystem::path& file);
  // Its outcome (committed, or failed or refused: nothing was written). Returns the steps of the
  // checkpoints confirmed now (a background save's commit can come after its G steps).
  std::vector<int64_t> saved(const std::filesystem::path& file, int64_t step, bool committed);
  // A step was applied. Returns the steps of the checkpoints confirmed now.
  std::vector<int64_t> step_applied();

  // The newest confirmed checkpoint: the rollback target, "the last good checkpoint".
  const std::optional<std::filesystem::path>& last_confirmed() const { return confirmed_; }

  // The step guard gave up: every provisional checkpoint is set aside (*.unconfirmed; files
  // outside `dir` are only forgotten) and `latest` repointed. Returns one note per file.
  std::vector<std::string> give_up();

 private:
  struct Provisional {
    std::filesystem::path path;
    int64_t step = 0;
    int applied = 0;  // steps applied since it was saved
    bool committed = false;
  };
  std::vector<int64_t> confirm_ready();

  std::filesystem::path dir_;
  int confirm_steps_;
  checkpoint::GoodCheckpoints& good_;
  bool file_system_;
  std::vector<Provisional> provisional_;  // oldest first
  std::optional<std::filesystem::path> confirmed_;
};

}  // namespace brt::launch
