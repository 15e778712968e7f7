// A training run's checkpoints as one concern (docs/reliability.md): where it starts
// (launch/train/checkpoint/resume.h), its saves (under the watchdog's deadline, phase by phase, with the fault
// suite's injection points), what happens when a save fails, and rollback to the last good
// checkpoint for the step guard. The trainer calls it; it owns the run's known-good set.
#pragma once

#include <mpi.h>

#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "core/model.h"
#include "core/optim/optimizer.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"
#include "launch/process/fault_injection.h"
#include "launch/train/checkpoint/checkpoint_trust.h"
#include "launch/train/metrics_log.h"
#include "launch/train/step_guard.h"
#include "launch/train/checkpoint/training_checkpoint.h"

namespace brt::parallel {
class Communicator;
class JobMonitor;
}  // namespace brt::parallel

namespace brt::launch {

template <typename T>
class RunCheckpoints {
 public:
  // `world` (null: one process) carries the resume decision; `monitor` (null: no deadlines)
  // watches every save and load; `faults` may kill or stop at their phases.
  // Collective over the writing group (it gets a communicator for the background writer).
  RunCheckpoints(const RunConfig& cfg, const CheckpointRanks& ranks, parallel::Communicator* world,
                 parallel::JobMonitor* monitor, const FaultInjection& faults, int world_rank, bool print);
  ~RunCheckpoints();  // waits for a save in flight
  RunCheckpoints(const RunCheckpoints&) = delete;
  RunCheckpoints& operator=(const RunCheckpoints&) = delete;

  // Chooses the start (launch/train/checkpoint/resume.h) and loads it into model, optimizer, data and guard.
  // Returns the position (step 0 for a fresh start). Prints the notes on the printing rank.
  RunPosition start(core::Model<T>& model, core::Optimizer<T>& optimizer, BatchSource& data,
                    const std::string& tokenizer_hash, StepGuard& guard);

  // Saves now: with checkpoint.async the state is copied to the host and a writer thread
  // saves it while training goes on (at most one in flight; the final save is written before
  // this returns). A failure never harms earlier checkpoints; it stops the run (throws) unless
  // checkpoint.on_error = "continue" and this is not the final save: a failed final save is
  // always an error, so the job's exit status says the run's end was not saved. A background
  // save's outcome is reported when the next save begins (or finish_pending).
  void save(core::Model<T>& model, core::Optimizer<T>& optimizer, const BatchSource& data, const RunPosition& pos,
            const std::string& tokenizer_hash, StepGuard& guard, MetricsLog& log, bool final_save);
  // Waits for the save in flight, if any, and reports it as save() would.
  void finish_pending(MetricsLog& log);
  // After each step (launch/train/checkpoint/checkpoint_trust.h): an applied step counts toward confirming the
  // provisional checkpoints; then a save is made when one is due (checkpoint.every, the last
  // step, a stop), but never inside a run of skipped steps (the weights may be diverged): such
  // a save is deferred to the next step outside it, with a log event. The last step inside such
  // a run gives up (below) and ends the run with an error; a stop there saves nothing (the next
  // start resumes from the newest checkpoint and judges those steps again).
  void after_step(core::Model<T>& model, core::Optimizer<T>& optimizer, const BatchSource& data,
                  const RunPosition& pos, const std::string& tokenizer_hash, StepGuard& guard, MetricsLog& log,
                  bool applied, bool last, bool stopping);
  // The step guard gave up (a rollback or a stop follows): waits for the save in flight and sets
  // aside every checkpoint not yet confirmed (*.unconfirmed), logging each.
  void give_up(MetricsLog& log);
  // Gradient accumulation (launch/train/grad_accum.h): the carried state every save writes and
  // every load fills, instead of the model's own (the refs stay valid for the run).
  void set_carried_state(CarriedTensors<T> carried) { carried_ = std::move(carried); }
  // How long the training thread stopped for the last save (snapshot and any wait).
  double last_stall_s() const { return last_stall_s_; }

  // Whether start() resumed from a checkpoint (false: a fresh start at step 0).
  bool resumed() const { return resumed_; }
  // checkpoint.init_from: loads only the parameters of `file` (verified, same tokenizer), under
  // the watchdog's deadline; the optimizer and data cursor stay fresh.
  void init_weights(core::Model<T>& model, const std::string& file, const std::string& tokenizer_hash);

  // The newest confirmed checkpoint (launch/train/checkpoint/checkpoint_trust.h): the rollback target, if any.
  const std::optional<std::filesystem::path>& last_good() const { return trust_.last_confirmed(); }

  // Reloads last_good() (model, optimizer, data cursor, carried state, guard) and returns its
  // position. Throws std::runtime_error if there is none.
  RunPosition reload(core::Model<T>& model, core::Optimizer<T>& optimizer, BatchSource& data,
                     const std::string& tokenizer_hash, StepGuard& guard, const std::string& why);

 private:
  struct SaveOutcome {
    int64_t step = 0;
    checkpoint::SaveResult result;
    std::string error;  // empty: saved
    bool background = false;
    double stall_s = 0;     // the training thread stopped this long for this save, in all
    double snapshot_s = 0;  // of which: copying the state to the host (background saves)
    bool refused = false;   // NonFiniteStateError: diverged state, nothing written (not an I/O failure)
  };
  void agree(SaveOutcome& outcome);
  void note_confirmed(const std::vector<int64_t>& steps, MetricsLog& log);
  void end_inside_skips(const StepGuard& guard, const RunPosition& pos, MetricsLog& log, bool last);
  void report(const SaveOutcome& outcome, MetricsLog& log, bool final_save);
  RunPosition load(const std::filesystem::path& file, core::Model<T>& model, core::Optimizer<T>& optimizer,
                   BatchSource& data, const std::string& tokenizer_hash, StepGuard& guard, const char* verb);

  const RunConfig& cfg_;
  CheckpointRanks ranks_;
  parallel::Communicator* world_;
  parallel::JobMonitor* monitor_;
  const FaultInjection& faults_;
  int world_rank_;
  bool print_;
  checkpoint::GoodCheckpoints good_;
  CheckpointTrust trust_;  // after good_, which it marks
  bool deferred_ = false;  // a save fell due inside a run of skipped steps
  bool resumed_ = false;
  bool background_ = false;
  MPI_Comm writer_comm_ = MPI_COMM_NULL;
  TrainingSnapshot<T> snapshot_;  // the host copy the writer thread saves (buffers reused)
  std::future<SaveOutcome> pending_;
  double last_stall_s_ = 0;
  CarriedTensors<T> carried_;  // empty: the model's own
  const CarriedTensors<T>* carried() const { return carried_.empty() ? nullptr : &carried_; }
};

}  // namespace brt::launch
