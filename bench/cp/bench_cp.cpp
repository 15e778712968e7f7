// Context-parallel benchmark (docs/parallelism.md, "Context parallelism"): for bst:sh:s4d and
// slide on the CPU, under mpirun with 4 ranks,
//  1. the longest segment N that fits a fixed per-rank memory budget at CP 1, 2 and 4 (the
//     planner's prediction, launch/plan/planner.h, confirmed by building the run's model at that
//     N and at the next multiple: the allocation is what `brt-dist train` reports), and its ratio
//     to CP 1's (target ≈ CP);
//  2. training tokens/s (forward, backward, the gradient reduction and the optimizer on the
//     run's spine, launch/run/run_model.h) against N at CP 1, 2, 4, CP C running on the first C
//     ranks while the others wait, and each ratio to CP 1 at the same N;
//  3. the bytes each rank sends per step in the context-parallel exchanges, counted on the cp
//     group (parallel/counting_communicator.h), against the planner's prediction.
//
//   OMP_NUM_THREADS=1 mpirun -np 4 bench_cp [--quick] [--budget-mib M] [--steps S]
//
// The machine's cores are shared by the ranks: with 4 ranks on 2 cores CP 4 cannot run faster
// than CP 2 (docs/parallelism.md has the measured figures and the machine).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/sharding/context_parallel.h"
#include "core/model.h"
#include "data/batch.h"
#include "kernels/backend.h"
#include "launch/config/config.h"
#include "launch/plan/planner.h"
#include "launch/feed/batch_source.h"
#include "launch/feed/context_chunk.h"
#include "launch/run/run_model.h"
#include "parallel/counting_communicator.h"
#include "parallel/mpi/mpi_communicator.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/process_groups.h"
#include "runtime/blas_env.h"

namespace {

using namespace brt;
using Clock = std::chrono::steady_clock;

struct Options {
  bool quick = false;
  int64_t budget_mib = 256;
  int steps = 5;
};

launch::RunConfig bench_config(const std::string& variant, int seq_len) {
  return launch::load_run_config(
      "configs/tiny.toml",
      {"model.variant=" + variant, "model.layers=2", "model.seq_len=" + std::to_string(seq_len),
       "model.window=64", "train.batch=1", "data.source=synthetic", "optim.kind=adamw", "optim.lr=0.001",
       "optim.min_lr=0.0001"});
}

// Every rank of the world reaches this point, waiting without spinning: the ranks a CP size
// leaves idle must not take the cores of the ranks it runs on (Open MPI busy-polls blocking calls).
void idle_barrier() {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  for (int done = 0;;) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// The first `cp` world ranks as one run's world (the others get MPI_COMM_NULL).
MPI_Comm first_ranks(int cp) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank < cp ? 0 : MPI_UNDEFINED, rank, &comm);
  return comm;
}

// 1. The longest N (a multiple of cp·W) whose predicted memory fits the budget.
int longest_fitting(const std::string& variant, int cp, int64_t budget) {
  int best = 0;
  for (int n = cp * 64;; n += cp * 64) {
    const launch::RunConfig c = bench_config(variant, n);
    const int64_t need = launch::predict_rank_memory(c.model, c.optim, 1, cp, false, 0, 4, 1, cp).total();
    if (need > budget) return best;
    best = n;
  }
}

// The memory the run's model allocates at N on CP ranks (collective over the first cp ranks).
int64_t allocated(const std::string& variant, int n, int cp) {
  MPI_Comm comm = first_ranks(cp);
  int64_t bytes = 0;
  if (comm != MPI_COMM_NULL) {
    const launch::RunConfig c = bench_config(variant, n);
    const parallel::ProcessGroups groups = parallel::make_mpi_process_groups(comm, 1, {}, cp);
    launch::RunModel<float> run(c, launch::RunPlace{&groups, -1}, launch::RunModelOptions::train(c));
    bytes = run.memory().total();
    MPI_Comm_free(&comm);
  }
  idle_barrier();
  MPI_Bcast(&bytes, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
  return bytes;
}

// Collective over the world; rank 0 prints.
void print_memory(const std::vector<std::string>& variants, const Options& o, bool root) {
  const int64_t budget = o.budget_mib << 20;
  if (root) std::printf("1. the longest N within %lld MiB per rank (B = 1; predicted, confirmed by allocating)\n",
                        static_cast<long long>(o.budget_mib));
  if (root) std::printf("%-12s %4s %8s %12s %14s %10s\n", "model", "CP", "N", "allocated", "N + CP·W alloc", "N / CP 1");
  for (const auto& v : variants) {
    int base = 0;
    for (const int cp : {1, 2, 4}) {
      const int n = longest_fitting(v, cp, budget);
      if (cp == 1) base = n;
      const int64_t at = allocated(v, n, cp), next = allocated(v, n + cp * 64, cp);
      if (root) std::printf("%-12s %4d %8d %10.1fMB %12.1fMB %9.2fx%s\n", v.c_str(), cp, n, at / 1048576.0, next / 1048576.0,
                  double(n) / base, at <= budget && next > budget ? "" : "  (prediction off)");
    }
  }
}

// 2. Seconds per training step at N on CP ranks, the slowest rank (collective over the world).
double step_seconds(const std::string& variant, int n, int cp, int steps) {
  MPI_Comm comm = first_ranks(cp);
  double seconds = 0;
  if (comm != MPI_COMM_NULL) {
    const launch::RunConfig c = bench_config(variant, n);
    const parallel::ProcessGroups groups = parallel::make_mpi_process_groups(comm, 1, {}, cp);
    launch::RunModel<float> run(c, launch::RunPlace{&groups, -1}, launch::RunModelOptions::train(c));
    launch::SyntheticMarkovSource source(c.model.vocab, 1, n, 5);
    data::Batch batch, chunk;
    for (int step = -1; step < steps; ++step) {  // step -1: warm-up, not timed
      groups.world().barrier();
      const auto t0 = Clock::now();
      source.next(batch);
      launch::take_chunk(batch, groups.cp_rank(), cp, chunk);
      int64_t local = 0;
      for (uint8_t m : chunk.mask) local += m;
      const int64_t count = run.data_parallel()->global_count(local);
      run.model().params().zero_grads();
      run.model().forward({chunk.inputs.data(), chunk.targets.data(), chunk.mask.data(), chunk.doc_start.data()},
                          1.0f / float(count));
      run.data_parallel()->begin_backward();
      run.model().backward();
      run.data_parallel()->end_backward();
      run.optimizer().apply(run.optimizer().grad_norm());
      run.data_parallel()->after_update();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (step >= 0) seconds += groups.world().all_reduce_value<double>(s, parallel::ReduceOp::kMax);
    }
    seconds /= steps;
    MPI_Comm_free(&comm);
  }
  idle_barrier();
  MPI_Bcast(&seconds, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return seconds;
}

void print_throughput(const std::vector<std::string>& variants, const Options& o, bool root) {
  const std::vector<int> lengths = o.quick ? std::vector<int>{1024, 4096} : std::vector<int>{1024, 2048, 4096, 8192, 16384};
  if (root) std::printf("\n2. training tokens/s (B = 1; forward, backward, DP x CP reduction, AdamW; slowest rank, mean of %d steps)\n",
              o.steps);
  if (root) std::printf("%-12s %7s %12s %12s %12s %9s %9s\n", "model", "N", "CP 1", "CP 2", "CP 4", "CP2/CP1", "CP4/CP1");
  for (const auto& v : variants)
    for (const int n : lengths) {
      double rate[3];
      for (int i = 0; i < 3; ++i) rate[i] = n / step_seconds(v, n, 1 << i, o.steps);
      if (root)
        std::printf("%-12s %7d %12.0f %12.0f %12.0f %8.2fx %8.2fx\n", v.c_str(), n, rate[0], rate[1], rate[2],
                    rate[1] / rate[0], rate[2] / rate[0]);
      std::fflush(stdout);
    }
}

// 3. Bytes sent per step on the cp group against the planner (collective over the first cp ranks).
void print_bytes(const std::vector<std::string>& variants) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) std::printf("\n3. bytes each rank sends per step in the CP exchanges (B = 1), counted vs predicted\n");
  if (rank == 0) std::printf("%-12s %7s %4s %14s %14s\n", "model", "N", "CP", "counted", "predicted");
  for (const auto& v : variants)
    for (const int n : {4096, 16384})
      for (const int cp : {2, 4}) {
        MPI_Comm comm = first_ranks(cp);
        if (comm == MPI_COMM_NULL) {
          idle_barrier();
          continue;
        }
        const launch::RunConfig c = bench_config(v, n);
        parallel::MpiCommunicator group(comm, "cp");
        parallel::CountingCommunicator counter(group);
        auto backend = kernels::make_cpu_backend<float>();
        core::Model<float> model(c.model, 1, *backend, {}, core::ContextParallel(counter));
        model.params().initialize(1);
        launch::SyntheticMarkovSource source(c.model.vocab, 1, n, 5);
        data::Batch batch, chunk;
        source.next(batch);
        launch::take_chunk(batch, group.rank(), cp, chunk);
        model.forward({chunk.inputs.data(), chunk.targets.data(), chunk.mask.data(), chunk.doc_start.data()}, 1e-3f);
        model.backward();
        const int64_t predicted = launch::cp_bytes_sent_per_step(c.model, 1, 1, cp);
        if (group.rank() == 0)
          std::printf("%-12s %7d %4d %14lld %14lld%s\n", v.c_str(), n, cp, static_cast<long long>(counter.sent_bytes()),
                      static_cast<long long>(predicted), counter.sent_bytes() == predicted ? "" : "  (differs)");
        MPI_Comm_free(&comm);
        idle_barrier();
      }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") o.quick = true;
    else if (a == "--budget-mib" && i + 1 < argc) o.budget_mib = std::atoll(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) o.steps = std::atoi(argv[++i]);
    else throw std::invalid_argument("usage: mpirun -np 4 bench_cp [--quick] [--budget-mib M] [--steps S]");
  }
  if (o.quick) o.steps = 1;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  brt::runtime::ensure_blas_core_type(argc, argv);  // OpenBLAS's kernels for this CPU (as brt-dist does)
  return brt::parallel::run_mpi_main(argc, argv, [&](brt::parallel::MpiSession& session) {
    const Options o = parse(argc, argv);
    if (session.world_size() != 4) throw std::invalid_argument("bench_cp runs under mpirun -np 4");
    const bool root = session.world_rank() == 0;
    const std::vector<std::string> variants = {"bst:sh:s4d", "slide"};
    if (root)
      std::printf("bench_cp: 2 layers, D 128, H 4 x 32, F 512, V 4096, W 64, fp32, CPU backend, 4 ranks, "
                  "OMP_NUM_THREADS=%s\n\n", std::getenv("OMP_NUM_THREADS") ? std::getenv("OMP_NUM_THREADS") : "unset");
    print_memory(variants, o, root);
    print_throughput(variants, o, root);
    print_bytes(variants);
    return 0;
  });
}
