#include "launch/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>

#include "core/flops.h"
#include "core/model.h"
#include "core/optimizer.h"
#include "core/param_count.h"
#include "kernels/backend.h"
#include "kernels/gemm_peak.h"
#include "launch/batch_source.h"
#include "launch/data_parallel.h"
#include "launch/device_backend.h"
#include "launch/evaluator.h"
#include "launch/metrics_log.h"
#include "launch/stop_signal.h"
#include "launch/training_checkpoint.h"
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
  const EvalReport r = evaluate_split(model, cfg, cfg.data.eval_split, dp ? dp->rank() : 0,
                                      dp ? dp->size() : 1, reduce);
  model.restore_carried_state(saved);
  return r.tokens ? r.nats / double(r.tokens) : 0.0;
}

// Saves a checkpoint and prints its duration and throughput. A failure (disk full, permission)
// never damages the previous checkpoint; checkpoint.on_error decides whether the run stops.
template <typename T>
void save_checkpoint_now(const RunConfig& cfg, core::Model<T>& model, core::Optimizer<T>& opt,
                         const BatchSource& data, const RunPosition& pos,
                         const std::string& tokenizer_hash, MetricsLog& log,
                         const CheckpointRanks& ranks) {
  try {
    const auto r = save_training_checkpoint(cfg, model, opt, data, pos, tokenizer_hash, ranks);
    char msg[512];
    std::snprintf(msg, sizeof msg, "checkpoint saved: %s (%.3f GB in %.2f s, %.3f GB/s)",
                  r.path.c_str(), r.stats.bytes / 1e9, r.stats.seconds, r.stats.gb_per_s());
    log.event("checkpoint", {{"step", double(pos.step)}, {"seconds", r.stats.seconds},
                             {"gb_per_s", r.stats.gb_per_s()}}, msg);
    for (const auto& w : r.warnings) std::fprintf(stderr, "checkpoint warning: %s\n", w.c_str());
  } catch (const checkpoint::CheckpointError& e) {
    if (cfg.checkpoint.on_error == "continue") {
      std::fprintf(stderr, "checkpoint FAILED at step %lld, training continues "
                   "(checkpoint.on_error=continue): %s\n", (long long)pos.step, e.what());
      return;
    }
    throw std::runtime_error(std::string("checkpoint failed at step ") +
                             std::to_string(pos.step) + " (previous checkpoints are intact; "
                             "set checkpoint.on_error=continue to keep training): " + e.what());
  }
}

template <typename T>
TrainResult train_with(const TrainOptions& options) {
  const RunConfig& cfg = options.config;
  const bool print = !options.quiet && (!options.groups || options.groups->world_rank() == 0);
  if (cfg.train.threads > 0) omp_set_num_threads(cfg.train.threads);
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
    if (on_gpu && options.groups->dp().size() > 1) device_dp = make_device_group(mpi_dp->mpi_comm(), "dp");
    // Gradient buckets run on NCCL's stream after the backend's kernels that produced them.
    parallel::Stream grads_stream = backend_stream(*backend);
    grads_stream.overlap = true;
    dp = std::make_unique<DataParallel<T>>(
        options.groups->dp(), model, DpSettings{cfg.train.overlap, cfg.train.bucket_mb, cfg.train.zero == 1},
        device_dp.get(), device_dp ? grads_stream : parallel::Stream{});
    ck_ranks = {mpi_dp->mpi_comm(), dp->rank(), dp->size(), options.groups->layout().world,
                options.groups->layout().tp, dp->partition().owner, tp};
  }
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

  double peak = cfg.train.peak_gflops;
  std::string peak_source = "train.peak_gflops";
  if (peak <= 0 && on_gpu) {
    // MFU against the bf16 dense matrix peak measured now on this GPU (issue 6).
    peak = measure_gpu_bf16_peak_gflops();
    peak_source = "measured: cuBLAS 8192^3 bf16 GEMM, fp32 accumulation";
  } else if (peak <= 0) {
    const kernels::GemmPeak p = kernels::measure_sgemm_peak(2048, 5);
    peak = p.gflops;
    peak_source = "measured: median of " + std::to_string(p.calls) + " 2048^3 sgemm, " +
                  std::to_string(p.threads) + " threads";
  }
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
                flops.training(), peak, peak_source.c_str());
    std::printf("data: %d streams x %d tokens per step, %s; %lld steps, %s, %s precision\n",
                cfg.train.batch, mc.seq_len, cfg.data.source.c_str(),
                (long long)cfg.train.steps, core::to_string(cfg.optim.kind),
                cfg.train.precision.c_str());
    std::printf("device: %s (%s backend, memory %s)%s\n", cfg.train.device.c_str(), backend->name(),
                backend->memory().name().c_str(),
                cfg.train.deterministic ? "; deterministic: NCCL_ALGO/NCCL_PROTO pinned" : "");
    std::fflush(stdout);
  }

  // This rank's streams: global streams [dp_rank*B, (dp_rank+1)*B) (MODEL §8).
  auto train_source = make_source(cfg, cfg.data.train_split, dp_rank, dp_size);
  std::unique_ptr<BatchSource> eval_source;
  if (cfg.train.eval_every > 0) eval_source = make_source(cfg, cfg.data.eval_split, dp_rank, dp_size);
  MetricsLog log(print ? cfg.log.metrics_path : std::string(), print);
  StopSignal::install();

  // Resume from the newest good checkpoint, if asked and one exists (issue 4).
  RunPosition pos;
  const std::string tokenizer_hash = train_source->tokenizer_hash();
  if (!cfg.checkpoint.dir.empty() && cfg.checkpoint.resume) {
    const auto latest = checkpoint::find_latest_good(cfg.checkpoint.dir);
    if (print)  // every rank verified the same files; one report is enough
      for (const auto& w : latest.warnings) std::fprintf(stderr, "checkpoint warning: %s\n", w.c_str());
    if (latest.path) {
      checkpoint::IoStats io;
      pos = load_training_checkpoint(*latest.path, cfg, model, *optimizer, train_source.get(),
                                     tokenizer_hash, &io, ck_ranks);
      if (print)
        std::printf("resumed from %s at step %lld (%.3f GB in %.2f s, %.3f GB/s)\n",
                    latest.path->c_str(), (long long)pos.step, io.bytes / 1e9, io.seconds,
                    io.gb_per_s());
    } else if (print) {
      std::printf("no checkpoint in %s: starting from step 0\n", cfg.checkpoint.dir.c_str());
    }
  }

  TrainResult result;
  data::Batch batch;
  core::LossSums window_sums;
  double window_seconds = 0, total_seconds = 0;
  int64_t window_steps = 0;
  const int64_t first_step = pos.step;
  for (int64_t step = first_step; step < cfg.train.steps; ++step) {
    const auto t0 = Clock::now();
    train_source->next(batch);
    int64_t local_count = 0;
    for (uint8_t m : batch.mask) local_count += m;
    // MODEL §10b: the mean over the GLOBAL batch's unmasked targets.
    const int64_t count = dp ? dp->global_count(local_count) : local_count;
    model.params().zero_grads();
    core::LossSums sums = model.forward(model_input<T>(batch), count ? T(1) / T(count) : T(0));
    if (dp) dp->begin_backward();
    model.backward();
    if (dp) dp->end_backward();  // gradients summed over DP ranks
    const core::StepStats st = optimizer->step();
    if (dp) {
      dp->after_update();  // ZeRO-1: parameters from their owners
      sums = {dp->global_nats(sums.nats), count};
    }
    backend->memory().synchronize();  // a GPU step's time includes its queued kernels
    const double dt = seconds_since(t0);
    const double loss = count ? sums.nats / double(count) : 0.0;
    if (!std::isfinite(loss))
      throw std::runtime_error("loss is not finite at step " + std::to_string(step) +
                               " (lower optim.lr or check the data)");
    result.losses.push_back(loss);
    result.last_loss = loss;
    result.steps_done = step + 1;
    pos.step = step + 1;
    pos.tokens_seen += int64_t(tokens_per_step);
    window_sums.nats += sums.nats;
    window_sums.count += sums.count;
    window_seconds += dt;
    total_seconds += dt;
    ++window_steps;
    const bool last = step + 1 == cfg.train.steps;
    if (cfg.log.every > 0 && ((step + 1) % cfg.log.every == 0 || last || step == 0)) {
      StepMetrics m;
      m.step = step + 1;
      m.total_steps = cfg.train.steps;
      m.loss = window_sums.count ? window_sums.nats / double(window_sums.count) : 0;
      m.lr = st.lr;
      m.grad_norm = st.grad_norm;
      m.tokens_per_s = tokens_per_step * window_steps / window_seconds;
      m.gflops = flops.training() * m.tokens_per_s / 1e9;
      m.mfu = m.gflops / (peak * dp_size);  // the whole job's rate over every rank's peak
      m.eta_s = total_seconds / double(step + 1 - first_step) * double(cfg.train.steps - step - 1);
      m.tokens_seen = long(pos.tokens_seen);
      log.train_step(m);
      window_sums = {};
      window_seconds = 0;
      window_steps = 0;
    }
    if (eval_source && (step + 1) % cfg.train.eval_every == 0) {
      double eval_loss = 0;
      if (cfg.data.source == "shards" && cfg.train.eval_batches == 0) {
        // The whole held-out split, every document streamed through once (MODEL §8).
        eval_loss = evaluate_whole_split(model, cfg, dp.get());
      } else {
        const int64_t n = cfg.train.eval_batches > 0 ? cfg.train.eval_batches : 8;
        eval_loss = evaluate(model, *eval_source, n, dp.get());
      }
      char msg[160];
      std::snprintf(msg, sizeof msg, "eval  step %6lld | %s loss %.4f | bits/tok %.4f",
                    (long long)(step + 1), cfg.data.eval_split.c_str(), eval_loss,
                    eval_loss / std::log(2.0));
      log.event("eval", {{"step", double(step + 1)}, {"loss", eval_loss},
                         {"bits_per_token", eval_loss / std::log(2.0)}}, msg);
    }
    const bool stopping = dp ? dp->any(StopSignal::requested()) : StopSignal::requested();
    const bool save_due = cfg.checkpoint.every > 0 && pos.step % cfg.checkpoint.every == 0;
    if (!cfg.checkpoint.dir.empty() && (save_due || last || stopping))
      save_checkpoint_now(cfg, model, *optimizer, *train_source, pos, tokenizer_hash, log, ck_ranks);
    if (stopping) {
      result.stopped_by_signal = true;
      if (print)
        std::printf("stopping cleanly after step %lld (signal %d)\n", (long long)(step + 1),
                    StopSignal::signal_number());
      break;
    }
  }
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
