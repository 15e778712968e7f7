// `brt-dist plan CONFIG --cluster CLUSTER.toml --global-batch G [--dp N] [--tp N] [key=value ...]`
// (issue 8 item 4): every (DP, TP, ZeRO, micro-batch) layout of the cluster with predicted memory
// per device and step time, best first (launch/planner.h). Exit status: 0 when a runnable layout
// fits, 3 when none does (or the layout picked with --dp/--tp does not), 1 on bad input.
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/param_count.h"
#include "launch/cli.h"
#include "launch/commands.h"
#include "launch/config.h"
#include "launch/planner.h"

namespace brt::launch {

namespace {

constexpr int kNoLayoutFits = 3;


int parse_positive(const std::string& text, const std::string& flag) {
  size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || v < 1)
    throw std::invalid_argument("command line: --" + flag + " needs a positive whole number, got '" + text + "'");
  return v;
}

}  // namespace

int command_plan(int argc, char** argv) {
  const CommandLine cl = parse_command_line(argc, argv, {});
  if (cl.positional.size() != 1)
    throw std::invalid_argument(
        "usage: brt-dist plan CONFIG --cluster CLUSTER.toml --global-batch G [--dp N] [--tp N] [key=value ...]");
  std::string cluster_path;
  int global_batch = 0, want_dp = 0, want_tp = 0;
  for (const auto& [flag, value] : cl.flags) {
    if (flag == "cluster")
      cluster_path = value;
    else if (flag == "global-batch")
      global_batch = parse_positive(value, flag);
    else if (flag == "dp")
      want_dp = parse_positive(value, flag);
    else if (flag == "tp")
      want_tp = parse_positive(value, flag);
    else
      throw std::invalid_argument("command line: unknown flag --" + flag);
  }
  if (cluster_path.empty()) throw std::invalid_argument("command line: --cluster CLUSTER.toml is required");
  if (global_batch == 0) throw std::invalid_argument("command line: --global-batch G (streams) is required");
  const std::string config_path = resolve_config_path(cl.positional[0]);
  const RunConfig config = load_run_config(config_path, cl.overrides);
  const ClusterSpec cluster = load_cluster(cluster_path);
  PlanOptions options;
  options.bucket_mb = config.train.bucket_mb;
  const auto plans = plan_layouts(config.model, config.optim, cluster, global_batch, options);

  core::ModelConfig m = config.model;
  m.resolve();
  std::printf("plan: %s (%s, %d layers, %.2fM parameters, optimizer %s), global batch %d streams of %d tokens\n",
              config_path.c_str(), m.variant.c_str(), m.layers, double(core::count_parameters(m)) / 1e6,
              core::to_string(config.optim.kind), global_batch, m.seq_len);
  std::printf("cluster: %s — %d node(s) × %d device(s), %.1f GB, %.0f GFLOP/s, %.1f / %.1f GB/s intra/inter\n\n",
              cluster_path.c_str(), cluster.nodes, cluster.gpus_per_node, cluster.gpu_memory_gb,
              cluster.peak_gflops, cluster.intra_node_gbps, cluster.inter_node_gbps);
  std::fputs(format_plans(plans, cluster).c_str(), stdout);

  if (want_dp || want_tp) {
    for (const auto& p : plans) {
      if ((want_dp && p.layout.dp != want_dp) || (want_tp && p.layout.tp != want_tp)) continue;
      if (p.fits) return 0;
    }
    std::fprintf(stderr, "brt-dist plan: error: no layout with%s%s fits: %s\n",
                 want_dp ? (" DP " + std::to_string(want_dp)).c_str() : "",
                 want_tp ? (" TP " + std::to_string(want_tp)).c_str() : "",
                 [&] {
                   for (const auto& p : plans)
                     if ((!want_dp || p.layout.dp == want_dp) && (!want_tp || p.layout.tp == want_tp))
                       return p.note;
                   return std::string("that layout does not exist for this cluster and global batch");
                 }()
                     .c_str());
    return kNoLayoutFits;
  }
  if (!plans.front().fits || !plans.front().runnable) {
    std::fprintf(stderr,
                 "brt-dist plan: error: no runnable layout fits in %.1f GB per device (smallest needs %.2f GB); "
                 "lower train.batch via --global-batch, add devices, or use a smaller config\n",
                 cluster.gpu_memory_gb, [&] {
                   int64_t best = plans.front().memory.total();
                   for (const auto& p : plans) best = std::min(best, p.memory.total());
                   return double(best) / 1e9;
                 }());
    return kNoLayoutFits;
  }
  return 0;
}

}  // namespace brt::launch
