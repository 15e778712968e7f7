// A small MPI program the failure and launch tests run under mpirun (failure_tests.sh):
//   kill   <timeout_s>  rank 1 SIGKILLs itself; rank 0 waits in an all-reduce
//   stall  <timeout_s>  rank 1 sleeps instead of entering the all-reduce
//   mismatch <timeout_s> rank 1 all-reduces 10 floats while rank 0 all-reduces 1000
//   checksum <tp>       prints a hash of all-reduce results (two runs must match bit for bit)
//   layout <tp>         builds the process groups (a bad --tp must be refused)
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "parallel/mpi/mpi_session.h"
#include "parallel/process_groups.h"

namespace bp = brt::parallel;

namespace {

// FNV-1a over the bytes of the results: any bit that differs changes it.
uint64_t hash_bytes(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int run_failure(const std::string& mode, double timeout_s) {
  bp::CommOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  bp::ProcessGroups groups = bp::make_mpi_process_groups(MPI_COMM_WORLD, 1, options);
  bp::Communicator& world = groups.world();
  std::vector<float> grads(1024, 1.0f);
  for (int step = 0; step < 3; ++step) world.all_reduce(grads);  // healthy collectives first
  if (world.rank() == 1) {
    if (mode == "kill") {
      std::fprintf(stderr, "failure_driver: world rank 1 killing itself (SIGKILL)\n");
      raise(SIGKILL);
    }
    std::fprintf(stderr, "failure_driver: world rank 1 stalling instead of all_reduce\n");
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  world.all_reduce(grads);  // never completes: the timeout must end the job
  std::fprintf(stderr, "failure_driver: all_reduce completed unexpectedly\n");
  return 0;
}

int run_mismatch(double timeout_s) {
  bp::CommOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  bp::ProcessGroups groups = bp::make_mpi_process_groups(MPI_COMM_WORLD, 1, options);
  std::vector<float> grads(groups.world_rank() == 1 ? 10 : 1000, 1.0f);
  groups.world().all_reduce(grads);
  std::fprintf(stderr, "failure_driver: mismatched all_reduce completed unexpectedly\n");
  return 0;
}

int run_checksum(int tp) {
  bp::ProcessGroups groups = bp::make_mpi_process_groups(MPI_COMM_WORLD, tp);
  uint64_t h = 1469598103934665603ull;
  for (bp::Communicator* group : {&groups.world(), &groups.dp_cp(), &groups.tp()}) {
    for (int64_t n : {1, 1000, 65537}) {
      std::vector<float> x(static_cast<size_t>(n));
      std::vector<double> y(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        // Magnitudes spread over decades so the sum order shows in the last bits.
        const double v = (1.0 + 0.1 * groups.world_rank() + 1e-4 * static_cast<double>(i)) *
                         std::pow(10.0, static_cast<double>(i % 9) - 4.0) / 3.0;
        x[static_cast<size_t>(i)] = static_cast<float>(v);
        y[static_cast<size_t>(i)] = v;
      }
      group->all_reduce(x);
      group->all_reduce(y);
      h = hash_bytes(x.data(), x.size() * sizeof(float), h);
      h = hash_bytes(y.data(), y.size() * sizeof(double), h);
    }
  }
  std::vector<unsigned long long> all(static_cast<size_t>(groups.layout().world));
  unsigned long long mine = h;
  MPI_Gather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all.data(), 1, MPI_UNSIGNED_LONG_LONG, 0,
             MPI_COMM_WORLD);
  if (groups.world_rank() == 0) {
    for (size_t r = 0; r < all.size(); ++r) std::printf("rank %zu checksum %016llx\n", r, all[r]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bp::run_mpi_main(argc, argv, [&](bp::MpiSession&) -> int {
    if (argc < 3) {
      std::fprintf(stderr, "usage: failure_driver kill|stall <timeout_s> | checksum|layout <tp>\n");
      return 2;
    }
    const std::string mode = argv[1];
    if (mode == "kill" || mode == "stall") return run_failure(mode, std::stod(argv[2]));
    if (mode == "mismatch") return run_mismatch(std::stod(argv[2]));
    if (mode == "checksum") return run_checksum(std::stoi(argv[2]));
    if (mode == "layout") {
      bp::ProcessGroups groups = bp::make_mpi_process_groups(MPI_COMM_WORLD, std::stoi(argv[2]));
      if (groups.world_rank() == 0) std::printf("layout ok: dp_cp %d tp %d\n", groups.layout().dp_cp(), groups.layout().tp);
      return 0;
    }
    std::fprintf(stderr, "failure_driver: unknown mode %s\n", mode.c_str());
    return 2;
  });
}
