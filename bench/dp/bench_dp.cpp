// Data-parallel benchmark: the fraction of step time spent waiting on
// communication for DP = world ranks, with gradient buckets overlapped with backward and with
// everything reduced after backward; and the measured gradient all-reduce time against an
// α-β model fitted in the same run.
//
//   OMP_NUM_THREADS=1 mpirun -np 2 bench_dp CONFIG [--steps N] [key=value ...]
//
// "Waiting on communication" is the time a rank spends inside communication calls during a
// step: starting/testing buckets between layers, waiting for the buckets after backward, and
// the small collectives (target count, loss). Compute that overlaps an in-flight bucket is
// not counted. The MPI backend progresses only inside those calls (docs/parallelism.md).
// Time spent waiting for the other rank to arrive (load imbalance, e.g. a shared machine) is
// measured apart with barriers and printed separately.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/data_parallel.h"
#include "core/model.h"
#include "core/optim/optimizer.h"
#include "data/batch.h"
#include "kernels/backend.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"
#include "launch/run/run_model.h"
#include "parallel/alpha_beta.h"
#include "parallel/comm_benchmark.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/process_groups.h"
#include "runtime/blas_env.h"

namespace {

using namespace brt;
using Clock = std::chrono::steady_clock;

struct ModeResult {
  double step_seconds = 0;     // mean over the timed steps (slowest rank)
  double comm_seconds = 0;     // mean time inside communication calls (slowest rank)
  double finish_seconds = 0;   // of which: waiting for buckets after backward
  double skew_seconds = 0;     // barriers that wait for the slower rank (imbalance)
  int buckets = 0;
};

double max_over_ranks(parallel::Communicator& group, double v) {
  return group.all_reduce_value<double>(v, parallel::ReduceOp::kMax);
}

// One mode's steps on the run's spine (launch/run/run_model.h), as `brt-dist train` builds it.
ModeResult run_mode(launch::RunConfig cfg, const parallel::ProcessGroups& groups, bool overlap, int steps) {
  cfg.train.overlap = overlap;
  launch::RunModel<float> run(cfg, launch::RunPlace{&groups, -1}, launch::RunModelOptions::train(cfg));
  core::Model<float>& model = run.model();
  core::DataParallel<float>& dpx = *run.data_parallel();
  core::Optimizer<float>& optimizer = run.optimizer();
  parallel::Communicator& dp = groups.dp_cp();
  launch::SyntheticMarkovSource source(cfg.model.vocab, cfg.train.batch, cfg.model.seq_len,
                                       uint64_t(cfg.train.seed), dp.rank() * cfg.train.batch);
  data::Batch batch;
  ModeResult r;
  for (int step = -1; step < steps; ++step) {  // step -1: warm-up, not timed
    dp.barrier();
    const auto t0 = Clock::now();
    source.next(batch);
    int64_t local = 0;
    for (uint8_t m : batch.mask) local += m;
    const int64_t count = dpx.global_count(local);
    model.params().zero_grads();
    const core::LossSums sums = model.forward(
        {batch.inputs.data(), batch.targets.data(), batch.mask.data(), batch.doc_start.data()},
        1.0f / float(count));
    // Waiting for the slower rank is measured apart from the communication itself: a barrier
    // before backward (both modes), and without overlap another one before the reduction.
    auto timed_barrier = [&dp] {
      const auto b0 = Clock::now();
      dp.barrier();
      return std::chrono::duration<double>(Clock::now() - b0).count();
    };
    double skew = timed_barrier();
    dpx.begin_backward();
    model.backward();
    if (!overlap) skew += timed_barrier();
    dpx.end_backward();
    optimizer.step();
    dpx.after_update();
    dpx.global_nats(sums.nats);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (step < 0) continue;
    r.step_seconds += max_over_ranks(dp, dt) / steps;
    r.comm_seconds += max_over_ranks(dp, dpx.times().total()) / steps;
    r.finish_seconds += max_over_ranks(dp, dpx.times().grads_in_finish) / steps;
    r.skew_seconds += max_over_ranks(dp, skew) / steps;
  }
  r.buckets = dpx.buckets();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  runtime::ensure_blas_core_type(argc, argv);  // OpenBLAS's kernels for this CPU (as brt-dist does)
  return parallel::run_mpi_main(argc, argv, [&](parallel::MpiSession& session) {
    if (argc < 2) {
      if (session.world_rank() == 0)
        std::fprintf(stderr, "usage: mpirun -np 2 bench_dp CONFIG [--steps N] [key=value ...]\n");
      return 2;
    }
    int steps = 5;
    std::vector<std::string> overrides;
    for (int i = 2; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
      else overrides.push_back(a);
    }
    const launch::RunConfig cfg = launch::load_run_config(argv[1], overrides);
    const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 1);
    parallel::Communicator& dp = groups.dp_cp();
    const bool print = session.world_rank() == 0;
    const auto& m = cfg.model;
    if (print) {
      std::printf("bench_dp: %s, DP %d, %d layers, D %d, V %d, N %d, B %d per rank, %s, "
                  "bucket %.2f MiB, %d timed steps, OMP threads %s\n",
                  argv[1], dp.size(), m.layers, m.d_model, m.vocab, m.seq_len, cfg.train.batch,
                  core::to_string(cfg.optim.kind), cfg.train.bucket_mb, steps,
                  std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "default");
      std::fflush(stdout);
    }
    int64_t grad_elems = 0;
    std::vector<double> bucket_bytes;
    for (const bool overlap : {true, false}) {
      const ModeResult r = run_mode(cfg, groups, overlap, steps);
      if (print) {
        std::printf("  %-23s step %.4f s | waiting on communication %.4f s = %5.1f%% of the step "
                    "(gradients after backward %.4f s) | waiting for the slower rank %.4f s = %4.1f%% "
                    "| %d buckets\n", overlap ? "overlap (buckets):" : "no overlap (after bwd):",
                    r.step_seconds, r.comm_seconds, 100.0 * r.comm_seconds / r.step_seconds,
                    r.finish_seconds, r.skew_seconds, 100.0 * r.skew_seconds / r.step_seconds, r.buckets);
        std::fflush(stdout);
      }
      if (!overlap) {
        // α-β prediction of the no-overlap reduction: one all-reduce per bucket, back to back.
        auto backend = kernels::make_cpu_backend<float>();
        core::Model<float> model(cfg.model, 1, *backend);
        grad_elems = model.params().total_numel();
        std::vector<std::pair<int64_t, int64_t>> ranges;
        for (int i = 0; i < model.num_layers(); ++i) ranges.push_back(model.layer_grad_range(i));
        const int64_t cap = std::max<int64_t>(1, int64_t(cfg.train.bucket_mb * 1024 * 1024 / 4));
        for (const auto& b : parallel::plan_grad_buckets(grad_elems, ranges, cap))
          bucket_bytes.push_back(double(b.end - b.begin) * 4.0);
        const auto sizes = parallel::doubling_sizes(4096, 64ll << 20);
        const auto samples = parallel::measure_all_reduce(dp, sizes);
        const parallel::AlphaBeta ab = parallel::fit_alpha_beta(samples);
        double predicted = 0;
        for (double b : bucket_bytes) predicted += ab.predict(b);
        if (print)
          std::printf("  alpha-beta fit (4 KiB..64 MiB, this run): alpha %.1f us, %.2f GB/s; "
                      "gradient all-reduce of %.1f MB in %zu buckets predicted %.4f s vs measured "
                      "%.4f s after backward (ratio %.2f); fit max error %.0f%%\n",
                      ab.alpha_seconds * 1e6, ab.bandwidth() / 1e9, double(grad_elems) * 4 / 1e6,
                      bucket_bytes.size(), predicted, r.finish_seconds, r.finish_seconds / predicted,
                      100.0 * parallel::max_relative_error(ab, samples));
      }
    }
    return 0;
  });
}
