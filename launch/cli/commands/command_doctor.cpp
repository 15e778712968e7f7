// `brt-dist doctor [--checkpoint-dir DIR] [--data-dir DIR] [--min-free-gb G] [--min-link-gbps G]
// [--slow-link-ratio R] [--cluster-file FILE] [--timeout-s S]`:
// a preflight run under the real launcher (mpirun / srun --mpi=pmix). Rank 0 reports ranks ->
// hosts -> devices, the MPI library, NCCL, the BLAS build, a short all-reduce bandwidth test per
// process group (docs/parallelism.md), free disk at the checkpoint path and the sgemm peak; across
// hosts (launch/preflight/doctor_cluster.h) the same brt-dist and MPI everywhere, the checkpoint dir as one
// writable directory of every host, the data dir's files on every host, and every host pair's
// latency and bandwidth (slow ones named; --cluster-file writes them for `brt-dist plan`). Exits
// 1 when a problem is found; a rank that cannot communicate ends the job through the collective
// timeout or the watchdog (status 124, parallel/communicator.h) or the launcher.
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/output_file.h"
#include "kernels/cpu/cpu_backend.h"
#include "launch/cli/cli.h"
#include "launch/cli/commands/commands.h"
#include "launch/process/checkpoint_space.h"
#include "launch/cli/version.h"
#include "launch/preflight/doctor_cluster.h"
#include "launch/preflight/host_memory.h"
#include "launch/preflight/numerics_agreement.h"
#include "launch/run/gpu_binding.h"
#include "parallel/comm_benchmark.h"
#include "parallel/mpi/launch_env.h"
#include "parallel/launch_refused.h"
#include "parallel/mpi/mpi_session.h"
#include "parallel/process_groups.h"
#include "runtime/gemm_peak.h"

namespace brt::launch {

namespace {

constexpr int kHostChars = 256;

struct DoctorOptions {
  std::string checkpoint_dir = ".";
  std::string data_dir;       // "": not checked
  std::string cluster_file;   // "": not written
  double min_free_gb = 1.0;
  double min_link_gbps = 0;   // 0: no floor
  double slow_link_ratio = 4;
  double timeout_s = 60;
};

// Across hosts (launch/preflight/doctor_cluster.h): software, the checkpoint and data directories, the
// links between hosts and the cluster file. Problems are added to `problems` on world rank 0.
void check_across_hosts(parallel::MpiSession& session, const DoctorOptions& opt, std::vector<std::string>& problems) {
  const std::vector<HostGroup> hosts = group_by_host(gather_hosts(MPI_COMM_WORLD));
  auto add = [&problems](const std::vector<std::string>& found) {
    problems.insert(problems.end(), found.begin(), found.end());
  };
  add(check_same_software(MPI_COMM_WORLD, hosts, version()));
  add(check_shared_directory(MPI_COMM_WORLD, hosts, opt.checkpoint_dir, "checkpoint dir", session.monitor()));
  if (!opt.data_dir.empty()) add(check_same_contents(MPI_COMM_WORLD, hosts, opt.data_dir, "data dir"));
  if (hosts.size() < 2) {
    if (!opt.cluster_file.empty() && session.world_rank() == 0)
      problems.push_back("--cluster-file " + opt.cluster_file + " was not written: the job runs on one host, and the "
                         "file records the links between hosts; run doctor under mpirun or srun across the job's hosts");
    return;
  }
  const std::vector<LinkMeasure> links = measure_host_links(MPI_COMM_WORLD, hosts, session.monitor());
  if (session.world_rank() != 0) return;
  if (const std::string slow = slow_links(links, opt.slow_link_ratio, opt.min_link_gbps); !slow.empty())
    problems.push_back(slow);
  if (opt.cluster_file.empty()) return;
  std::string existing;
  if (std::ifstream in(opt.cluster_file); in) existing.assign(std::istreambuf_iterator<char>(in), {});
  size_t per_host = 0;
  for (const HostGroup& h : hosts) per_host = std::max(per_host, h.ranks.size());
  const MemoryBudget memory = host_memory_budget();
  const double memory_gb = memory.bytes > 0 ? double(memory.bytes) / 1e9 / double(per_host) : 1;
  const double peak = existing.empty() ? runtime::measure_sgemm_peak(1024, 3).gflops : 0;
  try {
    data::write_file_atomically(opt.cluster_file, cluster_file_with_links(existing, links, int(hosts.size()),
                                                                          int(per_host), peak, memory_gb));
  } catch (const std::exception& e) {
    problems.push_back("--cluster-file " + opt.cluster_file + " could not be written: " + e.what());
    return;
  }
  std::printf("cluster file: %s %s with the measured inter_node_gbps (for brt-dist plan --cluster)\n",
              existing.empty() ? "wrote" : "updated", opt.cluster_file.c_str());
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

// Ranks -> hosts -> devices, printed by world rank 0. Each rank binds its GPU by local rank (as
// train does) and reports what it got.
void print_rank_map(const parallel::LaunchInfo& info, int rank, int size) {
  char host[kHostChars] = {};
  std::snprintf(host, sizeof host, "%s", info.host.c_str());
  std::vector<char> hosts(size_t(size) * kHostChars);
  std::vector<int> local_ranks(static_cast<size_t>(size), 0);
  MPI_Gather(host, kHostChars, MPI_CHAR, hosts.data(), kHostChars, MPI_CHAR, 0, MPI_COMM_WORLD);
  MPI_Gather(&info.local_rank, 1, MPI_INT, local_ranks.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  const GpuBinding gpu = bind_gpu_for_local_rank(info.local_rank);
  char device[kHostChars] = {};
  std::snprintf(device, sizeof device, "%s%s", gpu.device >= 0 ? ("GPU " + std::to_string(gpu.device) + ": ").c_str() : "",
                gpu.description.c_str());
  std::vector<char> devices(size_t(size) * kHostChars);
  MPI_Gather(device, kHostChars, MPI_CHAR, devices.data(), kHostChars, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank != 0) return;
  std::printf("brt-dist doctor: %d rank(s), launcher %s\n", size, info.launcher.c_str());
  for (int r = 0; r < size; ++r)
    std::printf("  rank %d -> host %s (local rank %d) -> device: %s\n", r, &hosts[size_t(r) * kHostChars],
                local_ranks[size_t(r)], &devices[size_t(r) * kHostChars]);
}

// The numerics fingerprint of every host (launch/preflight/numerics_agreement.h): one line per host
// and fingerprint, the warning when ranks differ, a failed BLAS self-check as a problem.
template <typename Say>
void check_numerics(parallel::MpiSession& session, const parallel::LaunchInfo& info, double timeout_s,
                    std::vector<std::string>& problems, const Say& say) {
  const GpuBinding gpu = bind_gpu_for_local_rank(info.local_rank);
  try {
    const NumericsAgreement numerics =
        agree_on_numerics(session, local_numerics(omp_get_max_threads(), gpu.device), false, timeout_s);
    for (const auto& g : numerics.groups) say("numerics: " + runtime::ranks_on_host(g) + ": " + g.numerics.summary());
    if (const std::string warning = numerics_warning(numerics); !warning.empty()) say(warning);
  } catch (const parallel::LaunchRefused& e) {  // a failed BLAS self-check, the same on every rank
    if (session.world_rank() == 0) problems.push_back(e.what());
  }
}

// Communication: correctness first (a wrong sum is a problem), then bandwidth per group.
template <typename Say>
void check_communication(const parallel::ProcessGroups& groups, std::vector<std::string>& problems, const Say& say) {
  int bad = 0;
  for (parallel::Communicator* g : {&groups.world(), &groups.dp_cp()})
    if (!all_reduce_sum_correct(*g)) bad = 1;
  bad = int(groups.world().all_reduce_value(int64_t(bad), parallel::ReduceOp::kMax));
  if (bad) problems.push_back("an all-reduce returned a wrong sum on some rank");
  for (parallel::Communicator* g : {&groups.world(), &groups.dp_cp()}) say("comm: " + bandwidth_line(*g));
}

int run_doctor(parallel::MpiSession& session, const DoctorOptions& opt) {
  const int rank = session.world_rank(), size = session.world_size();
  const parallel::LaunchInfo info = parallel::query_launch_info(MPI_COMM_WORLD, parallel::process_env());
  parallel::MonitorSettings watch = session.monitor().settings();
  watch.timeout_s = opt.timeout_s;
  watch.timeout_key = "--timeout-s";
  session.monitor().configure(watch);
  parallel::CommOptions comm;
  comm.timeout = std::chrono::milliseconds(int64_t(opt.timeout_s * 1000));
  comm.monitor = &session.monitor();
  const parallel::ProcessGroups groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 1, comm);
  std::vector<std::string> problems;
  auto say = [rank](const std::string& s) {
    if (rank == 0) std::printf("%s\n", s.c_str());
  };

  print_rank_map(info, rank, size);

  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(mpi_version, &len);
  std::string mpi_line(mpi_version, size_t(len));
  if (const auto nl = mpi_line.find('\n'); nl != std::string::npos) mpi_line.resize(nl);
  say("MPI: " + mpi_line + " (MPI " + std::to_string(MPI_VERSION) + "." + std::to_string(MPI_SUBVERSION) + ")");
  say("NCCL: " + nccl_version_description());
  say("BLAS: " + kernels::cpu::blas_description());
  check_numerics(session, info, opt.timeout_s, problems, say);

  check_communication(groups, problems, say);

  // Across hosts: software, the checkpoint dir (one writable directory of every host), the data
  // dir, the links. Then free space (rank 0's view).
  check_across_hosts(session, opt, problems);
  // Free space where the checkpoint dir is (or, not yet created, would be made), as train checks it.
  const int64_t free_bytes = free_bytes_at(opt.checkpoint_dir);
  if (rank == 0) {
    if (free_bytes < 0) {
      problems.push_back("cannot read free space at " + opt.checkpoint_dir);
    } else {
      const double free_gb = double(free_bytes) / 1e9;
      std::printf("disk: %.1f GB free at %s (threshold %.1f GB)\n", free_gb, opt.checkpoint_dir.c_str(),
                  opt.min_free_gb);
      if (free_gb < opt.min_free_gb)
        problems.push_back("only " + std::to_string(free_gb) + " GB free at " + opt.checkpoint_dir);
    }
    const runtime::GemmPeak peak = runtime::measure_sgemm_peak(1024, 3);
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
  reject_extra_arguments(cl, 0);
  for (const auto& o : cl.overrides) {
    if (o.rfind("checkpoint.dir=", 0) == 0)
      opt.checkpoint_dir = o.substr(15);
    else
      throw UsageError("command line: doctor takes no config key '" + o + "'");
  }
  reject_unknown_flags(cl, {"min-free-gb", "data-dir", "cluster-file", "min-link-gbps", "slow-link-ratio", "timeout-s"});
  opt.min_free_gb = double_flag(cl, "min-free-gb", opt.min_free_gb, Range::at_least(0));
  opt.data_dir = flag_or(cl, "data-dir", "");
  opt.cluster_file = flag_or(cl, "cluster-file", "");
  opt.min_link_gbps = double_flag(cl, "min-link-gbps", opt.min_link_gbps, Range::at_least(0));
  opt.slow_link_ratio = double_flag(cl, "slow-link-ratio", opt.slow_link_ratio, Range::above(1));
  opt.timeout_s = double_flag(cl, "timeout-s", opt.timeout_s, Range::above(0));
  return parallel::run_mpi_main(argc, argv, [&](parallel::MpiSession& session) { return run_doctor(session, opt); });
}

}  // namespace brt::launch
