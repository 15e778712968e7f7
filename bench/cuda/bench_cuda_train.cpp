// GPU training throughput (docs/gpu.md): whole training steps (forward,
// backward, Adafactor) of ladder configs on one GPU in bf16, reported as tokens/s, achieved
// TFLOP/s by model.md §10's count (training = 3 × forward) and MFU against the bf16 dense matrix
// peak measured in the same run (cuBLAS 8192³ bf16 GEMM). Warm-up steps first, then the
// median of timed steps (each synchronised), on the synthetic Markov stream; each config runs
// eagerly and from CUDA graphs (train.cuda_graph), and the launches per step are printed.
// Then each component's time (the kernel classes of kernels/counting_backend.h and the
// optimizer, each call between two CUDA events, the step free-running) beside the planner's
// prediction for an H100 or H200 (launch/plan/counted_step.h).
//
// usage: bench_cuda_train [--batch B] [--steps S] [--precision bf16|fp32] [config.toml ...]
//        (default: configs/150m.toml configs/1.3b.toml, B 4, S 6; run from the repo root)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/flops.h"
#include "core/model.h"
#include "core/optim/optimizer.h"
#include "core/param_count.h"
#include "kernels/counting_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"
#include "launch/plan/counted_step.h"
#include "launch/plan/planner.h"
#include "launch/run/device_backend.h"
#include "launch/run/run_model.h"
#include "launch/train/step_graphs.h"

namespace {

namespace kc = brt::kernels::cuda;

struct Settings {
  int batch = 4;
  int steps = 6;
  kc::Precision precision = kc::Precision::kBf16;
  std::vector<std::string> configs;
};

Settings parse(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--batch") s.batch = std::stoi(value());
    else if (a == "--steps") s.steps = std::stoi(value());
    else if (a == "--precision") s.precision = kc::parse_precision(value());
    else s.configs.push_back(a);
  }
  if (s.configs.empty()) s.configs = {"configs/150m.toml", "configs/1.3b.toml"};
  if (s.batch < 1 || s.steps < 1) throw std::invalid_argument("--batch and --steps must be >= 1");
  return s;
}

struct Measured {
  double step_s = 0, loss = 0;
  brt::launch::StepGraphStats graphs;
  std::string epilogues;  // kc::describe_epilogues after the run (bf16)
};

// Warm-up steps, then the median of s.steps timed steps, each with its update as brt-dist train
// makes it on one GPU: enqueued behind backward (Optimizer::enqueue_step, no wait for the norm),
// or with `use_graphs` forward, backward and the update replayed from CUDA graphs
// (launch/train/step_graphs.h); then the step's scalars read back (Optimizer::finish_step).
Measured measure(const brt::launch::RunConfig& config, const Settings& s, bool use_graphs) {
  using Clock = std::chrono::steady_clock;
  // The run's spine as brt-dist train builds it on one GPU (launch/run/run_model.h): the CUDA
  // backend with the model's workspace, the fused optimizer kernels.
  brt::launch::RunConfig cfg = config;
  cfg.train.device = "cuda";
  cfg.train.precision = kc::precision_name(s.precision);
  brt::launch::RunModelOptions options = brt::launch::RunModelOptions::train(cfg);
  options.streams = s.batch;
  brt::launch::RunModel<float> run(cfg, {nullptr, 0}, options);
  brt::kernels::Backend<float>& backend = run.backend();
  brt::core::Model<float>& model = run.model();
  brt::core::Optimizer<float>& optimizer = run.optimizer();
  std::unique_ptr<brt::launch::StepGraphs> graphs;
  if (use_graphs) graphs = std::make_unique<brt::launch::StepGraphs>(model, backend, 8, &optimizer);
  brt::launch::SyntheticMarkovSource source(cfg.model.vocab, s.batch, cfg.model.seq_len, 1);
  brt::data::Batch batch;
  const int warmup = 3;  // graphs: first sight, warm-up, capture
  std::vector<double> seconds;
  Measured m;
  for (int step = 0; step < warmup + s.steps; ++step) {
    source.next(batch);
    // Steady state: the document starts only at the first step (the stream's long documents).
    if (step > 0) std::fill(batch.doc_start.begin(), batch.doc_start.end(), uint8_t(0));
    int64_t count = 0;
    for (uint8_t mk : batch.mask) count += mk;
    backend.memory().synchronize();
    const auto t0 = Clock::now();
    model.params().zero_grads();
    const brt::core::ModelInput in{batch.inputs.data(), batch.targets.data(), batch.mask.data(),
                                   batch.doc_start.data()};
    const float scale = 1.0f / float(std::max<int64_t>(count, 1));
    model.stage_step(in);
    optimizer.stage_step();
    if (graphs) {
      graphs->run(scale);
    } else {
      model.device_step(scale);
      optimizer.enqueue_step();
    }
    const double nats = model.step_nats();
    if (!optimizer.finish_step().applied)
      throw std::runtime_error("step " + std::to_string(step) + ": the update was skipped (a non-finite gradient norm)");
    backend.memory().synchronize();
    if (step >= warmup) seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    m.loss = nats / double(std::max<int64_t>(count, 1));
  }
  std::sort(seconds.begin(), seconds.end());
  m.step_s = seconds[seconds.size() / 2];
  if (graphs) m.graphs = graphs->stats();
  m.epilogues = kc::describe_epilogues(backend);
  return m;
}

// "h100" or "h200" from the device's name, "" for another device (no prediction then).
std::string planned_device() {
  const std::string name = kc::cuda_device_description(0);
  if (name.find("H200") != std::string::npos) return "h200";
  if (name.find("H100") != std::string::npos) return "h100";
  return "";
}

// One step per component: the counting backend around the CUDA backend runs each call and
// brackets it with CUDA events by kernel class (kernels/call_timer.h; no host wait between calls,
// so the step runs as an untimed one does), beside the planner's prediction for this device
// (launch/plan/counted_step.h): the first device run calibrates the prediction instead of
// replacing it.
void bench_components(const std::string& path, const brt::launch::RunConfig& config, const Settings& s) {
  brt::launch::RunConfig cfg = config;
  cfg.train.device = "cuda";
  cfg.train.precision = kc::precision_name(s.precision);
  brt::core::ModelConfig resolved = cfg.model;
  resolved.resolve();
  auto backend = brt::launch::make_run_backend<float>(cfg.train, 0, resolved, s.batch);
  const auto timer = kc::make_event_timer(*backend);
  brt::kernels::CountingBackend<float> timed(*backend, *timer);
  brt::core::Model<float> model(resolved, s.batch, timed);
  model.params().initialize(uint64_t(cfg.train.seed));
  auto optimizer_kernels = brt::launch::make_run_optimizer_kernels<float>(*backend);
  auto optimizer = brt::core::make_optimizer(cfg.optim, model.params(), {}, optimizer_kernels.get());
  brt::launch::SyntheticMarkovSource source(resolved.vocab, s.batch, resolved.seq_len, 1);
  brt::data::Batch batch;
  const int steps = 3;
  constexpr int kOptimizerSlot = brt::kernels::kKernelClasses;
  std::vector<double> seconds;
  for (int step = 0; step <= steps; ++step) {  // step 0 warms up
    if (step == 1) {
      timer->collect(seconds);  // the initialisation's and the warm-up's calls: dropped
      seconds.clear();
    }
    source.next(batch);
    int64_t count = 0;
    for (uint8_t mk : batch.mask) count += mk;
    model.params().zero_grads();
    model.stage_step({batch.inputs.data(), batch.targets.data(), batch.mask.data(), batch.doc_start.data()});
    model.device_step(1.0f / float(std::max<int64_t>(count, 1)));
    model.step_nats();
    timer->begin();
    optimizer->step();
    timer->end(kOptimizerSlot);
  }
  timer->collect(seconds);
  seconds.resize(size_t(kOptimizerSlot) + 1, 0.0);
  const std::string device = planned_device();
  brt::launch::CountedStep predicted;
  if (!device.empty()) {
    const auto memory = brt::launch::predict_rank_memory(cfg.model, cfg.optim, s.batch, 1, false, 0);
    predicted = brt::launch::count_step(cfg.model, s.batch, 1, 1, memory, brt::launch::device_rates(device),
                                        {s.precision == kc::Precision::kBf16,
                                         cfg.optim.kind == brt::core::OptimKind::kAdafactor,
                                         cfg.optim.min_dim_to_factor});
  }
  std::printf("%-20s component          predicted (%s)   measured (%s, per step)  measured/predicted\n",
              path.c_str(), device.empty() ? "no rates for this device" : device.c_str(), timer->clock_name());
  double want_total = 0, measured_total = 0;
  for (int k = 0; k <= kOptimizerSlot; ++k) {
    const char* name =
        k == kOptimizerSlot ? "optimizer" : brt::kernels::kernel_class_name(brt::kernels::KernelClass(k));
    const double measured = seconds[size_t(k)] / steps;
    // The GEMM calls' time includes their operands' bf16 conversions (a line of their own).
    const double want = predicted.components.empty() ? 0.0
                        : k == kOptimizerSlot         ? predicted.optimizer_seconds()
                        : k == 0                      ? predicted.components[0].seconds + predicted.seconds_of("bf16 conversions")
                                                      : predicted.components[size_t(k)].seconds;
    want_total += want;
    measured_total += measured;
    std::printf("%-20s component %-16s %9.2f ms %12.2f ms %24.2f\n", path.c_str(), name, want * 1e3,
                measured * 1e3, want > 0 ? measured / want : 0.0);
  }
  std::printf("%-20s component %-16s %9.2f ms %12.2f ms %24.2f\n", path.c_str(), "compute", want_total * 1e3,
              measured_total * 1e3, want_total > 0 ? measured_total / want_total : 0.0);
  std::fflush(stdout);
}

void bench_config(const std::string& path, const Settings& s, double peak_tflops) {
  const auto cfg = brt::launch::load_run_config(path, {"data.source=synthetic"});
  const Measured eager = measure(cfg, s, false);
  const Measured graphed = measure(cfg, s, true);
  const double tokens = double(s.batch) * cfg.model.seq_len;
  brt::core::ModelConfig resolved = cfg.model;
  resolved.resolve();
  const double flops_per_token = brt::core::flops_per_token(resolved).training();
  const int64_t params = brt::core::count_parameters(resolved);
  for (const Measured* m : {&eager, &graphed}) {
    const double tflops = flops_per_token * tokens / m->step_s / 1e12;
    std::printf("%-20s %6.0fM params  B %d x N %d  %-7s step %8.1f ms (median of %d)  %9.0f tok/s  "
                "%7.1f TFLOP/s  MFU %5.1f%%  (loss %.3f)\n",
                path.c_str(), params / 1e6, s.batch, cfg.model.seq_len, m == &eager ? "eager" : "graphs",
                m->step_s * 1e3, s.steps, tokens / m->step_s, tflops, 100 * tflops / peak_tflops, m->loss);
  }
  const auto& g = graphed.graphs;
  std::printf("%-20s launches per step: %d kernels + %d copies + %d fills eager -> 1 graph launch "
              "(%lld replays); graphs / eager step time %.3f; losses %s\n",
              path.c_str(), g.graph_kernels, g.graph_copies, g.graph_fills,
              (long long)g.replayed_steps, graphed.step_s / eager.step_s,
              graphed.loss == eager.loss ? "bit-identical" : "DIFFER");
  if (!eager.epilogues.empty())
    std::printf("%-20s the products through cuBLASLt (ReLU epilogues, residual C): %s\n", path.c_str(), eager.epilogues.c_str());
  std::fflush(stdout);
  bench_components(path, cfg, s);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Settings s = parse(argc, argv);
    if (const kc::CudaDeviceQuery query = kc::query_cuda_devices(); query.count == 0) {
      // Under BRT_REQUIRE_GPU=1 (scripts/gpu-check.sh on a machine with a GPU): a failure.
      const char* required = std::getenv("BRT_REQUIRE_GPU");
      const bool fail = required != nullptr && std::string(required) == "1";
      std::printf("bench_cuda_train: %s; %s\n", query.describe().c_str(), fail ? "FAILED" : "skipped");
      return fail ? 1 : 0;
    }
    std::printf("device: %s\n", kc::cuda_device_description(0).c_str());
    const double peak = kc::measure_gemm_peak_tflops(kc::Precision::kBf16, 8192);
    std::printf("bf16 dense peak (cuBLAS 8192^3 bf16, fp32 accumulate, measured now): %.1f TFLOP/s\n",
                peak);
    std::printf("training precision: %s (fp32 master weights, Adafactor state fp32)\n",
                kc::precision_name(s.precision));
    for (const auto& path : s.configs) bench_config(path, s, peak);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_train: %s\n", e.what());
    return 1;
  }
  return 0;
}
