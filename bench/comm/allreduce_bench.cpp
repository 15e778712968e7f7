// Measures all-reduce time over the world group for payloads from 4 B to 64 MB, fits the
// α-β model time = α + β·bytes (parallel/alpha_beta.h, relative least squares), and prints
// measured against predicted per size. Also times MPI_Allreduce for comparison (Open MPI's
// own algorithms, not order-fixed, so not what training uses).
//
//   mpirun -np 2 bench_comm_allreduce [--max-bytes N] [--min-time-ms T] [--csv]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "parallel/alpha_beta.h"
#include "parallel/comm_benchmark.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/process_groups.h"

namespace bp = brt::parallel;

namespace {

struct Options {
  int64_t min_bytes = 4;
  int64_t max_bytes = 64ll << 20;
  double min_time_s = 0.05;  // per size: repeat until at least this long (at least 3 reps)
  bool csv = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--max-bytes" && i + 1 < argc) o.max_bytes = std::stoll(argv[++i]);
    else if (a == "--min-time-ms" && i + 1 < argc) o.min_time_s = std::stod(argv[++i]) / 1000.0;
    else if (a == "--csv") o.csv = true;
    else throw std::invalid_argument("unknown argument " + a +
                                     " (use --max-bytes N, --min-time-ms T, --csv)");
  }
  return o;
}

// MPI_Allreduce timed the same way as measure_all_reduce times ours.
std::vector<bp::CommSample> measure_native(std::span<const int64_t> sizes, const bp::TimingOptions& o) {
  std::vector<bp::CommSample> out;
  std::vector<float> buf(static_cast<size_t>(sizes.back() / 4), 1.0f);
  for (int64_t bytes : sizes) {
    const int n = static_cast<int>(bytes / 4);
    auto once = [&] {
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      buf[0] = 1.0f;
    };
    for (int w = 0; w < o.warmup; ++w) once();
    for (int reps = o.min_repetitions;;) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int r = 0; r < reps; ++r) once();
      double elapsed = MPI_Wtime() - t0;
      MPI_Allreduce(MPI_IN_PLACE, &elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (elapsed >= o.min_seconds || reps >= o.max_repetitions) {
        out.push_back({static_cast<double>(bytes), elapsed / reps});
        break;
      }
      reps = std::min(o.max_repetitions, std::max(reps * 2, static_cast<int>(reps * 1.2 * o.min_seconds /
                                                                               std::max(elapsed, 1e-9))));
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  return bp::run_mpi_main(argc, argv, [&](bp::MpiSession& session) -> int {
    const Options opt = parse(argc, argv);
    bp::ProcessGroups groups = bp::make_mpi_process_groups(MPI_COMM_WORLD, 1);
    bp::Communicator& world = groups.world();
    const bool root = session.world_rank() == 0;

    const std::vector<int64_t> sizes = bp::doubling_sizes(opt.min_bytes, opt.max_bytes);
    bp::TimingOptions timing;
    timing.min_seconds = opt.min_time_s;
    const std::vector<bp::CommSample> ours = bp::measure_all_reduce(world, sizes, timing);
    const std::vector<bp::CommSample> native = measure_native(sizes, timing);

    const bp::AlphaBeta fit = bp::fit_alpha_beta(ours);
    const bp::AlphaBeta fit_native = bp::fit_alpha_beta(native);
    if (root) {
      std::printf("# all-reduce(sum, float32) over %d ranks, world group, brt::parallel MPI backend\n",
                  world.size());
      std::printf("# fit (relative least squares): alpha = %.2f us, beta = %.4f ns/byte (%.2f GB/s), "
                  "max |measured/predicted - 1| = %.2f\n",
                  fit.alpha_seconds * 1e6, fit.beta_seconds_per_byte * 1e9, fit.bandwidth() / 1e9,
                  bp::max_relative_error(fit, ours));
      std::printf("# MPI_Allreduce fit:                alpha = %.2f us, beta = %.4f ns/byte (%.2f GB/s), "
                  "max |measured/predicted - 1| = %.2f\n",
                  fit_native.alpha_seconds * 1e6, fit_native.beta_seconds_per_byte * 1e9,
                  fit_native.bandwidth() / 1e9, bp::max_relative_error(fit_native, native));
      if (opt.csv) {
        std::printf("bytes,measured_us,predicted_us,ratio,mpi_allreduce_us\n");
      } else {
        std::printf("%12s %14s %14s %8s %18s\n", "bytes", "measured_us", "predicted_us", "ratio",
                    "MPI_Allreduce_us");
      }
      for (size_t i = 0; i < ours.size(); ++i) {
        const double pred = fit.predict(ours[i].bytes);
        const char* fmt = opt.csv ? "%.0f,%.3f,%.3f,%.3f,%.3f\n" : "%12.0f %14.3f %14.3f %8.3f %18.3f\n";
        std::printf(fmt, ours[i].bytes, ours[i].seconds * 1e6, pred * 1e6, ours[i].seconds / pred,
                    native[i].seconds * 1e6);
      }
    }
    return 0;
  });
}
