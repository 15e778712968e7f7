// `brt-dist doctor [--checkpoint-dir DIR] [--min-free-gb G]` (issue 8 item 7): a preflight run
// under the real launcher (mpirun / srun --mpi=pmix). Rank 0 reports ranks -> hosts -> devices,
// the MPI library, NCCL, the BLAS build, a short all-reduce bandwidth test per process group
// (docs/parallelism.md), free disk at the checkpoint path and the sgemm peak. Exits 1 when a
// problem is found (checkpoint dir not writable, free disk below the threshold, an all-reduce
// that returns a wrong sum); a rank that cannot communicate ends the job through the
// collective timeout (status 124, parallel/communicator.h) or the launcher.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/gemm_peak.h"
#include "launch/cli.h"
#include "launch/commands.h"
#include "launch/gpu_binding.h"
#include "parallel/comm_benchmark.h"
#include "parallel/launch_env.h"
#include "parallel/mpi_session.h"
#include "parallel/process_groups.h"

namespace brt::launch {

namespace {

constexpr int kHostChars = 256;

struct DoctorOptions {
  std::string checkpoint_dir = ".";
  double min_free_gb = 1.0;
  std::chrono::seconds comm_timeout{60};
};

// Checks that every rank can write into `dir` (a per-rank probe file; a shared filesystem sees
// them all) and returns the problem, or "" when fine.
std::string probe_writable(const std::string& dir, int rank) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return "cannot create checkpoint dir " + dir + ": " + ec.message();
  const fs::path probe = fs::path(dir) / (".brt-doctor-probe." + std::to_string(rank));
  {
    std::ofstream out(probe);
    out << "probe\n";
    if (!out.good()) return "checkpoint dir " + dir + " is not writable by world rank " + std::to_string(rank);
  }
  fs::remove(probe, ec);
  return {};
}

// Sum of (rank + 1) over the group through an all-reduce: a rank that gets another value is
// not communicating correctly.
bool all_reduce_sum_correct(parallel::Communicator& group) {
  const double expected = double(group.size()) * (group.size() + 1) / 2.0;
  return group.all_reduce_value(double(group.rank() + 1)) == expected;
}

std::string bandwidth_line(parallel::Communicator& group) {
  if (group.size() == 1) return "group '" + group.name() + "' (1 rank): nothing to reduce";
  const std::vector<int64_t> sizes = {4096, 4 << 20};
  parallel::TimingOptions timing;
  timing.min_seconds = 0.02;
  const auto samples = parallel::measure_all_reduce(group, sizes, timing);
  char line[256];
  std::snprintf(line, sizeof line,
                "group '%s' (%d ranks): all-reduce 4 KiB %.1f us, 4 MiB %.2f ms = %.2f GB/s payload "
                "(%.2f GB/s per rank on the wire, 2(p-1)/p)",
                group.name().c_str(), group.size(), samples[0].seconds * 1e6, samples[1].seconds * 1e3,
                samples[1].bytes / samples[1].seconds / 1e9,
                2.0 * (group.size() - 1) / group.size() * samples[1].bytes / samples[1].seconds / 1e9);
  return line;
}

int run_doctor(parallel::MpiSession& session, const DoctorOptions& opt) {
  const int rank = session.world_rank(), size = session.world_size();
  const parallel::LaunchInfo info = parallel::query_launch_info(MPI_COMM_WORLD, parallel::process_env());
  parallel::CommOptions comm;
  comm.timeout = opt.comm_timeout;
  const parallel::ProcessGroups groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 1, comm);
  std::vector<std::string> problems;
  auto say = [rank](const std::string& s) {
    if (rank == 0) std::printf("%s\n", s.c_str());
  };

  // Ranks -> hosts -> devices.
  char host[kHostChars] = {};
  std::snprintf(host, sizeof host, "%s", info.host.c_str());
  std::vector<char> hosts(size_t(size) * kHostChars);
  std::vector<int> local_ranks(static_cast<size_t>(size), 0);
  MPI_Gather(host, kHostChars, MPI_CHAR, hosts.data(), kHostChars, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Gather(&info.local_rank, 1, MPI_INT, local_ranks.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  // Each rank binds its GPU by local rank (as train does) and reports what it got.
  const GpuBinding gpu = bind_gpu_for_local_rank(info.local_rank);
  char device[kHostChars] = {};
  std::snprintf(device, sizeof device, "%s%s", gpu.device >= 0 ? ("GPU " + std::to_string(gpu.device) + ": ").c_str() : "",
                gpu.description.c_str());
  std::vector<char> devices(size_t(size) * kHostChars);
  MPI_Gather(device, kHostChars, MPI_CHAR, devices.data(), kHostChars, MPI_CHAR, 0, MPI_COMM_WORLD);
  say("brt-dist doctor: " + std::to_string(size) + " rank(s), launcher " + info.launcher);
  for (int r = 0; r < size && rank == 0; ++r)
    std::printf("  rank %d -> host %s (local rank %d) -> device: %s\n", r, &hosts[size_t(r) * kHostChars],
                local_ranks[size_t(r)], &devices[size_t(r) * kHostChars]);

  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(mpi_version, &len);
  std::string mpi_line(mpi_version, size_t(len));
  if (const auto nl = mpi_line.find('\n'); nl != std::string::npos) mpi_line.resize(nl);
  say("MPI: " + mpi_line + " (MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION) + ")");
  say("NCCL: " + nccl_version_description());
  say("BLAS: " + kernels::cpu::blas_description());

  // Communication: correctness first (a wrong sum is a problem), then bandwidth per group.
  int bad = 0;
  for (parallel::Communicator* g : {&groups.world(), &groups.dp()})
    if (!all_reduce_sum_correct(*g)) bad = 1;
  bad = int(groups.world().all_reduce_value(int64_t(bad), parallel::ReduceOp::kMax));
  if (bad) problems.push_back("an all-reduce returned a wrong sum on some rank");
  for (parallel::Communicator* g : {&groups.world(), &groups.dp()}) {
    const std::string line = bandwidth_line(*g);
    say("comm: " + line);
  }

  // Checkpoint path: writable on every rank, and free space (rank 0's view).
  const std::string write_problem = probe_writable(opt.checkpoint_dir, rank);
  const int64_t write_bad = groups.world().all_reduce_value(int64_t(write_problem.empty() ? 0 : 1));
  if (!write_problem.empty()) std::fprintf(stderr, "brt-dist doctor: rank %d: %s\n", rank, write_problem.c_str());
  if (write_bad > 0)
    problems.push_back("checkpoint dir " + opt.checkpoint_dir + " not writable on " + std::to_string(write_bad) +
                       " rank(s)");
  std::error_code ec;
  const auto space = std::filesystem::space(opt.checkpoint_dir, ec);
  if (rank == 0) {
    if (ec) {
      problems.push_back("cannot read free space at " + opt.checkpoint_dir + ": " + ec.message());
    } else {
      const double free_gb = double(space.available) / 1e9;
      std::printf("disk: %.1f GB free at %s (threshold %.1f GB)\n", free_gb, opt.checkpoint_dir.c_str(),
                  opt.min_free_gb);
      if (free_gb < opt.min_free_gb)
        problems.push_back("only " + std::to_string(free_gb) + " GB free at " + opt.checkpoint_dir);
    }
    const kernels::GemmPeak peak = kernels::measure_sgemm_peak(1024, 3);
    std::printf("sgemm peak (rank 0, %d threads, %d^3): %.1f GFLOP/s\n", peak.threads, peak.size, peak.gflops);
  }
  const int64_t n_problems = groups.world().all_reduce_value(int64_t(problems.size()), parallel::ReduceOp::kMax);
  if (rank == 0) {
    for (const auto& p : problems) std::printf("PROBLEM: %s\n", p.c_str());
    std::printf("doctor: %s\n", n_problems == 0 ? "all checks passed" : "problems found");
  }
  std::fflush(stdout);
  return n_problems == 0 ? 0 : 1;
}

}  // namespace

int command_doctor(int argc, char** argv) {
  const CommandLine cl = parse_command_line(argc, argv, {{"checkpoint-dir", "checkpoint.dir"}});
  DoctorOptions opt;
  if (!cl.positional.empty())
    throw std::invalid_argument("command line: unexpected argument '" + cl.positional[0] + "'");
  for (const auto& o : cl.overrides) {
    if (o.rfind("checkpoint.dir=", 0) == 0)
      opt.checkpoint_dir = o.substr(15);
    else
      throw std::invalid_argument("command line: doctor takes no config key '" + o + "'");
  }
  for (const auto& [flag, value] : cl.flags) {
    if (flag == "min-free-gb")
      opt.min_free_gb = std::stod(value);
    else
      throw std::invalid_argument("command line: unknown flag --" + flag);
  }
  return parallel::run_mpi_main(argc, argv, [&](parallel::MpiSession& session) { return run_doctor(session, opt); });
}

}  // namespace brt::launch
