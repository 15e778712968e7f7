#include "launch/run_checkpoints.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "launch/progress.h"
#include "launch/resume.h"
#include "parallel/communicator.h"
#include "parallel/job_monitor.h"

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
  CheckpointIo io(checkpoint::GoodCheckpoints* good, StepGuard* step_guard) {
    CheckpointIo out;
    out.good = good;
    out.guard = step_guard;
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
RunCheckpoints<T>::RunCheckpoints(const RunConfig& cfg, const CheckpointRanks& ranks, parallel::Communicator* world,
                                  parallel::JobMonitor* monitor, const FaultInjection& faults, int world_rank,
                                  bool print)
    : cfg_(cfg), ranks_(ranks), world_(world), monitor_(monitor), faults_(faults), world_rank_(world_rank),
      print_(print) {
  background_ = cfg.checkpoint.async && !cfg.checkpoint.dir.empty();
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
RunPosition RunCheckpoints<T>::load(const std::filesystem::path& file, core::Model<T>& model,
                                    core::Optimizer<T>& optimizer, BatchSource& data,
                                    const std::string& tokenizer_hash, StepGuard& guard, const char* verb) {
  WatchedOperation watched = watch(monitor_, "checkpoint load", faults_, world_rank_, print_);
  const CheckpointIo io = watched.io(&good_, &guard);
  checkpoint::IoStats stats;
  const RunPosition pos = load_training_checkpoint(file, cfg_, model, optimizer, &data, tokenizer_hash, &stats,
                                                   ranks_, io);
  last_good_ = file;
  if (print_)
    std::printf("%s %s at step %lld (%.3f GB in %.2f s, %.3f GB/s)\n", verb, file.c_str(), (long long)pos.step,
                stats.bytes / 1e9, stats.seconds, stats.gb_per_s());
  return pos;
}

template <typename T>
RunPosition RunCheckpoints<T>::start(core::Model<T>& model, core::Optimizer<T>& optimizer, BatchSource& data,
                                     const std::string& tokenizer_hash, StepGuard& guard) {
  ResumePlan plan;
  {
    WatchedOperation watched = watch(monitor_, "checkpoint resume", faults_, world_rank_, print_);
    plan = plan_resume(cfg_.checkpoint, world_, good_, watched.io(&good_, nullptr).on_phase);
  }
  if (print_)
    for (const auto& note : plan.notes) std::fprintf(stderr, "checkpoint warning: %s\n", note.c_str());
  RunPosition pos;
  resumed_ = bool(plan.from);
  if (plan.from) {
    pos = load(*plan.from, model, optimizer, data, tokenizer_hash, guard, "resumed from");
  } else if (print_ && !cfg_.checkpoint.dir.empty()) {
    std::printf("no checkpoint in %s: starting from step 0\n", cfg_.checkpoint.dir.c_str());
  }
  // The background saves' host memory, planned up front: one snapshot now, before training,
  // so no save pays for allocating (and faulting in) gigabytes while the run waits.
  if (background_) {
    WatchedOperation sizing = watch(monitor_, "checkpoint snapshot", faults_, world_rank_, false);
    take_training_snapshot(snapshot_, cfg_, model, optimizer, data, pos, tokenizer_hash, ranks_, &guard);
  }
  return pos;
}

template <typename T>
void RunCheckpoints<T>::init_weights(core::Model<T>& model, const std::string& file,
                                     const std::string& tokenizer_hash) {
  WatchedOperation watched = watch(monitor_, "checkpoint.init_from", faults_, world_rank_, print_);
  load_model_parameters(file, model, watched.io(nullptr, nullptr).on_phase, tokenizer_hash);
  if (print_)
    std::printf("checkpoint.init_from: the weights of %s (a fresh optimizer, data from the start)\n",
                file.c_str());
}

template <typename T>
RunPosition RunCheckpoints<T>::reload(core::Model<T>& model, core::Optimizer<T>& optimizer, BatchSource& data,
                                      const std::string& tokenizer_hash, StepGuard& guard, const std::string& why) {
  if (!last_good_)
    throw std::runtime_error(why + "; train.rollback=true, but this run has no checkpoint to roll back to yet "
                             "(lower optim.lr, or save earlier with checkpoint.every)");
  return load(*last_good_, model, optimizer, data, tokenizer_hash, guard, "rolled back to");
}

// The outcome of a save on every rank alike: only the ranks that write (TP rank 0's DP group)
// see a failure, so world rank 0, one of them, tells every rank.
template <typename T>
std::string RunCheckpoints<T>::agree(std::string error) {
  if (world_ != nullptr && world_->size() > 1) {
    const int64_t failed = world_->all_reduce_value<int64_t>(error.empty() ? 0 : 1, parallel::ReduceOp::kMax);
    if (failed) {
      parallel::broadcast_string(*world_, error, 0);
      if (error.empty()) error = "checkpoint save failed on a writing rank (see its message)";
    }
  }
  return error;
}

template <typename T>
void RunCheckpoints<T>::report(const SaveOutcome& outcome, MetricsLog& log, bool final_save) {
  if (outcome.error.empty()) {
    last_good_ = std::filesystem::path(cfg_.checkpoint.dir) / checkpoint::checkpoint_file_name(outcome.step);
    const checkpoint::IoStats& s = outcome.result.stats;
    char msg[512];
    std::snprintf(msg, sizeof msg, "checkpoint saved: %s (%.3f GB in %.2f s, %.3f GB/s%s)", last_good_->c_str(),
                  s.bytes / 1e9, s.seconds, s.gb_per_s(),
                  outcome.background ? ("; in the background, training stalled " + seconds_text(outcome.stall_s) + " s")
                                           .c_str()
                                     : "");
    log.event("checkpoint", {{"step", double(outcome.step)}, {"seconds", s.seconds}, {"gb_per_s", s.gb_per_s()},
                             {"stall_seconds", outcome.stall_s}, {"snapshot_seconds", outcome.snapshot_s},
                             {"background", outcome.background ? 1.0 : 0.0}}, msg);
    if (print_)
      for (const auto& w : outcome.result.warnings) std::fprintf(stderr, "checkpoint warning: %s\n", w.c_str());
    return;
  }
  const std::string previous = last_good_ ? " (the last good checkpoint, " + last_good_->string() + ", is intact)"
                                          : " (no earlier checkpoint of this run)";
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
void RunCheckpoints<T>::finish_pending(MetricsLog& log) {
  if (!pending_.valid()) return;
  const auto t0 = std::chrono::steady_clock::now();
  SaveOutcome outcome = pending_.get();  // the writer thread's; its own errors are caught there
  outcome.stall_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  last_stall_s_ = outcome.stall_s;
  outcome.error = agree(outcome.error);
  report(outcome, log, /*final_save=*/false);
}

template <typename T>
void RunCheckpoints<T>::save(core::Model<T>& model, core::Optimizer<T>& optimizer, const BatchSource& data,
                             const RunPosition& pos, const std::string& tokenizer_hash, StepGuard& guard,
                             MetricsLog& log, bool final_save) {
  const auto t0 = std::chrono::steady_clock::now();
  finish_pending(log);  // at most one save in flight
  if (!background_ || final_save) {
    SaveOutcome outcome;
    outcome.step = pos.step;
    try {
      WatchedOperation watched = watch(monitor_, "checkpoint save", faults_, world_rank_, print_);
      const CheckpointIo io = watched.io(&good_, &guard);
      outcome.result = save_training_checkpoint(cfg_, model, optimizer, data, pos, tokenizer_hash, ranks_, io);
    } catch (const checkpoint::CheckpointError& e) {
      outcome.error = e.what();
    }
    outcome.stall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    last_stall_s_ = outcome.stall_s;
    outcome.error = agree(outcome.error);
    report(outcome, log, final_save);
    return;
  }
  // Asynchronous (checkpoint.async): the state is copied to the host now, between steps (the
  // collective gathers run here, on the training thread); a writer thread of this rank writes
  // it over a communicator of its own while training goes on. Atomic commit, checksums,
  // retention and every failure path are the synchronous save's: the same code writes.
  {
    WatchedOperation snapshotting = watch(monitor_, "checkpoint snapshot", faults_, world_rank_, false);
    take_training_snapshot(snapshot_, cfg_, model, optimizer, data, pos, tokenizer_hash, ranks_, &guard);
  }
  const double snapshot_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  pending_ = std::async(std::launch::async, [this, step = pos.step, snapshot_s] {
    SaveOutcome outcome;
    outcome.step = step;
    outcome.background = true;
    outcome.stall_s = snapshot_s;
    outcome.snapshot_s = snapshot_s;
    try {
      WatchedOperation watched = watch(monitor_, "checkpoint save", faults_, world_rank_, false);
      const CheckpointIo io = watched.io(&good_, nullptr);
      outcome.result = write_training_snapshot(snapshot_, cfg_.checkpoint.dir, cfg_.checkpoint.keep, writer_comm_, io);
    } catch (const std::exception& e) {
      outcome.error = e.what();
    }
    return outcome;
  });
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
