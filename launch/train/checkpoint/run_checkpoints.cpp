#include "launch/train/checkpoint/run_checkpoints.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "launch/process/progress.h"
#include "launch/process/stop_signal.h"
#include "launch/train/checkpoint/resume.h"
#include "parallel/communicator.h"
#include "parallel/health/job_monitor.h"
#include "parallel/launch_refused.h"
#include "runtime/numerics.h"

namespace brt::launch {

namespace {

// One save or load under the watchdog: every phase restarts its deadline (JobMonitor::Guard)
// and passes the fault suite's injection points ("checkpoint save: renaming"); one that takes
// longer than 2 s shows its progress (MB, MB/s).
struct WatchedOperation {
  parallel::JobMonitor::Guard guard;
  std::string operation;
  const FaultInjection* faults;
  int world_rank;
  Progress shown;
  CheckpointIo io(checkpoint::GoodCheckpoints* good) {
    CheckpointIo out;
    out.good = good;
    out.on_phase = [this](const std::string& phase) {
      guard.phase(phase);
      faults->at_phase(operation + ": " + phase, world_rank);
    };
    out.on_bytes = [this](int64_t bytes) {
      shown.update(-1, Progress::bytes_text(double(bytes)) + ", " + Progress::rate_text(double(bytes), shown.elapsed_s()));
    };
    return out;
  }
};

constexpr double kShowIoAfterSeconds = 2.0;

// While a save writes, a second Ctrl-C removes its .tmp and names the last good checkpoint
// (launch/process/stop_signal.h); the note is cleared however the save ends.
struct SaveInProgress {
  SaveInProgress(const std::string& dir, int64_t step) {
    StopSignal::note_save_started((std::filesystem::path(dir) / (checkpoint::checkpoint_file_name(step) + ".tmp")).string());
  }
  ~SaveInProgress() { StopSignal::note_save_finished(); }
  SaveInProgress(const SaveInProgress&) = delete;
  SaveInProgress& operator=(const SaveInProgress&) = delete;
};

// "1 skipped step (step 6)", "2 skipped steps in a row (steps 6..7)": the guard's open run.
std::string skip_run_text(const StepGuard& guard) {
  const auto& run = guard.recent_skips();
  if (run.size() == 1) return "1 skipped step (step " + std::to_string(run.front()) + ")";
  return std::to_string(run.size()) + " skipped steps in a row (steps " + std::to_string(run.front()) + ".." +
         std::to_string(run.back()) + ")";
}

// A resume continues the run that saved: its train.seed ordered the data (and, for synthetic
// data, made it), so a start with another seed on the same checkpoint.dir is another run — one
// that would otherwise take the first run's state silently (or, that run finished, train nothing).
void refuse_another_seed(const std::filesystem::path& file, const RunConfig& cfg) {
  int64_t stored = 0;
  try {
    stored = config_of_checkpoint(file).train.seed;
  } catch (const std::exception&) {
    return;  // a stored config this build cannot read: the load names what is wrong
  }
  if (stored == cfg.train.seed) return;
  const std::string seed = std::to_string(stored);
  throw parallel::LaunchRefused(
      (cfg.checkpoint.resume_from.empty() ? "checkpoint.dir " + cfg.checkpoint.dir + " holds a run with"
                                          : "checkpoint.resume_from is a run with") +
      std::string(" train.seed = ") + seed + " (" + file.string() + "), and this run has train.seed = " +
      std::to_string(cfg.train.seed) + ": a resume would continue that run (its data order and state), not start "
      "this one. Give a new run its own checkpoint.dir, or train.seed=" + seed + " to continue that one");
}

// What a resume changes of the run that saved (docs/training.md "Runs"): allowed, but said, from
// what to what — a longer train.steps stretches the schedule's decay, another batch changes the
// tokens per step.
void warn_of_changes(const std::filesystem::path& file, const RunConfig& cfg) {
  RunConfig stored;
  try {
    stored = config_of_checkpoint(file);
  } catch (const std::exception&) {
    return;
  }
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> changes = {
      {"train.steps", {std::to_string(stored.train.steps), std::to_string(cfg.train.steps)}},
      {"train.batch", {std::to_string(stored.train.batch), std::to_string(cfg.train.batch)}},
      {"train.grad_accum", {std::to_string(stored.train.grad_accum), std::to_string(cfg.train.grad_accum)}},
      {"optim.schedule", {core::to_string(stored.optim.schedule), core::to_string(cfg.optim.schedule)}},
      {"optim.lr", {num(stored.optim.lr), num(cfg.optim.lr)}},
      {"optim.min_lr", {num(stored.optim.min_lr), num(cfg.optim.min_lr)}},
      {"optim.warmup", {std::to_string(stored.optim.warmup), std::to_string(cfg.optim.warmup)}},
      {"optim.total_steps", {std::to_string(stored.optim.total_steps), std::to_string(cfg.optim.total_steps)}}};
  for (const auto& [key, values] : changes)
    if (values.first != values.second)
      std::fprintf(stderr, "warning: this resume changes %s from %s to %s (%s was saved with %s)\n", key.c_str(),
                   values.first.c_str(), values.second.c_str(), file.string().c_str(), values.first.c_str());
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

WatchedOperation watch(parallel::JobMonitor* monitor, const std::string& operation, const FaultInjection& faults,
                       int world_rank, bool print) {
  faults.at_phase(operation, world_rank);
  return {monitor != nullptr ? monitor->guard(operation) : parallel::JobMonitor::Guard(), operation, &faults,
          world_rank, Progress(operation, print, kShowIoAfterSeconds)};
}

}  // namespace

template <typename T>
RunCheckpoints<T>::RunCheckpoints(TrainState<T> state, const CheckpointRanks& ranks, const CheckpointJob& job)
    : state_(std::move(state)), cfg_(state_.config), ranks_(ranks), world_(job.world), monitor_(job.monitor),
      faults_(job.faults), world_rank_(job.world_rank), print_(job.print),
      trust_(cfg_.checkpoint.dir, cfg_.checkpoint.confirm_steps, good_, job.world_rank == 0) {
  background_ = cfg_.checkpoint.async && !cfg_.checkpoint.dir.empty();
  int initialized = 0, level = MPI_THREAD_SINGLE;
  MPI_Initialized(&initialized);
  if (!initialized) {
    writer_comm_ = MPI_COMM_SELF;  // one process without MPI (tests): POSIX I/O, no collectives
    return;
  }
  MPI_Query_thread(&level);
  if (background_ && level < MPI_THREAD_MULTIPLE) {
    background_ = false;  // a writer thread would call MPI beside the training thread
    if (print_)
      std::fprintf(stderr, "checkpoint warning: this MPI grants no MPI_THREAD_MULTIPLE; checkpoint.async "
                           "saves run synchronously\n");
  }
  // Collective over the writing group: the writer's collectives (HDF5's MPI-IO, the writer's
  // agreements) never share a communicator with the training thread's.
  if (background_) MPI_Comm_dup(ranks_.comm, &writer_comm_);
}

template <typename T>
RunPosition RunCheckpoints<T>::load(const std::filesystem::path& file, const char* verb) {
  WatchedOperation watched = watch(monitor_, "checkpoint load", faults_, world_rank_, print_);
  const LoadedCheckpoint loaded = load_training_checkpoint(file, state_, ranks_, watched.io(&good_));
  const RunPosition& pos = loaded.position;
  const checkpoint::IoStats& stats = loaded.stats;
  const std::string& stored_numerics = loaded.numerics;
  StopSignal::note_last_good(file.string());
  if (print_)
    std::printf("%s %s at step %lld (%.3f GB in %.2f s, %.3f GB/s)\n", verb, file.c_str(), (long long)pos.step,
                stats.bytes / 1e9, stats.seconds, stats.gb_per_s());
  // Other numerics than the ones that wrote it (runtime/numerics.h): training goes on from it,
  // but no longer bit for bit as the uninterrupted run would have.
  if (print_)
    if (const std::string change = runtime::numerics_record_change(stored_numerics, ranks_.numerics); !change.empty())
      std::fprintf(stderr, "checkpoint warning: %s was written on other numerics (%s): training continues from it, "
                           "but bit-exact agreement with an uninterrupted run is not promised\n",
                   file.c_str(), change.c_str());
  return pos;
}

template <typename T>
RunPosition RunCheckpoints<T>::start() {
  ResumePlan plan;
  {
    WatchedOperation watched = watch(monitor_, "checkpoint resume", faults_, world_rank_, print_);
    plan = plan_resume(cfg_.checkpoint, world_, good_, watched.io(&good_).on_phase);
  }
  if (print_)
    for (const auto& note : plan.notes) std::fprintf(stderr, "checkpoint warning: %s\n", note.c_str());
  RunPosition pos;
  resumed_ = bool(plan.from);
  if (plan.from) {
    refuse_another_seed(*plan.from, cfg_);
    if (print_) warn_of_changes(*plan.from, cfg_);
    pos = load(*plan.from, "resumed from");
    trust_.start(*plan.from, pos.step, state_.guard.total_skipped(), world_);  // provisional until a step is applied
  } else if (print_ && !cfg_.checkpoint.dir.empty()) {
    std::printf("no checkpoint in %s: starting from step 0\n", cfg_.checkpoint.dir.c_str());
  }
  // The background saves' host memory, planned up front: one snapshot now, before training,
  // so no save pays for allocating (and faulting in) gigabytes while the run waits.
  if (background_) {
    WatchedOperation sizing = watch(monitor_, "checkpoint snapshot", faults_, world_rank_, false);
    take_training_snapshot(snapshot_, state_, pos, ranks_);
  }
  return pos;
}

template <typename T>
void RunCheckpoints<T>::init_weights(const std::string& file) {
  WatchedOperation watched = watch(monitor_, "checkpoint.init_from", faults_, world_rank_, print_);
  load_model_parameters(file, state_.model, watched.io(nullptr).on_phase, state_.tokenizer_hash);
  if (print_)
    std::printf("checkpoint.init_from: the weights of %s (a fresh optimizer, data from the start)\n",
                file.c_str());
}

template <typename T>
RunPosition RunCheckpoints<T>::reload(const std::string& why) {
  if (!last_good())
    throw std::runtime_error(why + "; train.rollback=true, but this run has no confirmed checkpoint to roll back to "
                             "(one is confirmed once checkpoint.confirm_steps steps were applied after it; lower "
                             "optim.lr, or save earlier with checkpoint.every)");
  const std::filesystem::path target = *last_good();
  return load(target, "rolled back to");
}

// The outcome of a save on every rank alike: only the ranks that write (TP rank 0's dp_cp group)
// see a failure, so world rank 0, one of them, tells every rank.
// Whether it was refused (non-finite state) or failed is agreed on too: the two take different
// paths, which every rank must follow alike.
template <typename T>
void RunCheckpoints<T>::agree(SaveOutcome& outcome) {
  if (world_ != nullptr && world_->size() > 1) {
    const int64_t code = world_->all_reduce_value<int64_t>(outcome.error.empty() ? 0 : outcome.refused ? 1 : 2,
                                                           parallel::ReduceOp::kMax);
    if (code) {
      parallel::broadcast_string(*world_, outcome.error, 0);
      if (outcome.error.empty()) outcome.error = "checkpoint save failed on a writing rank (see its message)";
      outcome.refused = code == 1;
    }
  }
}

// Confirmations are routine (one per save): the metrics record them, the console does not.
template <typename T>
void RunCheckpoints<T>::note_confirmed(const std::vector<int64_t>& steps) {
  for (const int64_t step : steps) log().event("checkpoint_confirmed", {{"step", double(step)}});
  if (!steps.empty()) StopSignal::note_last_good(last_good()->string());
}

template <typename T>
void RunCheckpoints<T>::report(const SaveOutcome& outcome, bool final_save) {
  MetricsLog& log = this->log();
  const std::filesystem::path file = std::filesystem::path(cfg_.checkpoint.dir) / checkpoint::checkpoint_file_name(outcome.step);
  if (outcome.error.empty()) {
    const checkpoint::IoStats& s = outcome.result.stats;
    char msg[512];
    std::snprintf(msg, sizeof msg, "checkpoint saved: %s (%.3f GB in %.2f s, %.3f GB/s%s)", file.c_str(),
                  s.bytes / 1e9, s.seconds, s.gb_per_s(),
                  outcome.background ? ("; in the background, training stalled " + seconds_text(outcome.stall_s) + " s")
                                           .c_str()
                                     : "");
    log.event("checkpoint", {{"step", double(outcome.step)}, {"seconds", s.seconds}, {"gb_per_s", s.gb_per_s()},
                             {"stall_seconds", outcome.stall_s}, {"snapshot_seconds", outcome.snapshot_s},
                             {"background", outcome.background ? 1.0 : 0.0}}, msg);
    if (print_)
      for (const auto& w : outcome.result.warnings) std::fprintf(stderr, "checkpoint warning: %s\n", w.c_str());
    note_confirmed(trust_.saved(file, outcome.step, true));
    return;
  }
  trust_.saved(file, outcome.step, false);
  const std::string previous = last_good() ? " (the last good checkpoint, " + last_good()->string() + ", is intact)"
                                           : " (no confirmed checkpoint of this run)";
  // Diverged state is the step guard's business (it skips, rolls back or stops), not an I/O
  // failure: checkpoint.on_error does not apply, only the run's end must be saved.
  if (outcome.refused && !final_save) {
    log.event("checkpoint_refused", {{"step", double(outcome.step)}},
              "checkpoint refused" + previous + ": " + outcome.error);
    return;
  }
  if (outcome.refused)
    throw std::runtime_error("the final checkpoint was refused at step " + std::to_string(outcome.step) + previous +
                             "; the run's end is not saved: " + outcome.error);
  if (cfg_.checkpoint.on_error == "continue" && !final_save) {
    if (print_)
      std::fprintf(stderr, "checkpoint FAILED at step %lld, training continues (checkpoint.on_error=continue)%s: %s\n",
                   (long long)outcome.step, previous.c_str(), outcome.error.c_str());
    return;
  }
  throw std::runtime_error(std::string(final_save ? "the final checkpoint" : "checkpoint") + " failed at step " +
                           std::to_string(outcome.step) + previous +
                           (final_save ? "; the run's end is not saved, whatever checkpoint.on_error says"
                                       : "; set checkpoint.on_error=continue to keep training") +
                           ": " + outcome.error);
}

template <typename T>
void RunCheckpoints<T>::finish_pending() {
  if (!pending_.valid()) return;
  const auto t0 = std::chrono::steady_clock::now();
  SaveOutcome outcome = pending_.get();  // the writer thread's; its own errors are caught there
  outcome.stall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  last_stall_s_ = outcome.stall_s;
  agree(outcome);
  report(outcome, /*final_save=*/false);
}

template <typename T>
void RunCheckpoints<T>::save(const RunPosition& pos, bool final_save) {
  const auto t0 = std::chrono::steady_clock::now();
  finish_pending();  // at most one save in flight
  // Provisional from before its commit, whose pruning must not count it (checkpoint_trust.h).
  trust_.saving(std::filesystem::path(cfg_.checkpoint.dir) / checkpoint::checkpoint_file_name(pos.step));
  if (!background_ || final_save) {
    SaveOutcome outcome;
    outcome.step = pos.step;
    try {
      const SaveInProgress saving(cfg_.checkpoint.dir, pos.step);
      WatchedOperation watched = watch(monitor_, "checkpoint save", faults_, world_rank_, print_);
      outcome.result = save_training_checkpoint(state_, pos, ranks_, watched.io(&good_));
    } catch (const NonFiniteStateError& e) {
      outcome.error = e.what();
      outcome.refused = true;
    } catch (const checkpoint::CheckpointError& e) {
      outcome.error = e.what();
    }
    outcome.stall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    last_stall_s_ = outcome.stall_s;
    agree(outcome);
    report(outcome, final_save);
    return;
  }
  // Asynchronous (checkpoint.async): the state is copied to the host now, between steps (the
  // collective gathers run here, on the training thread); a writer thread of this rank writes
  // it over a communicator of its own while training goes on. Atomic commit, checksums,
  // retention and every failure path are the synchronous save's: the same code writes.
  {
    WatchedOperation snapshotting = watch(monitor_, "checkpoint snapshot", faults_, world_rank_, false);
    take_training_snapshot(snapshot_, state_, pos, ranks_);
  }
  const double snapshot_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  pending_ = std::async(std::launch::async, [this, step = pos.step, snapshot_s] {
    SaveOutcome outcome;
    outcome.step = step;
    outcome.background = true;
    outcome.stall_s = snapshot_s;
    outcome.snapshot_s = snapshot_s;
    try {
      const SaveInProgress saving(cfg_.checkpoint.dir, step);
      WatchedOperation watched = watch(monitor_, "checkpoint save", faults_, world_rank_, false);
      outcome.result = write_training_snapshot(snapshot_, cfg_.checkpoint, writer_comm_, watched.io(&good_));
    } catch (const NonFiniteStateError& e) {
      outcome.error = e.what();
      outcome.refused = true;
    } catch (const std::exception& e) {
      outcome.error = e.what();
    }
    return outcome;
  });
}

template <typename T>
void RunCheckpoints<T>::after_step(const StepEnd& end) {
  const RunPosition& pos = end.position;
  const bool applied = end.outcome.applied(), last = end.last, stopping = end.stopping;
  const StepGuard& guard = state_.guard;
  if (applied) note_confirmed(trust_.step_applied());
  const bool due = (cfg_.checkpoint.every > 0 && pos.step % cfg_.checkpoint.every == 0) || deferred_ || last || stopping;
  if (!due || cfg_.checkpoint.dir.empty()) return;
  // A save follows an applied step, or ends a run outside a run of skipped steps: a skipped
  // step may mean the weights diverged, and a batch skipped after a rollback taught nothing.
  const bool streak_open = guard.consecutive_skips() > 0;
  if (!streak_open && (applied || last || stopping)) {
    deferred_ = false;
    save(pos, last || stopping);
    return;
  }
  if (streak_open && (last || stopping)) return end_inside_skips(pos, last);
  if (!deferred_)
    log().event("checkpoint_deferred", {{"step", double(pos.step)}},
              "checkpoint deferred at step " + std::to_string(pos.step) + ": " +
                  (streak_open ? "inside a run of " + skip_run_text(guard) : "its batch was skipped (rolled back past it)") +
                  "; the next checkpoint follows the next applied step");
  deferred_ = true;
}

// The run's last step, or a stop, inside a run of skipped steps: nothing is saved (the weights
// may be diverged). The last step gives up and fails the run, so the job's status says its end
// was not reached; a stop leaves the provisional checkpoints for the next start to judge.
template <typename T>
void RunCheckpoints<T>::end_inside_skips(const RunPosition& pos, bool last) {
  const StepGuard& guard = state_.guard;
  if (!last) {
    if (print_)
      std::printf("not saving at step %lld: it ends a run of %s; the next start resumes from the newest checkpoint "
                  "and judges those steps again\n", (long long)pos.step, skip_run_text(guard).c_str());
    return;
  }
  give_up();
  throw std::runtime_error("the run ended inside a run of " + skip_run_text(guard) + "; its end is not saved (it may "
                           "hold diverged weights). " +
                           (last_good() ? "The last good checkpoint, " + last_good()->string() +
                                              ", is intact; the next start resumes from it. "
                                        : std::string()) +
                           (cfg_.train.rollback ? "Lower optim.lr or check the data"
                                                : "Lower optim.lr, check the data, or set train.rollback=true"));
}

template <typename T>
void RunCheckpoints<T>::give_up() {
  finish_pending();   // a save in flight is provisional too
  deferred_ = false;  // a save due on the abandoned steps is not made
  for (const std::string& note : trust_.give_up()) log().event("checkpoint_unconfirmed", {}, note);
}

template <typename T>
MetricsLog& RunCheckpoints<T>::log() const {
  if (state_.log == nullptr)
    throw std::logic_error("RunCheckpoints: a save or its report before set_metrics_log (the trainer opens the "
                           "metrics log after start())");
  return *state_.log;
}

template <typename T>
RunCheckpoints<T>::~RunCheckpoints() {
  if (pending_.valid()) pending_.wait();  // never free the snapshot under the writer
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (writer_comm_ != MPI_COMM_NULL && writer_comm_ != MPI_COMM_SELF && !finalized) MPI_Comm_free(&writer_comm_);
}

template class RunCheckpoints<float>;
template class RunCheckpoints<double>;

}  // namespace brt::launch
