#include "launch/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>
#include <type_traits>

#include "core/flops.h"
#include "core/model.h"
#include "core/optimizer.h"
#include "core/param_count.h"
#include "data/output_file.h"
#include "kernels/backend.h"
#include "launch/batch_source.h"
#include "launch/data_parallel.h"
#include "launch/device_backend.h"
#include "launch/evaluator.h"
#include "launch/metrics_log.h"
#include "launch/mfu.h"
#include "launch/run_checkpoints.h"
#include "launch/step_guard.h"
#include "launch/step_graphs.h"
#include "launch/stop_signal.h"
#include "launch/training_checkpoint.h"
#include "parallel/core_share.h"
#include "parallel/mpi_communicator.h"
#include "parallel/process_groups.h"

namespace brt::launch {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f GiB", double(bytes) / double(1ull << 30));
  return buf;
}

std::unique_ptr<BatchSource> make_source(const RunConfig& cfg, const std::string& split,
                                         int dp_rank, int dp_size) {
  if (cfg.data.source == "synthetic") {
    // A different seed for the held-out stream, so evaluation sees unseen documents.
    const uint64_t seed = uint64_t(cfg.train.seed) * 2654435761ull + (split == "train" ? 0 : 17);
    return std::make_unique<SyntheticMarkovSource>(cfg.model.vocab, cfg.train.batch,
                                                   cfg.model.seq_len, seed, dp_rank * cfg.train.batch);
  }
  return make_shard_source(cfg, split, dp_rank, dp_size);
}

// Fault injection (launch/fault_injection.h, nonfinite@step=N): the step's loss and one
// gradient element become NaN, as a real overflow would make them.
template <typename T>
void poison_step(core::Model<T>& model, core::LossSums& sums) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  model.memory().from_host(model.params().grads(), &nan, sizeof(T));
  sums.nats = std::numeric_limits<double>::quiet_NaN();
}

// The resolved config beside the metrics (runs/x/metrics.jsonl -> runs/x/metrics.config.toml),
// what `brt-dist config show` prints: a run's curves always come with what made them.
void write_resolved_config(const RunConfig& cfg) {
  std::string path = cfg.log.metrics_path;
  if (path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0) path.resize(path.size() - 6);
  path += ".config.toml";
  data::write_file_atomically(path, render_toml(cfg));  // checked, errno named (data/output_file.h)
}

template <typename T>
core::ModelInput model_input(const data::Batch& b) {
  return {b.inputs.data(), b.targets.data(), b.mask.data(), b.doc_start.data()};
}

// Mean loss over `batches` held-out batches, carrying state across them (MODEL §8). The
// model's carried training state is saved and restored around it. With data parallelism the
// mean is over every rank's streams (MODEL §10b).
template <typename T>
double evaluate(core::Model<T>& model, BatchSource& source, int64_t batches, DataParallel<T>* dp) {
  const auto saved = model.snapshot_carried_state();
  data::Batch batch;
  core::LossSums total;
  for (int64_t i = 0; i < batches; ++i) {
    source.next(batch);
    const core::LossSums s = model.forward(model_input<T>(batch), T(0));
    total.nats += s.nats;
    total.count += s.count;
  }
  model.restore_carried_state(saved);
  if (dp) total = {dp->global_nats(total.nats), dp->global_count(total.count)};
  return total.count ? total.nats / double(total.count) : 0.0;
}

// Mean loss over every document of the eval split (evaluator.h), on all data-parallel ranks;
// the carried training state is saved and restored around it.
template <typename T>
double evaluate_whole_split(core::Model<T>& model, const RunConfig& cfg, DataParallel<T>* dp) {
  const auto saved = model.snapshot_carried_state();
  SumReducer reduce;
  if (dp != nullptr && dp->size() > 1)
    reduce = [dp](std::vector<double>& v) { dp->group().all_reduce(v); };
  EvalOptions options;
  options.dp_rank = dp ? dp->rank() : 0;
  options.dp_size = dp ? dp->size() : 1;
  options.reduce = reduce;
  const EvalReport r = evaluate_split(model, cfg, cfg.data.eval_split, options);
  model.restore_carried_state(saved);
  return r.tokens ? r.nats / double(r.tokens) : 0.0;
}

// One step's forward and backward through the CUDA graphs (launch/step_graphs.h); reports each
// new graph, and once, a capture that failed (the run goes on without graphs).
// With DP > 1 (train.overlap=false: the hooks do nothing) the buckets are reduced after it.
void run_graph_step(core::Model<float>& model, StepGraphs& graphs, const data::Batch& batch,
                    float grad_scale, DataParallel<float>* dp, core::LossSums& sums, MetricsLog& log) {
  const int graphs_before = graphs.stats().graphs;
  const bool failed_before = !graphs.failure().empty();
  model.stage_step(model_input<float>(batch));
  if (dp) dp->begin_backward();
  graphs.run(grad_scale);
  if (dp) dp->end_backward();  // gradients summed over DP ranks, after the graph's backward
  sums.nats = model.step_nats();
  const StepGraphStats& s = graphs.stats();
  if (s.graphs != graphs_before)
    log.event("cuda_graph", {{"graphs", double(s.graphs)}, {"kernels", double(s.graph_kernels)},
                             {"copies", double(s.graph_copies)}, {"fills", double(s.graph_fills)},
                             {"other", double(s.graph_other)}},
              "cuda graph: " + graphs.describe());
  if (!failed_before && !graphs.failure().empty())
    log.event("warning", {}, "warning: " + graphs.failure());
}

template <typename T>
TrainResult train_with(const TrainOptions& options) {
  const RunConfig& cfg = options.config;
  const bool print = !options.quiet && (!options.groups || options.groups->world_rank() == 0);
  const std::string threads_line =
      apply_threads(options.threads.threads > 0 ? options.threads
                                                : choose_threads(cfg.train.threads, parallel::query_core_share(MPI_COMM_NULL)));
  const int world_rank = options.groups ? options.groups->world_rank() : 0;
  validate_device_settings(cfg.train, options.gpu_device, world_rank);
  // The backend decides where every buffer lives (host or device memory, docs/gpu.md).
  auto backend = make_run_backend<T>(cfg.train, options.gpu_device, cfg.model, cfg.train.batch);
  const bool on_gpu = cfg.train.device == "cuda";
  // Tensor parallelism (docs/parallelism.md): the tp group splits heads, hidden units and the
  // vocabulary; every rank of a TP group reads the same streams (its DP rank's). On the GPU its
  // collectives run on an NCCL communicator over the same ranks, ordered on the backend's
  // stream (core/tensor_parallel.h).
  std::unique_ptr<parallel::Communicator> device_tp;  // NCCL over the tp group (cuda, TP > 1)
  const core::TensorParallel tp =
      options.groups ? make_run_tensor_parallel(options.groups->tp(), *backend, device_tp)
                     : core::TensorParallel();
  core::Model<T> model(cfg.model, cfg.train.batch, *backend, tp);
  model.params().initialize(uint64_t(cfg.train.seed));
  const core::ModelConfig& mc = model.config();

  // The parameter count must equal MODEL §9's shapes, counted independently (full logical
  // shapes: under TP each rank stores only its slices).
  int64_t declared = 0;
  for (const auto& p : model.params().params()) declared += p.spec.global_numel();
  const int64_t expected = core::count_parameters(mc);
  if (declared != expected)
    throw std::logic_error("model declares " + std::to_string(declared) +
                           " parameters but MODEL §9 shapes give " + std::to_string(expected));
  // ---- data parallelism (launch/data_parallel.h): DP = the dp group; null = one process ----
  std::unique_ptr<DataParallel<T>> dp;
  CheckpointRanks ck_ranks;
  std::unique_ptr<parallel::Communicator> device_dp;  // NCCL over the dp group (cuda, DP > 1)
  if (options.groups) {
    const auto* mpi_dp = dynamic_cast<const parallel::MpiCommunicator*>(&options.groups->dp());
    if (mpi_dp == nullptr) throw std::logic_error("checkpoints need the MPI backend's dp group");
    if (on_gpu && options.groups->dp().size() > 1) device_dp = make_device_group(mpi_dp->mpi_comm(), "dp", mpi_dp->options());
    // Gradient buckets run on NCCL's stream after the backend's kernels that produced them;
    // under TP on the backend's stream itself, so a rank's DP and TP collectives keep one
    // program order (two NCCL communicators unordered on one GPU can deadlock across ranks).
    parallel::Stream grads_stream = backend_stream(*backend);
    grads_stream.overlap = options.groups->tp().size() == 1;
    dp = std::make_unique<DataParallel<T>>(
        options.groups->dp(), model, DpSettings{cfg.train.overlap, cfg.train.bucket_mb, cfg.train.zero == 1},
        device_dp.get(), device_dp ? grads_stream : parallel::Stream{});
    ck_ranks = {mpi_dp->mpi_comm(), dp->rank(), dp->size(), options.groups->layout().world,
                options.groups->layout().tp, dp->partition().owner, tp};
  }
  // Host waits on the GPU check the NCCL collectives' errors and deadline (no hang on a dead peer).
  const DeviceWaitWatch device_waits(*backend, {device_tp.get(), device_dp.get()});
  const int dp_size = dp ? dp->size() : 1, dp_rank = dp ? dp->rank() : 0;
  // The optimizer runs where the parameters live (fused CUDA kernels on the GPU).
  const auto optimizer_kernels = make_run_optimizer_kernels(*backend);
  auto optimizer = core::make_optimizer(cfg.optim, model.params(), dp ? dp->owned_mask() : std::vector<bool>{},
                                        optimizer_kernels.get());
  // The global gradient norm for clipping, Adafactor's RMS and its factored sums along a split
  // axis: sharded parameters' partial sums summed over TP (each shard once), replicated ones
  // counted once (MODEL §10c).
  core::TensorParallelStatReducer<T> tp_reducer(model.params(), tp);
  if (tp.active()) optimizer->set_reducer(&tp_reducer);
  const DpMemoryReport mem = rank_memory_report(model, *optimizer, dp ? dp->owned_mask() : std::vector<bool>{});
  const int64_t optim_bytes = mem.optimizer;
  // ---- end data parallelism ----

  // CUDA graphs (launch/step_graphs.h): a step's forward and backward replayed from a graph.
  std::unique_ptr<StepGraphs> graphs;
  std::string graph_line;
  if constexpr (std::is_same_v<T, float>) {
    if (on_gpu) {
      const std::string why = cfg.train.cuda_graph ? step_capture_obstacle(cfg.train, dp_size, tp.size())
                                                   : "train.cuda_graph=false";
      if (why.empty()) graphs = std::make_unique<StepGraphs>(model, *backend);
      graph_line = why.empty() ? "; CUDA graphs on (one per reset pattern, from a pattern's second step)"
                               : "; CUDA graphs off (" + why + ")";
    }
  }
  MfuPeak peak(cfg.train.peak_gflops, on_gpu);
  const core::FlopBreakdown flops = core::flops_per_token(mc);
  const double tokens_per_step = double(cfg.train.batch) * dp_size * mc.seq_len;
  if (print) {
    std::printf("brt-dist train: %s, %d layers, D %d, H %d x %d, F %d, V %d, N %d, W %d, S %d\n",
                mc.variant.c_str(), mc.layers, mc.d_model, mc.heads, mc.head_dim, mc.d_ff,
                mc.vocab, mc.seq_len, mc.window, mc.state_size);
    std::printf("parameters: %lld (%.2fM; non-embedding %.2fM; matches MODEL §9 shapes)\n",
                (long long)declared, declared / 1e6,
                core::count_non_embedding_parameters(mc) / 1e6);
    std::printf("memory per rank (rank 0; checked against the allocation): parameters %s, "
                "gradients %s, optimizer %s%s, activations %s, backward scratch %s, carried state %s, "
                "total %s\n",
                gib(mem.parameters).c_str(), gib(mem.gradients).c_str(), gib(optim_bytes).c_str(),
                dp && !dp->owned_mask().empty() ? " (ZeRO-1 shard)" : "",
                gib(mem.activations).c_str(), gib(mem.backward_scratch).c_str(),
                gib(mem.carried_state).c_str(), gib(mem.total()).c_str());
    if (tp.active())
      std::printf("tensor parallel: %d ranks per replica; each holds H/TP = %d heads, F/TP = %d "
                  "hidden units, V/TP = %d embedding rows\n", tp.size(), mc.heads / tp.size(),
                  mc.d_ff / tp.size(), mc.vocab / tp.size());
    if (dp)
      std::printf("data parallel: %d ranks x %d streams = %d global streams; %d gradient buckets "
                  "of <= %.2f MiB, %s; ZeRO-1 %s\n", dp_size, cfg.train.batch,
                  dp_size * cfg.train.batch, dp->buckets(), cfg.train.bucket_mb,
                  cfg.train.overlap ? "overlapped with backward" : "reduced after backward",
                  dp->owned_mask().empty() ? "off" : "on");
    std::printf("FLOPs/token (MODEL §10, training = 3x forward): %.4g; peak %.1f GFLOP/s per rank "
                "(%s); MFU = achieved / (ranks x peak)\n",
                flops.training(), peak.gflops(), peak.source().c_str());
    std::printf("data: %d streams x %d tokens per step, %s; %lld steps, %s, %s precision\n",
                cfg.train.batch, mc.seq_len, cfg.data.source.c_str(),
                (long long)cfg.train.steps, core::to_string(cfg.optim.kind),
                cfg.train.precision.c_str());
    std::printf("%s\n", threads_line.c_str());
    std::printf("device: %s (%s backend, memory %s)%s%s\n", cfg.train.device.c_str(), backend->name(),
                backend->memory().name().c_str(),
                cfg.train.deterministic ? "; deterministic: NCCL_ALGO/NCCL_PROTO pinned" : "",
                graph_line.c_str());
    std::fflush(stdout);
  }

  // This rank's streams: global streams [dp_rank*B, (dp_rank+1)*B) (MODEL §8).
  auto train_source = make_source(cfg, cfg.data.train_split, dp_rank, dp_size);
  std::unique_ptr<BatchSource> eval_source;
  if (cfg.train.eval_every > 0) eval_source = make_source(cfg, cfg.data.eval_split, dp_rank, dp_size);
  MetricsLog log(print ? cfg.log.metrics_path : std::string(), print);
  if (print && !cfg.log.metrics_path.empty()) write_resolved_config(cfg);
  StopSignal::install();

  // Where the run starts (launch/resume.h): the newest good checkpoint, a given one, or step 0.
  const std::string tokenizer_hash = train_source->tokenizer_hash();
  RunCheckpoints<T> checkpoints(cfg, ck_ranks, options.groups ? &options.groups->world() : nullptr,
                                options.monitor, options.faults, world_rank, print);
  StepGuard guard({cfg.train.max_skipped_steps, cfg.train.skip_loss_z, cfg.train.skip_grad_z});
  RunPosition pos;
  if (!cfg.checkpoint.dir.empty()) pos = checkpoints.start(model, *optimizer, *train_source, tokenizer_hash, guard);
  // checkpoint.init_from: a fresh start's weights (a resumed run has its own, and keeps them).
  if (!checkpoints.resumed() && !cfg.checkpoint.init_from.empty()) {
    checkpoints.init_weights(model, cfg.checkpoint.init_from, tokenizer_hash);
    // train.steps=0: the step-0 checkpoint of these weights, a full file that resumes.
    if (cfg.train.steps == 0 && !cfg.checkpoint.dir.empty())
      checkpoints.save(model, *optimizer, *train_source, pos, tokenizer_hash, guard, log, true);
  }

  TrainResult result;
  data::Batch batch;
  core::LossSums window_sums;
  double skipped_loss = 0;  // the last skipped step's loss: a window of only skipped steps shows it
  double window_seconds = 0, total_seconds = 0;
  int64_t window_steps = 0;
  int64_t first_step = pos.step;
  core::StepStats st;
  for (int64_t step = first_step; step < cfg.train.steps; ++step) {
    const int64_t number = step + 1;  // as the progress lines count
    options.faults.at_step(number, world_rank);
    const auto t0 = Clock::now();
    train_source->next(batch);
    const bool skip_batch = guard.skips_batch(number);  // rolled back past it (train.rollback)
    if (guard.take_reset()) std::fill(batch.doc_start.begin(), batch.doc_start.end(), uint8_t(1));
    StepVerdict verdict = StepVerdict::kApply;
    core::LossSums sums;
    if (skip_batch) {
      guard.note_skipped_batch();
      skipped_loss = std::numeric_limits<double>::quiet_NaN();  // its loss was never computed
      guard.request_reset();  // the next segment does not follow this one's state
      log.event("skip", {{"step", double(number)}, {"skipped_steps", double(guard.total_skipped())}},
                "skip  step " + std::to_string(number) + ": its batch is skipped (rolled back past it)");
    } else {
      int64_t local_count = 0;
      for (uint8_t m : batch.mask) local_count += m;
      // MODEL §10b: the mean over the GLOBAL batch's unmasked targets.
      const int64_t count = dp ? dp->global_count(local_count) : local_count;
      const T spike = options.faults.grad_spike_at(number) ? T(1000) : T(1);
      model.params().zero_grads();
      const T grad_scale = count ? spike / T(count) : T(0);
      if (graphs) {
        if constexpr (std::is_same_v<T, float>)
          run_graph_step(model, *graphs, batch, grad_scale, dp.get(), sums, log);
      } else {
        sums = model.forward(model_input<T>(batch), grad_scale);
        if (dp) dp->begin_backward();
        model.backward();
        if (dp) dp->end_backward();  // gradients summed over DP ranks
      }
      if (options.faults.nonfinite_at(number)) poison_step(model, sums);
      if (dp) sums = {dp->global_nats(sums.nats), count};
      sums.count = count;
      const double loss = count ? sums.nats / double(count) : 0.0;
      // The guard looks at the global loss and gradient norm before any update (step_guard.h).
      const double grad_norm = optimizer->grad_norm();
      verdict = guard.judge(number, loss, grad_norm);
      if (verdict == StepVerdict::kApply) {
        st = optimizer->apply(grad_norm);
        if (dp) dp->after_update();  // ZeRO-1: parameters from their owners
        result.losses.push_back(loss);
        result.last_loss = loss;
        window_sums.nats += sums.nats;
        window_sums.count += sums.count;
      } else {
        skipped_loss = loss;
        char msg[256];
        std::snprintf(msg, sizeof msg, "skip  step %lld: %s (loss %.4g, gradient norm %.4g); no update, %d in a row",
                      (long long)number, verdict_reason(verdict), loss, grad_norm, guard.consecutive_skips());
        log.event("skip", {{"step", double(number)}, {"loss", loss}, {"grad_norm", grad_norm},
                           {"skipped_steps", double(guard.total_skipped())}}, msg);
      }
    }
    backend->memory().synchronize();  // a GPU step's time includes its queued kernels
    const double dt = seconds_since(t0);
    result.steps_done = number;
    pos.step = number;
    pos.tokens_seen += int64_t(tokens_per_step);
    window_seconds += dt;
    total_seconds += dt;
    ++window_steps;
    if (guard.exhausted()) {
      const auto& run = guard.recent_skips();
      const std::string why = std::to_string(run.size()) + " consecutive steps skipped (steps " +
                              std::to_string(run.front()) + ".." + std::to_string(run.back()) + ", last: " +
                              verdict_reason(verdict) + "; train.max_skipped_steps = " +
                              std::to_string(cfg.train.max_skipped_steps) + ")";
      checkpoints.give_up(log);  // the checkpoints not yet confirmed may hold the diverged weights
      if (!cfg.train.rollback)
        throw std::runtime_error(why + "; the run stops. " +
                                 (checkpoints.last_good() ? "The last good checkpoint, " + checkpoints.last_good()->string() +
                                                                ", is intact. "
                                                          : std::string()) +
                                 "Lower optim.lr, check the data, or set train.rollback=true");
      if (guard.rollbacks() >= cfg.train.max_rollbacks)
        throw std::runtime_error(why + " after " + std::to_string(guard.rollbacks()) +
                                 " rollbacks (train.max_rollbacks); the run stops");
      const std::vector<int64_t> bad = run;
      const int rollbacks = guard.rollbacks();
      pos = checkpoints.reload(model, *optimizer, *train_source, tokenizer_hash, guard, why);
      guard.add_skip_batches(bad);  // on top of the checkpoint's own list
      while (guard.rollbacks() <= rollbacks) guard.note_rollback();
      log.event("rollback", {{"step", double(pos.step)}, {"rollbacks", double(guard.rollbacks())}},
                why + "; rolled back to step " + std::to_string(pos.step) + ", its batches will be skipped");
      step = pos.step - 1;  // the loop's ++step continues at pos.step
      first_step = pos.step;
      total_seconds = 0;
      continue;
    }
    const bool last = number == cfg.train.steps;
    if (cfg.log.every > 0 && (number % cfg.log.every == 0 || last || step == first_step)) {
      StepMetrics m;
      m.step = number;
      m.total_steps = cfg.train.steps;
      m.loss = window_sums.count ? window_sums.nats / double(window_sums.count) : skipped_loss;
      m.loss_of_skipped_step = window_sums.count == 0;
      m.lr = st.lr;
      m.grad_norm = st.grad_norm;
      m.tokens_per_s = tokens_per_step * window_steps / window_seconds;
      m.gflops = flops.training() * m.tokens_per_s / 1e9;
      m.mfu = peak.mfu(m.gflops, dp_size, m.mfu_note);  // the whole job's rate over every rank's peak
      m.eta_s = total_seconds / double(number - first_step) * double(cfg.train.steps - number);
      m.tokens_seen = long(pos.tokens_seen);
      m.skipped_steps = long(guard.total_skipped());
      log.train_step(m);
      window_sums = {};
      window_seconds = 0;
      window_steps = 0;
    }
    if (eval_source && number % cfg.train.eval_every == 0) {
      double eval_loss = 0;
      if (cfg.data.source == "shards" && cfg.train.eval_batches == 0) {
        // The whole held-out split, every document streamed through once (MODEL §8).
        eval_loss = evaluate_whole_split(model, cfg, dp.get());
      } else {
        const int64_t n = cfg.train.eval_batches > 0 ? cfg.train.eval_batches : 8;
        eval_loss = evaluate(model, *eval_source, n, dp.get());
      }
      char msg[160];
      std::snprintf(msg, sizeof msg, "eval  step %6lld | %s loss %.4f | bits/tok %.4f", (long long)number,
                    cfg.data.eval_split.c_str(), eval_loss, eval_loss / std::log(2.0));
      log.event("eval", {{"step", double(number)}, {"loss", eval_loss},
                         {"bits_per_token", eval_loss / std::log(2.0)}}, msg);
    }
    const bool stopping = dp ? dp->any(StopSignal::requested()) : StopSignal::requested();
    checkpoints.after_step(model, *optimizer, *train_source, pos, tokenizer_hash, guard, log,
                           !skip_batch && verdict == StepVerdict::kApply, last, stopping);
    if (stopping) {
      result.stopped_by_signal = true;
      if (print)
        std::printf("stopping cleanly after step %lld (signal %d)\n", (long long)number,
                    StopSignal::signal_number());
      break;
    }
  }
  result.skipped_steps = guard.total_skipped();
  if (graphs) result.graph_steps = graphs->stats().captured_steps + graphs->stats().replayed_steps;
  return result;
}

}  // namespace

TrainResult run_training(const TrainOptions& options) {
  // fp64 is the CPU reference build; fp32 and bf16 (cuda: bf16 matrix products) train in float
  // with fp32 master weights. validate_device_settings rejects the other combinations.
  if (options.config.train.precision == "fp64") return train_with<double>(options);
  return train_with<float>(options);
}

}  // namespace brt::launch
