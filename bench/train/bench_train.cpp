// Training-step throughput on the CPU backend: tokens/s of a full step
// (forward, backward, optimizer), achieved GFLOP/s by model.md §10's count, and that figure as a
// ratio of the sgemm peak measured in the same run with the same BLAS and thread count.
//
//   bench_train [--steps N] [--only 40m|small]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/flops.h"
#include "core/model.h"
#include "core/optim/optimizer.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"
#include "launch/run/run_model.h"
#include "runtime/blas_env.h"
#include "runtime/gemm_peak.h"

namespace {

struct Case {
  std::string name, config;
  std::vector<std::string> overrides;
  double target;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run_case(const Case& c, int steps, double peak) {
  using namespace brt;
  launch::RunConfig cfg = launch::load_run_config(c.config, c.overrides);
  // The run's spine as brt-dist train builds it (launch/run/run_model.h): one process, the CPU.
  launch::RunModelOptions options = launch::RunModelOptions::train(cfg);
  options.seed = 1;
  launch::RunModel<float> run(cfg, {}, options);
  core::Model<float>& model = run.model();
  core::Optimizer<float>& opt = run.optimizer();
  launch::SyntheticMarkovSource data(cfg.model.vocab, cfg.train.batch, cfg.model.seq_len, 1);
  data::Batch batch;
  std::vector<double> times;
  for (int s = 0; s <= steps; ++s) {  // step 0 warms up (first-touch, BLAS buffers)
    data.next(batch);
    int64_t count = 0;
    for (auto m : batch.mask) count += m;
    const auto t0 = std::chrono::steady_clock::now();
    model.params().zero_grads();
    model.forward({batch.inputs.data(), batch.targets.data(), batch.mask.data(),
                   batch.doc_start.data()}, 1.0f / float(count));
    model.backward();
    opt.step();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) times.push_back(dt);
  }
  const double step_s = median(times);
  const double tokens = double(cfg.train.batch) * cfg.model.seq_len;
  const double gflops = core::flops_per_token(model.config()).training() * tokens / step_s / 1e9;
  std::printf("%-6s %-16s B %d N %5d W %4d: step %8.3f s | %9.0f tokens/s | %7.1f GFLOP/s | "
              "%.3f of sgemm peak (target >= %.1f)\n",
              c.name.c_str(), model.config().variant.c_str(), cfg.train.batch,
              cfg.model.seq_len, cfg.model.window, step_s, tokens / step_s, gflops,
              gflops / peak, c.target);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  brt::runtime::ensure_blas_core_type(argc, argv);
  int steps = 3;
  std::string only;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps")) steps = std::stoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--only")) only = argv[++i];
  }
  const auto peak = brt::runtime::measure_sgemm_peak(2048, 7);
  std::printf("sgemm peak: %.1f GFLOP/s (median of %d 2048^3 calls, %d OpenMP threads, "
              "OPENBLAS_CORETYPE=%s)\n",
              peak.gflops, peak.calls, peak.threads,
              std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "(auto)");
  const std::vector<Case> cases = {
      {"40m", "configs/40m.toml", {"train.batch=1", "optim.kind=adafactor"}, 0.6},
      {"small", "configs/bench-small.toml", {}, 0.4},
  };
  for (const auto& c : cases)
    if (only.empty() || only == c.name) run_case(c, steps, peak.gflops);
  return 0;
}
