// A training run's checkpoints as one concern (docs/reliability.md): where it starts
// (launch/train/checkpoint/resume.h), its saves (under the watchdog's deadline, phase by phase, with the fault
// suite's injection points), what happens when a save fails, and rollback to the last good
// checkpoint for the step guard. The trainer calls it; it owns the run's known-good set. What it
// saves and restores is bound once, at construction (launch/train/checkpoint/train_state.h).
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
#include "launch/train/checkpoint/train_state.h"
#include "launch/train/checkpoint/training_checkpoint.h"
#include "launch/train/metrics_log.h"
#include "launch/train/step_end.h"
#include "launch/train/step_guard.h"

namespace brt::parallel {
class Communicator;
class JobMonitor;
}  // namespace brt::parallel

namespace brt::launch {

// The job around a run's checkpoints: who decides with whom, under which deadlines, and who
// prints.
struct CheckpointJob {
  const FaultInjection& faults;             // may kill or stop a save or load at its phases
  parallel::Communicator* world = nullptr;  // the resume decision, save outcomes; null: one process
  parallel::JobMonitor* monitor = nullptr;  // watches every save and load; null: no deadlines
  int world_rank = 0;
  bool print = false;  // this rank prints the notes
};

template <typename T>
class RunCheckpoints {
 public:
  // `state`: what every save writes and every load fills, for the life of this object.
  // Collective over the writing group (it gets a communicator for the background writer).
  RunCheckpoints(TrainState<T> state, const CheckpointRanks& ranks, const CheckpointJob& job);
  ~RunCheckpoints();  // waits for a save in flight
  RunCheckpoints(const RunCheckpoints&) = delete;
  RunCheckpoints& operator=(const RunCheckpoints&) = delete;

  // The metrics log, once the trainer has opened it (after start(): a resume decides the run's
  // metrics id). save, finish_pending, after_step and give_up record to it and throw
  // std::logic_error before it is set; start, init_weights and reload do not need it.
  void set_metrics_log(MetricsLog& log) { state_.log = &log; }

  // Chooses the start (launch/train/checkpoint/resume.h) and loads it into the bound state (model,
  // optimizer, data cursor, carried state, guard). Returns the position (step 0 for a fresh
  // start). Prints the notes on the printing rank.
  RunPosition start();

  // Saves now: with checkpoint.async the state is copied to the host and a writer thread
  // saves it while training goes on (at most one in flight; the final save is written before
  // this returns). A failure never harms earlier checkpoints; it stops the run (throws) unless
  // checkpoint.on_error = "continue" and this is not the final save: a failed final save is
  // always an error, so the job's exit status says the run's end was not saved. A background
  // save's outcome is reported when the next save begins (or finish_pending).
  void save(const RunPosition& pos, bool final_save);
  // Waits for the save in flight, if any, and reports it as save() would.
  void finish_pending();
  // After each step (launch/train/checkpoint/checkpoint_trust.h): an applied step counts toward confirming the
  // provisional checkpoints; then a save is made when one is due (checkpoint.every, the last
  // step, a stop), but never inside a run of skipped steps (the weights may be diverged): such
  // a save is deferred to the next step outside it, with a log event. The last step inside such
  // a run gives up (below) and ends the run with an error; a stop there saves nothing (the next
  // start resumes from the newest checkpoint and judges those steps again).
  void after_step(const StepEnd& end);
  // The step guard gave up (a rollback or a stop follows): waits for the save in flight and sets
  // aside every checkpoint not yet confirmed (*.unconfirmed), logging each.
  void give_up();
  // How long the training thread stopped for the last save (snapshot and any wait).
  double last_stall_s() const { return last_stall_s_; }

  // Whether start() resumed from a checkpoint (false: a fresh start at step 0).
  bool resumed() const { return resumed_; }
  // checkpoint.init_from: loads only the parameters of `file` (verified, same tokenizer), under
  // the watchdog's deadline; the optimizer and data cursor stay fresh.
  void init_weights(const std::string& file);

  // The newest confirmed checkpoint (launch/train/checkpoint/checkpoint_trust.h): the rollback target, if any.
  const std::optional<std::filesystem::path>& last_good() const { return trust_.last_confirmed(); }

  // Reloads last_good() into the bound state and returns its position. Throws
  // std::runtime_error if there is none.
  RunPosition reload(const std::string& why);

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
  void note_confirmed(const std::vector<int64_t>& steps);
  void end_inside_skips(const RunPosition& pos, bool last);
  void report(const SaveOutcome& outcome, bool final_save);
  RunPosition load(const std::filesystem::path& file, const char* verb);
  MetricsLog& log() const;  // the log set_metrics_log() set

  TrainState<T> state_;
  const RunConfig& cfg_;  // state_.config
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
};

}  // namespace brt::launch
