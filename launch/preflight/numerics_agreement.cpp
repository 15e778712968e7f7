#include "launch/preflight/numerics_agreement.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "launch/preflight/config_agreement.h"
#include "launch/run/gpu_binding.h"
#include "parallel/launch_refused.h"
#include "parallel/mpi/mpi_communicator.h"
#include "parallel/mpi/mpi_session.h"

namespace brt::launch {

namespace {

std::string this_host() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

std::string differences_sentence(const NumericsAgreement& a) {
  return "the ranks' numerics differ — " + runtime::numerics_differences(a.groups) +
         ": results will differ from a one-process run in the last bits, and a resume is bit-exact only on the same "
         "numerics";
}

}  // namespace

runtime::Numerics local_numerics(int threads, int gpu_device) {
  runtime::Numerics n = runtime::cpu_numerics(threads);
  add_gpu_numerics(n, gpu_device);
  return n;
}

void inject_wrong_blas(runtime::Numerics& numerics) {
  for (auto& f : numerics.fields)
    if (f.key == "blas_check")
      f.value = "FAILED: sgemm NN 33x47x1000 is 1e+06 times its rounding bound off a reference (injected: wrongblas)";
  std::fprintf(stderr, "brt-dist: fault injected: wrongblas (this rank's BLAS self-check fails)\n");
}

NumericsAgreement agree_on_numerics(parallel::MpiSession& session, const runtime::Numerics& mine, bool deterministic,
                                    double timeout_s) {
  NumericsAgreement out;
  const std::string host = this_host();
  if (session.world_size() == 1) {
    out.groups.push_back({host, {0}, mine});
  } else {
    parallel::CommOptions options;
    options.timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
    options.monitor = &session.monitor();
    parallel::MpiCommunicator world(MPI_COMM_WORLD, "world (numerics check)", options);
    for (const RankConfig& t : distinct_texts(world, host + "\n" + mine.to_text())) {
      const size_t nl = t.canonical_text.find('\n');
      out.groups.push_back({t.canonical_text.substr(0, nl), t.world_ranks,
                            runtime::Numerics::from_text(t.canonical_text.substr(nl + 1))});
    }
  }
  out.agree = runtime::numerics_agree(out.groups);
  out.record = runtime::numerics_record(out.groups);
  for (const auto& g : out.groups)
    if (const std::string problem = runtime::blas_self_check_problem(g.numerics); !problem.empty())
      throw parallel::LaunchRefused("numerics: " + runtime::ranks_on_host(g) + ": " + problem + ". Nothing was started.");
  if (!out.agree && deterministic)
    throw parallel::LaunchRefused("train.deterministic=true, but " + differences_sentence(out) +
                                  ". Give every host the same environment (mpirun -x OPENBLAS_CORETYPE, Slurm's "
                                  "default --export=ALL) and the same libraries. Nothing was started.");
  return out;
}

std::string numerics_start_lines(const NumericsAgreement& a) {
  if (a.agree) {
    int ranks = 0;
    std::set<std::string> hosts;
    for (const auto& g : a.groups) {
      ranks += int(g.ranks.size());
      hosts.insert(g.host);
    }
    std::string line = "numerics: " + a.groups.front().numerics.summary();
    if (ranks > 1)
      line += " (the same on all " + std::to_string(ranks) + " ranks" +
              (hosts.size() > 1 ? ", " + std::to_string(hosts.size()) + " hosts" : "") + ")";
    return line;
  }
  std::string lines = "numerics: the ranks differ";
  for (const auto& g : a.groups) lines += "\n  " + runtime::ranks_on_host(g) + ": " + g.numerics.summary();
  return lines;
}

std::string numerics_warning(const NumericsAgreement& a) {
  if (a.agree) return "";
  return "warning: " + differences_sentence(a) +
         ". Give every host the same environment (mpirun -x OPENBLAS_CORETYPE, Slurm's default --export=ALL); "
         "train.deterministic=true refuses such a start";
}

}  // namespace brt::launch
