#include "launch/run_checkpoints.h"

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
      print_(print) {}

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
  if (plan.from) return load(*plan.from, model, optimizer, data, tokenizer_hash, guard, "resumed from");
  if (print_ && !cfg_.checkpoint.dir.empty())
    std::printf("no checkpoint in %s: starting from step 0\n", cfg_.checkpoint.dir.c_str());
  return {};
}

template <typename T>
RunPosition RunCheckpoints<T>::reload(core::Model<T>& model, core::Optimizer<T>& optimizer, BatchSource& data,
                                      const std::string& tokenizer_hash, StepGuard& guard, const std::string& why) {
  if (!last_good_)
    throw std::runtime_error(why + "; train.rollback=true, but this run has no checkpoint to roll back to yet "
                             "(lower optim.lr, or save earlier with checkpoint.every)");
  return load(*last_good_, model, optimizer, data, tokenizer_hash, guard, "rolled back to");
}

template <typename T>
void RunCheckpoints<T>::save(core::Model<T>& model, core::Optimizer<T>& optimizer, const BatchSource& data,
                             const RunPosition& pos, const std::string& tokenizer_hash, StepGuard& guard,
                             MetricsLog& log, bool final_save) {
  std::string error;
  checkpoint::SaveResult r;
  try {
    WatchedOperation watched = watch(monitor_, "checkpoint save", faults_, world_rank_, print_);
    const CheckpointIo io = watched.io(&good_, &guard);
    r = save_training_checkpoint(cfg_, model, optimizer, data, pos, tokenizer_hash, ranks_, io);
  } catch (const checkpoint::CheckpointError& e) {
    error = e.what();
  }
  // Only the ranks that write (TP rank 0's DP group) see a failure: world rank 0, one of them,
  // tells every rank, so all go on or all stop together.
  if (world_ != nullptr && world_->size() > 1) {
    const int64_t failed = world_->all_reduce_value<int64_t>(error.empty() ? 0 : 1, parallel::ReduceOp::kMax);
    if (failed) {
      parallel::broadcast_string(*world_, error, 0);
      if (error.empty()) error = "checkpoint save failed on a writing rank (see its message)";
    }
  }
  if (error.empty()) {
    last_good_ = std::filesystem::path(cfg_.checkpoint.dir) / checkpoint::checkpoint_file_name(pos.step);
    char msg[512];
    std::snprintf(msg, sizeof msg, "checkpoint saved: %s (%.3f GB in %.2f s, %.3f GB/s)", last_good_->c_str(),
                  r.stats.bytes / 1e9, r.stats.seconds, r.stats.gb_per_s());
    log.event("checkpoint", {{"step", double(pos.step)}, {"seconds", r.stats.seconds},
                             {"gb_per_s", r.stats.gb_per_s()}}, msg);
    if (print_)
      for (const auto& w : r.warnings) std::fprintf(stderr, "checkpoint warning: %s\n", w.c_str());
    return;
  }
  const std::string previous = last_good_ ? " (the last good checkpoint, " + last_good_->string() + ", is intact)"
                                          : " (no earlier checkpoint of this run)";
  if (cfg_.checkpoint.on_error == "continue" && !final_save) {
    if (print_)
      std::fprintf(stderr, "checkpoint FAILED at step %lld, training continues (checkpoint.on_error=continue)%s: %s\n",
                   (long long)pos.step, previous.c_str(), error.c_str());
    return;
  }
  throw std::runtime_error(std::string(final_save ? "the final checkpoint" : "checkpoint") + " failed at step " +
                           std::to_string(pos.step) + previous +
                           (final_save ? "; the run's end is not saved, whatever checkpoint.on_error says"
                                       : "; set checkpoint.on_error=continue to keep training") +
                           ": " + error);
}

template class RunCheckpoints<float>;
template class RunCheckpoints<double>;

}  // namespace brt::launch
