#include "launch/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "core/param_count.h"
#include "data/output_file.h"
#include "launch/feed/context_chunk.h"
#include "launch/process/stop_signal.h"
#include "launch/train/run_identity.h"
#include "parallel/cpu_share.h"
#include "parallel/health/job_monitor.h"
#include "parallel/mpi/mpi_communicator.h"
#include "parallel/process_groups.h"

namespace brt::launch {

namespace {

using Clock = std::chrono::steady_clock;

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f GiB", double(bytes) / double(1ull << 30));
  return buf;
}

// This rank's streams of `split`: global streams [data_rank*B, (data_rank+1)*B) (model.md §8).
// `training`: the streams trained on, the only ones data.tasks mixes task documents into; with
// gradient accumulation B = train.batch x train.grad_accum, every micro-step's groups
// (launch/train/grad_accum.h), the streams of a run with that train.batch.
std::unique_ptr<BatchSource> segment_source(const RunConfig& cfg, const std::string& split, int data_rank,
                                            int data_size, bool training) {
  const int streams = cfg.train.batch * (training ? cfg.train.grad_accum : 1);
  if (cfg.data.tasks_kinds == "mqar") return make_mqar_source(cfg, split, data_rank * streams, streams);
  if (cfg.data.source == "synthetic") {
    // A different seed for the held-out stream, so evaluation sees unseen documents.
    const uint64_t seed = uint64_t(cfg.train.seed) * 2654435761ull + (split == "train" ? 0 : 17);
    return std::make_unique<SyntheticMarkovSource>(cfg.model.vocab, streams, cfg.model.seq_len, seed,
                                                   data_rank * streams);
  }
  return make_shard_source(cfg, split, data_rank, data_size, training, streams);
}

// What this rank trains or evaluates on, built once for the run: its data rank's segments of
// `split`, and under context parallelism this rank's chunk of each (launch/feed/context_chunk.h).
template <typename T>
std::unique_ptr<BatchSource> make_source(const RunConfig& cfg, const RunModel<T>& run, const std::string& split,
                                         bool training) {
  return context_chunks(segment_source(cfg, split, run.data_rank(), run.data_size(), training), run.cp().rank(),
                        run.cp().size());
}

// The resolved config beside the metrics (runs/x/metrics.jsonl -> runs/x/metrics.config.toml),
// what `brt-dist config show` prints: a run's curves always come with what made them.
void write_resolved_config(const RunConfig& cfg) {
  const std::string path = config_path_beside(cfg.log.metrics_path);
  data::write_file_atomically(path, render_toml(cfg));  // checked, errno named (data/output_file.h)
}

// The layout checkpoints are saved from and loaded into (launch/train/checkpoint/training_checkpoint.h).
template <typename T>
CheckpointRanks checkpoint_ranks(const RunModel<T>& run, const TrainOptions& options) {
  const parallel::ProcessGroups* groups = options.groups;
  if (groups == nullptr || run.data_parallel() == nullptr) {
    CheckpointRanks one;
    one.numerics = options.numerics_record;
    return one;
  }
  const auto& mpi_dp_cp = dynamic_cast<const parallel::MpiCommunicator&>(groups->dp_cp());  // RunModel checked it
  CheckpointRanks ranks;
  ranks.comm = mpi_dp_cp.mpi_comm();
  ranks.dp_cp_rank = run.dp_cp_rank();
  ranks.dp_cp_size = run.dp_cp_size();
  ranks.world = groups->layout().world;
  ranks.tp = groups->layout().tp;
  ranks.param_owner = run.data_parallel()->partition().owner;
  ranks.tensor_parallel = run.tp();
  ranks.cp_rank = groups->cp_rank();
  ranks.cp_size = groups->layout().cp;
  ranks.numerics = options.numerics_record;
  return ranks;
}

// The tensor-, context- and data-parallel lines of the start-up report.
template <typename T>
void print_parallel_layout(const RunModel<T>& run, const RunConfig& cfg) {
  const core::ModelConfig& mc = run.model().config();
  const core::DataParallel<T>* dp = run.data_parallel();
  const int tp = run.tp().size(), cp = run.cp().size();
  const int streams = cfg.train.batch * cfg.train.grad_accum;  // every micro-step's (grad_accum.h)
  if (run.tp().active())
    std::printf("tensor parallel: %d ranks per replica; each holds H/TP = %d heads, F/TP = %d hidden units, V/TP = %d "
                "embedding rows\n", tp, mc.heads / tp, mc.d_ff / tp, mc.vocab / tp);
  if (run.cp().active())
    std::printf("context parallel: %d ranks per segment; each runs N/CP = %d tokens (%d blocks) of every stream, "
                "the window halo and S4D state exchanged (docs/parallelism.md)\n",
                cp, run.model().chunk_len(), run.model().chunk_len() / mc.window);
  if (dp)
    std::printf("data parallel: %d ranks x %d streams = %d global streams; gradients summed over %d ranks in %d buckets "
                "of <= %.2f MiB, %s; ZeRO-1 %s\n", run.data_size(), streams, run.data_size() * streams,
                dp->size(), dp->buckets(), cfg.train.bucket_mb,
                cfg.train.overlap ? "overlapped with backward" : "reduced after backward",
                dp->owned_mask().empty() ? "off" : "on");
}

std::string threads_line(const TrainOptions& options) {
  return apply_threads(options.threads.threads > 0
                           ? options.threads
                           : choose_threads(options.config.train.threads, parallel::query_cpu_share(MPI_COMM_NULL)));
}

template <typename T>
core::ModelInput model_input(const data::Batch& b) {
  return {b.inputs.data(), b.targets.data(), b.mask.data(), b.doc_start.data()};
}

// Fault injection (launch/process/fault_injection.h): one gradient element becomes NaN, as a real
// overflow would make it (nonfinite@step=N also makes the step's loss NaN, nangrad@step=N not).
template <typename T>
void poison_gradient(core::Model<T>& model) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  model.memory().from_host(model.params().grads(), &nan, sizeof(T));
}

// One step's forward and backward through the CUDA graphs (launch/train/step_graphs.h); reports
// each new graph, and once, a capture that failed (the run goes on without graphs).
// With DP > 1 (train.overlap=false: the hooks do nothing) the buckets are reduced after it.
double run_graph_step(core::Model<float>& model, StepGraphs& graphs, const data::Batch& batch, float grad_scale,
                      core::DataParallel<float>* dp, MetricsLog& log) {
  const int graphs_before = graphs.stats().graphs;
  const bool failed_before = !graphs.failure().empty();
  model.stage_step(model_input<float>(batch));
  if (dp) dp->begin_backward();
  graphs.run(grad_scale);
  if (dp) dp->end_backward();  // gradients summed over the dp_cp group, after the graph's backward
  const double nats = model.step_nats();
  const StepGraphStats& s = graphs.stats();
  if (s.graphs != graphs_before)
    log.event("cuda_graph", {{"graphs", double(s.graphs)}, {"kernels", double(s.graph_kernels)},
                             {"copies", double(s.graph_copies)}, {"fills", double(s.graph_fills)},
                             {"other", double(s.graph_other)}},
              "cuda graph: " + graphs.describe());
  if (!failed_before && !graphs.failure().empty()) log.event("warning", {}, "warning: " + graphs.failure());
  return nats;
}

}  // namespace

template <typename T>
Trainer<T>::Trainer(const TrainOptions& options)
    : options_(options), cfg_(options.config),
      print_(!options.quiet && (!options.groups || options.groups->world_rank() == 0)),
      world_rank_(options.groups ? options.groups->world_rank() : 0), threads_line_(threads_line(options)),
      run_(cfg_, {options.groups, options.gpu_device}, RunModelOptions::train(cfg_)),
      ck_ranks_(checkpoint_ranks(run_, options)), graph_line_(graphs_setting()),
      peak_(cfg_.train.peak_gflops, run_.on_gpu()), flops_(core::flops_per_token(run_.model().config())),
      tokens_per_step_(double(cfg_.train.batch) * cfg_.train.grad_accum * run_.data_size() *
                       run_.model().config().seq_len),
      guard_({cfg_.train.max_skipped_steps, cfg_.train.skip_loss_z, cfg_.train.skip_grad_z}) {
  stream_groups_ = std::make_unique<StreamGroupState<T>>(run_.model(), cfg_.train.grad_accum);
  if (print_) print_start();
  train_source_ = make_source(cfg_, run_, cfg_.data.train_split, true);
  // The task documents mixed into training, after the start-up lines (docs/data-format.md, "Task documents").
  if (print_ && (cfg_.data.tasks_rate > 0 || cfg_.data.tasks_kinds == "mqar")) std::printf("data: %s\n", train_source_->describe().c_str());
  std::unique_ptr<BatchSource> eval_source;
  if (cfg_.train.eval_every > 0) eval_source = make_source(cfg_, run_, cfg_.data.eval_split, false);
  start();
  open_metrics();
  // train.steps=0 with checkpoint.init_from: the step-0 checkpoint of those weights, a full file that resumes.
  if (!checkpoints_->resumed() && !cfg_.checkpoint.init_from.empty() && cfg_.train.steps == 0 &&
      !cfg_.checkpoint.dir.empty())
    checkpoints_->save(pos_, true);
  // MFU over every rank's peak (model.md §10): data x context x tensor parallel ranks all compute.
  const int ranks = options_.groups ? options_.groups->layout().world : 1;
  components_.push_back(std::make_unique<ProgressComponent>(cfg_, *log_, peak_, flops_, tokens_per_step_, ranks,
                                                            guard_, pos_.step));
  components_.push_back(std::make_unique<EvalComponent<T>>(cfg_, run_, std::move(eval_source), *log_));
  components_.push_back(std::make_unique<StopComponent<T>>(run_));
  components_.push_back(std::make_unique<CheckpointComponent<T>>(*checkpoints_));
}

template <typename T>
Trainer<T>::~Trainer() = default;

// CUDA graphs (launch/train/step_graphs.h): a step's forward and backward replayed from a graph,
// and the optimizer's update with them when it is enqueued (enqueues_update) on one data-parallel
// rank (more all-reduce the gradients after the graph) and no fault poisons a step's gradients
// after its backward (tests/faults: the update would already have run).
template <typename T>
std::string Trainer<T>::graphs_setting() {
  if constexpr (std::is_same_v<T, float>) {
    if (run_.on_gpu()) {
      const std::string why = cfg_.train.cuda_graph ? step_capture_obstacle(cfg_.train, run_.dp_cp_size(), run_.tp().size())
                                                    : "train.cuda_graph=false";
      if (!why.empty()) return "; CUDA graphs off (" + why + ")";
      const bool update = enqueues_update() && run_.dp_cp_size() == 1 && !options_.faults.poisons_steps();
      graphs_ = std::make_unique<StepGraphs>(run_.model(), run_.backend(), 8, update ? &run_.optimizer() : nullptr);
      return update ? "; CUDA graphs on (one per reset pattern, from a pattern's second step; the update inside them)"
                    : "; CUDA graphs on (one per reset pattern, from a pattern's second step)";
    }
  }
  return "";
}

// Where the run starts (launch/train/checkpoint/resume.h): the newest good checkpoint, a given one, or step 0;
// checkpoint.init_from's weights on a fresh start (with train.steps = 0, saved as step 0).
template <typename T>
void Trainer<T>::start() {
  tokenizer_hash_ = train_source_->tokenizer_hash();
  TrainState<T> state{cfg_, run_.model(), run_.optimizer(), *train_source_, guard_, tokenizer_hash_};
  if (stream_groups_->groups() > 1) state.carried = stream_groups_->carried_state();
  const CheckpointJob job{options_.faults, options_.groups ? &options_.groups->world() : nullptr, options_.monitor,
                          world_rank_, print_};
  checkpoints_ = std::make_unique<RunCheckpoints<T>>(std::move(state), ck_ranks_, job);
  if (!cfg_.checkpoint.dir.empty()) pos_ = checkpoints_->start();
  // A resume at or past train.steps trains nothing; say so instead of ending in silence.
  if (checkpoints_->resumed() && pos_.step >= cfg_.train.steps && print_)
    std::printf("nothing to train: the run is at step %lld and train.steps = %lld (raise train.steps to train on)\n",
                (long long)pos_.step, (long long)cfg_.train.steps);
  // checkpoint.init_from: a fresh start's weights (a resumed run has its own, and keeps them).
  if (!checkpoints_->resumed() && !cfg_.checkpoint.init_from.empty()) {
    checkpoints_->init_weights(cfg_.checkpoint.init_from);
  }
}

// The metrics file of this start (launch/train/run_identity.h): a resumed run's own id, else a new
// one, another run's records moved aside first; the resolved config beside it; a "run" record.
template <typename T>
void Trainer<T>::open_metrics() {
  const std::string& path = cfg_.log.metrics_path;
  MetricsRun run;
  if (print_ && !path.empty()) {
    run = settle_metrics_run(path, checkpoints_->resumed(), render_toml(cfg_));
    if (!run.moved_to.empty())
      std::printf("metrics: %s held another run's records: moved to %s (this run: %s)\n", path.c_str(),
                  run.moved_to.c_str(), run.id.c_str());
  }
  log_ = std::make_unique<MetricsLog>(print_ ? path : std::string(), print_, run.id);
  checkpoints_->set_metrics_log(*log_);
  if (!print_ || path.empty()) return;
  write_resolved_config(cfg_);
  log_->event(run.continued ? "resume" : "start", {{"step", double(pos_.step)}},
              "metrics: " + path + ", run " + run.id + (run.continued ? " (resumed)" : ""));
}

template <typename T>
TrainResult Trainer<T>::train() {
  for (int64_t step = pos_.step; step < cfg_.train.steps; ++step) {
    StepEnd end = run_step(step + 1);
    for (const auto& c : components_) c->on_step(end);
    if (guard_.exhausted()) {
      roll_back(end);
      for (const auto& c : components_) c->on_rollback(pos_);
      step = pos_.step - 1;  // the loop's ++step continues at pos_.step
      continue;
    }
    for (const auto& c : components_) c->on_step_end(end);
    if (end.stopping) {
      result_.stopped_by_signal = true;
      if (print_)
        std::printf("stopping cleanly after step %lld (signal %d)\n", (long long)end.number, StopSignal::signal_number());
      break;
    }
  }
  result_.skipped_steps = guard_.total_skipped();
  if (graphs_) result_.graph_steps = graphs_->stats().captured_steps + graphs_->stats().replayed_steps;
  return result_;
}

// Step `number` with this rank's next batch, timed (a GPU step's time includes its queued kernels).
template <typename T>
StepEnd Trainer<T>::run_step(int64_t number) {
  if (options_.monitor) options_.monitor->note_step(number);  // the heartbeat's step
  options_.faults.at_step(number, world_rank_);
  const auto t0 = Clock::now();
  train_source_->next(batch_);  // this rank's chunk of the segment under context parallelism
  StepEnd end;
  end.number = number;
  end.last = number == cfg_.train.steps;
  end.outcome = step(number, batch_);
  run_.backend().memory().synchronize();
  end.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  result_.steps_done = number;
  pos_.step = number;
  pos_.tokens_seen += int64_t(tokens_per_step_);
  end.position = pos_;
  return end;
}

template <typename T>
StepOutcome Trainer<T>::step(int64_t number, data::Batch& batch) {
  StepOutcome out;
  out.skipped_batch = guard_.skips_batch(number);  // rolled back past it (train.rollback)
  if (guard_.take_reset()) std::fill(batch.doc_start.begin(), batch.doc_start.end(), uint8_t(1));
  if (out.skipped_batch) {
    skip_step(number, out);
    return out;
  }
  int64_t local_count = 0;
  for (uint8_t m : batch.mask) local_count += m;
  // model.md §10b: the mean over the GLOBAL batch's unmasked targets.
  core::DataParallel<T>* dp = run_.data_parallel();
  const int64_t count = dp ? dp->global_count(local_count) : local_count;
  const UpdatePath path = update_path();
  if (path != UpdatePath::kJudged) run_.optimizer().stage_step();  // before the device work: the copy waits for it
  out.sums = forward_backward(number, batch, count);
  out.loss = count ? out.sums.nats / double(count) : 0.0;
  if (!judge_and_update(number, out, path)) {
    skip_step(number, out);
    return out;
  }
  if (dp) dp->after_update();  // ZeRO-1: parameters from their owners
  result_.losses.push_back(out.loss);
  result_.grad_norms.push_back(out.grad_norm);
  result_.last_loss = out.loss;
  return out;
}

// Whether the update is enqueued right behind backward, before the host has seen the gradient
// norm: when no statistic is summed on the host (no reducer, or TP's, which sums on the device)
// and no spike guard needs the norm's judgement first (docs/reliability.md, "The guard and the
// enqueued update").
template <typename T>
bool Trainer<T>::enqueues_update() {
  return run_.optimizer().device_steps() && cfg_.train.skip_loss_z <= 0 && cfg_.train.skip_grad_z <= 0;
}

template <typename T>
typename Trainer<T>::UpdatePath Trainer<T>::update_path() {
  if constexpr (std::is_same_v<T, float>)
    if (graphs_ && graphs_->updates()) return UpdatePath::kInGraph;
  return enqueues_update() ? UpdatePath::kEnqueue : UpdatePath::kJudged;
}

// The guard's verdict on the global loss and gradient norm, and the update if it applies; returns
// whether it did. On the judged path the guard sees them before any update (step_guard.h). On
// the others the device has already made the one decision left to it: a non-finite norm (or,
// inside the step's graph, a non-finite loss) made the update write nothing. With the spike
// guards off the verdict is exactly that one, which the check below holds the two to.
template <typename T>
bool Trainer<T>::judge_and_update(int64_t number, StepOutcome& out, UpdatePath path) {
  core::Optimizer<T>& optimizer = run_.optimizer();
  if (path == UpdatePath::kJudged || (path == UpdatePath::kEnqueue && !std::isfinite(out.loss))) {
    out.grad_norm = optimizer.grad_norm();
    out.verdict = guard_.judge(number, out.loss, out.grad_norm);
    if (out.verdict != StepVerdict::kApply) return false;
    out.stats = optimizer.apply(out.grad_norm);
    return true;
  }
  if (path == UpdatePath::kEnqueue) optimizer.enqueue_step();
  out.stats = optimizer.finish_step();
  out.grad_norm = out.stats.grad_norm;
  out.verdict = guard_.judge(number, out.loss, out.grad_norm);
  if ((out.verdict == StepVerdict::kApply) != out.stats.applied)
    throw std::logic_error("step " + std::to_string(number) + ": the step guard (" + verdict_reason(out.verdict) +
                           ") and the enqueued update (" + (out.stats.applied ? "applied" : "skipped") + ") disagree");
  return out.stats.applied;
}

// Forward and backward of `batch`, its loss gradient scaled by 1 / the global target count;
// the gradients summed over the dp_cp group. Returns the global loss sums.
// With train.grad_accum = M the batch's streams run as M micro-steps of train.batch each
// (launch/train/grad_accum.h), every group's carried state swapped in before and out after its
// own. Backward adds into the gradient arena and every micro-step scales its loss gradient by
// the one 1 / (the step's global count), so the arena ends as the gradient of the mean over all
// the step's targets: the big batch's (model.md §10b), up to float rounding of the re-ordered
// sum. DP reduces it once, in the last micro-step's backward.
template <typename T>
core::LossSums Trainer<T>::forward_backward(int64_t number, const data::Batch& batch, int64_t count) {
  core::Model<T>& model = run_.model();
  core::DataParallel<T>* dp = run_.data_parallel();
  const T spike = options_.faults.grad_spike_at(number) ? T(1000) : T(1);
  model.params().zero_grads();
  const T grad_scale = count ? spike / T(count) : T(0);
  core::LossSums sums;
  const int groups = stream_groups_->groups();
  for (int g = 0; g < groups; ++g) {
    if (groups > 1) take_stream_group(batch, g, cfg_.train.batch, micro_);
    stream_groups_->load(g);
    sums.nats += micro_step(groups > 1 ? micro_ : batch, grad_scale, g + 1 == groups);
    stream_groups_->store(g);
  }
  if (options_.faults.nonfinite_at(number) || options_.faults.nan_grad_at(number)) poison_gradient(model);
  if (options_.faults.nonfinite_at(number)) sums.nats = std::numeric_limits<double>::quiet_NaN();
  if (dp) sums = {dp->global_nats(sums.nats), count};
  sums.count = count;
  return sums;
}

// One forward and backward of `batch` (a whole step's, or one micro-step's); `reduce`: the
// step's last, whose backward all-reduces the gradients over DP (earlier ones start nothing).
// Returns its local nats. CUDA graphs run only without accumulation (step_capture_obstacle).
template <typename T>
double Trainer<T>::micro_step(const data::Batch& batch, T grad_scale, bool reduce) {
  core::Model<T>& model = run_.model();
  core::DataParallel<T>* dp = run_.data_parallel();
  if constexpr (std::is_same_v<T, float>)
    if (graphs_) return run_graph_step(model, *graphs_, batch, grad_scale, dp, *log_);
  const double nats = model.forward(model_input<T>(batch), grad_scale).nats;
  if (dp && reduce) dp->begin_backward();
  if (dp && !reduce) dp->begin_partial_backward();
  model.backward();
  if (dp && reduce) dp->end_backward();  // gradients summed over the dp_cp group
  return nats;
}

// A step with no update: its batch rolled back past (skipped whole), or the guard's verdict.
template <typename T>
void Trainer<T>::skip_step(int64_t number, StepOutcome& out) {
  if (out.skipped_batch) {
    guard_.note_skipped_batch();
    out.loss = std::numeric_limits<double>::quiet_NaN();  // its loss and gradient were never computed
    out.grad_norm = std::numeric_limits<double>::quiet_NaN();
    guard_.request_reset();  // the next segment does not follow this one's state
    log_->event("skip", {{"step", double(number)}, {"skipped_steps", double(guard_.total_skipped())}},
                "skip  step " + std::to_string(number) + ": its batch is skipped (rolled back past it)");
    return;
  }
  char msg[256];
  std::snprintf(msg, sizeof msg, "skip  step %lld: %s (loss %.4g, gradient norm %.4g); no update, %d in a row",
                (long long)number, verdict_reason(out.verdict), out.loss, out.grad_norm, guard_.consecutive_skips());
  log_->event("skip", {{"step", double(number)}, {"loss", out.loss}, {"grad_norm", out.grad_norm},
                       {"skipped_steps", double(guard_.total_skipped())}}, msg);
}

// The step guard gave up after train.max_skipped_steps skips in a row: the run stops, or
// (train.rollback) reloads its last good checkpoint and skips the batches of those steps.
template <typename T>
void Trainer<T>::roll_back(const StepEnd& end) {
  const auto& run = guard_.recent_skips();
  const std::string why = std::to_string(run.size()) + " consecutive steps skipped (steps " +
                          std::to_string(run.front()) + ".." + std::to_string(run.back()) + ", last: " +
                          verdict_reason(end.outcome.verdict) + "; train.max_skipped_steps = " +
                          std::to_string(cfg_.train.max_skipped_steps) + ")";
  checkpoints_->give_up();  // the checkpoints not yet confirmed may hold the diverged weights
  if (!cfg_.train.rollback)
    throw std::runtime_error(why + "; the run stops. " +
                             (checkpoints_->last_good()
                                  ? "The last good checkpoint, " + checkpoints_->last_good()->string() + ", is intact. "
                                  : std::string()) +
                             "Lower optim.lr, check the data, or set train.rollback=true");
  if (guard_.rollbacks() >= cfg_.train.max_rollbacks)
    throw std::runtime_error(why + " after " + std::to_string(guard_.rollbacks()) +
                             " rollbacks (train.max_rollbacks); the run stops");
  const std::vector<int64_t> bad = run;
  const int rollbacks = guard_.rollbacks();
  pos_ = checkpoints_->reload(why);
  guard_.add_skip_batches(bad);  // on top of the checkpoint's own list
  while (guard_.rollbacks() <= rollbacks) guard_.note_rollback();
  log_->event("rollback", {{"step", double(pos_.step)}, {"rollbacks", double(guard_.rollbacks())}},
              why + "; rolled back to step " + std::to_string(pos_.step) + ", its batches will be skipped");
}

// The start-up lines: the model, its parameters and memory, the layout, FLOPs and peak, data,
// threads and device.
template <typename T>
void Trainer<T>::print_start() {
  for (const std::string& warning : config_warnings(cfg_)) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  const core::ModelConfig& mc = run_.model().config();
  const core::DpMemoryReport& mem = run_.memory();
  const core::DataParallel<T>* dp = run_.data_parallel();
  std::printf("brt-dist train: %s, %d layers, D %d, H %d x %d, F %d, V %d, N %d, W %d, S %d\n", mc.variant.c_str(),
              mc.layers, mc.d_model, mc.heads, mc.head_dim, mc.d_ff, mc.vocab, mc.seq_len, mc.window, mc.state_size);
  std::printf("parameters: %lld (%.2fM; non-embedding %.2fM; matches model.md §9 shapes)\n", (long long)run_.parameters(),
              run_.parameters() / 1e6, core::count_non_embedding_parameters(mc) / 1e6);
  std::printf("memory per rank (rank 0; checked against the allocation): parameters %s, gradients %s, optimizer %s%s, "
              "activations %s, backward scratch %s, carried state %s, total %s\n",
              gib(mem.parameters).c_str(), gib(mem.gradients).c_str(), gib(mem.optimizer).c_str(),
              dp && !dp->owned_mask().empty() ? " (ZeRO-1 shard)" : "", gib(mem.activations).c_str(),
              gib(mem.backward_scratch).c_str(), gib(mem.carried_state).c_str(), gib(mem.total()).c_str());
  print_parallel_layout(run_, cfg_);
  std::printf("FLOPs/token (model.md §10, training = 3x forward): %.4g; peak %.1f GFLOP/s per rank (%s); MFU = achieved / "
              "(ranks x peak)\n", flops_.training(), peak_.gflops(), peak_.source().c_str());
  // How the update follows backward (docs/reliability.md, "The guard and the enqueued update").
  const char* update = enqueues_update() ? "the update enqueued behind backward"
                       : run_.optimizer().device_steps()
                           ? "the update after the spike guard's judgement (train.skip_loss_z, train.skip_grad_z)"
                           : "the update after the host's sums of its statistics";
  std::printf("data: %d streams x %d tokens per step, %s; %lld steps, %s, %s precision; %s\n",
              cfg_.train.batch * cfg_.train.grad_accum, mc.seq_len,
              cfg_.data.source.c_str(), (long long)cfg_.train.steps, core::to_string(cfg_.optim.kind),
              cfg_.train.precision.c_str(), update);
  if (cfg_.train.grad_accum > 1)
    std::printf("gradient accumulation: %d micro-steps of %d streams per step (train.grad_accum), %d streams per rank "
                "(effective batch %d streams); their carried state %s\n", cfg_.train.grad_accum, cfg_.train.batch,
                cfg_.train.batch * cfg_.train.grad_accum, cfg_.train.batch * cfg_.train.grad_accum * run_.data_size(),
                gib(stream_groups_->bytes()).c_str());
  std::printf("%s\n", threads_line_.c_str());
  std::printf("device: %s (%s backend, memory %s)%s%s\n", cfg_.train.device.c_str(), run_.backend().name(),
              run_.backend().memory().name().c_str(),
              cfg_.train.deterministic ? "; deterministic: NCCL_ALGO/NCCL_PROTO pinned" : "", graph_line_.c_str());
  std::fflush(stdout);
}

template class Trainer<float>;
template class Trainer<double>;

TrainResult run_training(const TrainOptions& options) {
  // fp64 is the CPU reference build; fp32 and bf16 (cuda: bf16 matrix products) train in float
  // with fp32 master weights. validate_device_settings rejects the other combinations.
  if (options.config.train.precision == "fp64") return Trainer<double>(options).train();
  return Trainer<float>(options).train();
}

}  // namespace brt::launch
