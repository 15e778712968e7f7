#include "launch/train/train_components.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "launch/eval/evaluator.h"
#include "launch/process/stop_signal.h"

namespace brt::launch {

// ---- ProgressComponent ----

ProgressComponent::ProgressComponent(const RunConfig& cfg, MetricsLog& log, MfuPeak& peak,
                                     const core::FlopBreakdown& flops, double tokens_per_step, int ranks,
                                     const StepGuard& guard, int64_t first_step)
    : cfg_(cfg), log_(log), peak_(peak), training_flops_per_token_(flops.training()),
      tokens_per_step_(tokens_per_step), ranks_(ranks), guard_(guard), first_step_(first_step) {}

void ProgressComponent::on_step(const StepEnd& end) {
  const StepOutcome& o = end.outcome;
  if (o.applied()) {
    window_sums_.nats += o.sums.nats;
    window_sums_.count += o.sums.count;
    stats_ = o.stats;
  } else {
    skipped_loss_ = o.loss;  // NaN for a skipped batch: its loss was never computed
    skipped_grad_norm_ = o.grad_norm;
  }
  window_seconds_ += end.seconds;
  total_seconds_ += end.seconds;
  ++window_steps_;
}

void ProgressComponent::on_rollback(const RunPosition& position) {
  first_step_ = position.step;
  total_seconds_ = 0;
}

bool ProgressComponent::due(const StepEnd& end) const {
  return cfg_.log.every > 0 && (end.number % cfg_.log.every == 0 || end.last || end.number - 1 == first_step_);
}

void ProgressComponent::on_step_end(StepEnd& end) {
  if (!due(end)) return;
  StepMetrics m;
  m.step = end.number;
  m.total_steps = cfg_.train.steps;
  m.loss = window_sums_.count ? window_sums_.nats / double(window_sums_.count) : skipped_loss_;
  m.loss_of_skipped_step = window_sums_.count == 0;
  m.lr = stats_.lr;
  m.grad_norm = m.loss_of_skipped_step ? skipped_grad_norm_ : stats_.grad_norm;
  m.tokens_per_s = tokens_per_step_ * double(window_steps_) / window_seconds_;
  m.gflops = training_flops_per_token_ * m.tokens_per_s / 1e9;
  m.mfu = peak_.mfu(m.gflops, ranks_, m.mfu_note);  // the whole job's rate over every rank's peak
  m.eta_s = total_seconds_ / double(end.number - first_step_) * double(cfg_.train.steps - end.number);
  m.tokens_seen = long(end.position.tokens_seen);
  m.skipped_steps = long(guard_.total_skipped());
  log_.train_step(m);
  window_sums_ = {};
  window_seconds_ = 0;
  window_steps_ = 0;
}

// ---- EvalComponent ----

template <typename T>
EvalComponent<T>::EvalComponent(const RunConfig& cfg, RunModel<T>& run, std::unique_ptr<BatchSource> source,
                                MetricsLog& log)
    : cfg_(cfg), run_(run), source_(std::move(source)), log_(log) {}

template <typename T>
void EvalComponent<T>::on_step_end(StepEnd& end) {
  if (!due(end)) return;
  const double loss = held_out_loss();
  char msg[160];
  std::snprintf(msg, sizeof msg, "eval  step %6lld | %s loss %.4f | bits/tok %.4f", (long long)end.number,
                cfg_.data.eval_split.c_str(), loss, loss / std::log(2.0));
  log_.event("eval", {{"step", double(end.number)}, {"loss", loss}, {"bits_per_token", loss / std::log(2.0)}}, msg);
}

// Mean loss over the held-out batches (model.md §8: state carried across them; with data
// parallelism the mean over every rank's streams, model.md §10b), or over every document of the
// eval split, streamed through once (launch/eval/evaluator.h).
template <typename T>
double EvalComponent<T>::held_out_loss() {
  core::Model<T>& model = run_.model();
  core::DataParallel<T>* dp = run_.data_parallel();
  const auto saved = model.snapshot_carried_state();
  core::LossSums total;
  if (cfg_.data.source == "shards" && cfg_.train.eval_batches == 0) {
    EvalOptions options;
    options.data_rank = run_.data_rank();
    options.data_size = run_.data_size();
    options.cp = &run_.cp();
    if (dp != nullptr && dp->size() > 1) options.reduce = [dp](std::vector<double>& v) { dp->group().all_reduce(v); };
    const EvalReport r = evaluate_split(model, cfg_, cfg_.data.eval_split, options);
    total = {r.nats, r.tokens};
  } else {
    data::Batch batch;
    const int64_t batches = cfg_.train.eval_batches > 0 ? cfg_.train.eval_batches : 8;
    for (int64_t i = 0; i < batches; ++i) {
      source_->next(batch);  // this rank's chunk under context parallelism (the trainer's source)
      const core::LossSums s = model.forward({batch.inputs.data(), batch.targets.data(), batch.mask.data(),
                                              batch.doc_start.data()}, T(0));
      total.nats += s.nats;
      total.count += s.count;
    }
    if (dp) total = {dp->global_nats(total.nats), dp->global_count(total.count)};
  }
  model.restore_carried_state(saved);
  return total.count ? total.nats / double(total.count) : 0.0;
}

// ---- StopComponent ----

template <typename T>
void StopComponent<T>::on_step_end(StepEnd& end) {
  core::DataParallel<T>* dp = run_.data_parallel();
  end.stopping = dp ? dp->any(StopSignal::requested()) : StopSignal::requested();
}

template class EvalComponent<float>;
template class EvalComponent<double>;
template class StopComponent<float>;
template class StopComponent<double>;
template class CheckpointComponent<float>;
template class CheckpointComponent<double>;

}  // namespace brt::launch
