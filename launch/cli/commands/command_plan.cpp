// `brt-dist plan CONFIG --cluster CLUSTER.toml --global-batch G [--dp N] [--tp N] [--measured
// METRICS.jsonl] [key=value ...]`: every (DP, TP, ZeRO, micro-batch) layout of
// the cluster with predicted memory per device and step time, best first (launch/plan/planner.h);
// with --measured, the predicted step time of the chosen layout next to the run's measured one.
// `brt-dist plan CONFIG --device h100|h200 --global-batch G ...`: the same on one node of 8 such
// GPUs, or with --cluster, that file with its `device` set (launch/plan/counted_step.h).
// `brt-dist plan CONFIG --measure-rates OUT.toml [--device cpu|cuda] [--precision P]
// [--seconds S]`: times this device's kernel classes at the config's shapes
// and writes a one-device cluster file with them (launch/plan/plan_rates.h).
// Exit status: 0 when a runnable layout fits, 3 when none does (or the layout picked with
// --dp/--tp does not), 2 on a bad command line, 1 on other bad input (a config, a cluster file).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/sharding/context_parallel.h"
#include "core/param_count.h"
#include "core/tp_split.h"
#include "data/output_file.h"
#include "launch/cli/cli.h"
#include "launch/cli/commands/commands.h"
#include "launch/config/config.h"
#include "launch/plan/plan_rates.h"
#include "launch/plan/planner.h"
#include "launch/run/device_backend.h"

namespace brt::launch {

namespace {

constexpr int kNoLayoutFits = 3;


int parse_positive(const std::string& text, const std::string& flag) {
  return int(parse_int_flag(flag, text, 1, std::numeric_limits<int>::max()));
}

// --measure-rates: time the kernel classes on the run's backend, write the cluster file
// through a checked .tmp (an existing file is replaced only by a complete one).
int measure_rates_command(const std::string& config_path, const RunConfig& config,
                          const std::string& out_path, double seconds_each) {
  const int gpu = config.train.device == "cuda" ? 0 : -1;
  validate_device_settings(config.train, gpu, 0);
  core::ModelConfig m = config.model;
  m.resolve();
  const int streams = config.train.batch;
  const std::string device = run_device_description(config.train, gpu);
  std::printf("plan: measuring kernel-class rates on %s at the shapes of %s (%d streams x %d tokens, "
              "D %d, F %d, W %d, %d x %d heads), about %.0f s...\n",
              device.c_str(), config_path.c_str(), streams, m.seq_len, m.d_model, m.d_ff, m.window,
              m.heads, m.head_dim, 3 * seconds_each + 1);
  std::fflush(stdout);
  auto backend = make_run_backend<float>(config.train, gpu, m, streams);
  const MeasuredRates r = measure_rates(*backend, m, streams, seconds_each);
  const std::string text =
      rates_cluster_toml(r, device, run_device_memory_gb(config.train, gpu), config_path, streams);
  data::write_file_atomically(out_path, text);  // checked; the reason named (data/output_file.h)
  std::printf("plan: gemm %.2f GFLOP/s, attention %.2f GFLOP/s (%.2f of gemm), memory %.2f GB/s "
              "in %.1f s; wrote %s\n",
              r.gemm_gflops, r.attention_gflops, r.attention_gflops / r.gemm_gflops, r.memory_gbps,
              r.seconds, out_path.c_str());
  return 0;
}

// The flags of `brt-dist plan`.
struct PlanFlags {
  std::string cluster_path, rates_path, measured_path;
  std::string device;  // --device h100|h200 when planning (not measuring)
  int global_batch = 0, want_dp = 0, want_tp = 0, want_cp = 0;
  double seconds_each = 1.0;
  // The layout --dp/--tp/--cp pick (0: any).
  bool picks(const Layout& l) const {
    return (!want_dp || l.dp == want_dp) && (!want_tp || l.tp == want_tp) && (!want_cp || l.cp == want_cp);
  }
};

PlanFlags plan_flags(const CommandLine& cl) {
  PlanFlags f;
  for (const auto& [flag, value] : cl.flags) {
    if (flag == "cluster")
      f.cluster_path = value;
    else if (flag == "global-batch")
      f.global_batch = parse_positive(value, flag);
    else if (flag == "dp")
      f.want_dp = parse_positive(value, flag);
    else if (flag == "tp")
      f.want_tp = parse_positive(value, flag);
    else if (flag == "cp")
      f.want_cp = parse_positive(value, flag);
    else if (flag == "measure-rates")
      f.rates_path = value;
    else if (flag == "measured")
      f.measured_path = value;
    else if (flag == "seconds")
      f.seconds_each = parse_double_flag(flag, value, Range::above(0));
    else
      throw UsageError("command line: unknown flag --" + flag + " (see brt-dist plan --help)");
  }
  return f;
}

// --measured: the predicted step time of the layout the run used next to its measured one.
void print_measured(const std::vector<LayoutPlan>& plans, const PlanFlags& flags, int seq_len) {
  const LayoutPlan* chosen = nullptr;
  for (const auto& p : plans)
    if (flags.picks(p.layout)) {
      chosen = &p;
      break;
    }
  if (chosen == nullptr) throw std::invalid_argument("--measured: no layout with the --dp/--tp/--cp given to compare with");
  const double tokens_per_s = median_tokens_per_s(flags.measured_path);
  const double measured_s = double(flags.global_batch) * seq_len / tokens_per_s;
  std::printf("\npredicted vs measured (DP %d, TP %d, B %d): predicted step %.4f s (%.0f tokens/s), "
              "measured %.4f s (%.0f tokens/s, median of %s); measured / predicted = %.2f\n",
              chosen->layout.dp, chosen->layout.tp, chosen->layout.micro_batch, chosen->time.total(),
              chosen->tokens_per_s, measured_s, tokens_per_s, flags.measured_path.c_str(),
              measured_s / chosen->time.total());
}

// 0 when a runnable layout fits (the one --dp/--tp pick, when given); else kNoLayoutFits, saying why.
// Why no layout has the --tp / --cp asked for: the model cannot split so, or the degrees do not
// divide the cluster's devices and the global batch.
std::string missing_layout_reason(const core::ModelConfig& model, const PlanFlags& flags, const ClusterSpec& cluster) {
  if (flags.want_cp)
    if (auto p = core::context_parallel_problem(model, flags.want_cp); !p.empty()) return p;
  if (flags.want_tp)
    if (auto p = core::tensor_parallel_split_problem(model, flags.want_tp); !p.empty()) return p;
  return "that layout does not exist for this cluster (" + std::to_string(cluster.world()) +
         " devices = DP × TP × CP) and global batch (a whole number of streams per DP rank)";
}

int plan_status(const std::vector<LayoutPlan>& plans, const PlanFlags& flags, const ClusterSpec& cluster,
                const core::ModelConfig& model) {
  if (flags.want_dp || flags.want_tp || flags.want_cp) {
    for (const auto& p : plans)
      if (flags.picks(p.layout) && p.fits) return 0;
    std::string why = missing_layout_reason(model, flags, cluster);
    for (const auto& p : plans)
      if (flags.picks(p.layout)) {
        why = p.note;
        break;
      }
    std::fprintf(stderr, "brt-dist plan: error: no layout with%s%s%s fits: %s\n",
                 flags.want_dp ? (" DP " + std::to_string(flags.want_dp)).c_str() : "",
                 flags.want_tp ? (" TP " + std::to_string(flags.want_tp)).c_str() : "",
                 flags.want_cp ? (" CP " + std::to_string(flags.want_cp)).c_str() : "", why.c_str());
    return kNoLayoutFits;
  }
  if (plans.front().fits && plans.front().runnable) return 0;
  int64_t smallest = plans.front().memory.total() + plans.front().workspace;
  for (const auto& p : plans) smallest = std::min(smallest, p.memory.total() + p.workspace);
  std::fprintf(stderr,
               "brt-dist plan: error: no runnable layout fits in %.1f GB per device (smallest needs %.2f GB); "
               "lower train.batch via --global-batch, add devices, or use a smaller config\n",
               cluster.gpu_memory_gb, double(smallest) / 1e9);
  return kNoLayoutFits;
}

// --device when planning names the planner's device (h100, h200), not train.device (cpu|cuda,
// which --measure-rates times on): it is taken out of the overrides. An --device given as a
// train.device word while planning stays an override (planning does not read it).
std::string take_planner_device(CommandLine& cl) {
  if (!cl.alias_of_key.count("train.device")) return "";
  for (auto it = cl.overrides.begin(); it != cl.overrides.end(); ++it) {
    if (it->rfind("train.device=", 0) != 0) continue;
    const std::string value = it->substr(std::string("train.device=").size());
    if (value == "cpu" || value == "cuda") return "";
    cl.overrides.erase(it);
    try {
      return device_rates(value).name;
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("command line: --device: ") + e.what() +
                       " (planning); cpu or cuda with --measure-rates");
    }
  }
  return "";
}

// The cluster planned for: --cluster's file (its device replaced by --device's), or one node of
// --device's GPUs; and how the header names it.
ClusterSpec planned_cluster(const PlanFlags& flags, std::string& name) {
  if (flags.cluster_path.empty()) {
    name = "one node of 8 " + flags.device + " (--device " + flags.device + ")";
    return device_node_cluster(flags.device);
  }
  ClusterSpec cluster = load_cluster(flags.cluster_path);
  name = flags.cluster_path;
  if (!flags.device.empty()) {
    cluster.device = flags.device;
    name += ", device " + flags.device + " (--device)";
  }
  return cluster;
}

}  // namespace

int command_plan(int argc, char** argv) {
  CommandLine cl = parse_command_line(argc, argv, {{"device", "train.device"}, {"precision", "train.precision"}});
  if (cl.positional.size() != 1)
    throw UsageError(
        "usage: brt-dist plan CONFIG --cluster CLUSTER.toml --global-batch G [--dp N] [--tp N] [--cp N] "
        "[--measured METRICS.jsonl] [key=value ...]\n"
        "       brt-dist plan CONFIG --measure-rates OUT.toml [--device cpu|cuda] [--precision P] "
        "[--seconds S]");
  PlanFlags flags = plan_flags(cl);
  if (flags.rates_path.empty()) flags.device = take_planner_device(cl);
  if (!flags.rates_path.empty()) {
    const std::string config_path = resolve_config_path(cl.positional[0]);
    return measure_rates_command(
        config_path, with_command_line_config(cl, [&] { return load_run_config(config_path, cl.overrides); }),
        flags.rates_path, flags.seconds_each);
  }
  if (flags.cluster_path.empty() && flags.device.empty())
    throw UsageError("command line: --cluster CLUSTER.toml (or --device h100|h200) is required");
  if (flags.global_batch == 0) throw UsageError("command line: --global-batch G (streams) is required");
  const std::string config_path = resolve_config_path(cl.positional[0]);
  const RunConfig config = with_command_line_config(cl, [&] { return load_run_config(config_path, cl.overrides); });
  std::string cluster_name;
  const ClusterSpec cluster = planned_cluster(flags, cluster_name);
  PlanOptions options;
  options.bucket_mb = config.train.bucket_mb;
  options.bf16 = config.train.precision == "bf16";
  const auto plans = plan_layouts(config.model, config.optim, cluster, flags.global_batch, options);
  core::ModelConfig m = config.model;
  m.resolve();
  std::printf("plan: %s (%s, %d layers, %.2fM parameters, optimizer %s), global batch %d streams of %d tokens\n",
              config_path.c_str(), m.variant.c_str(), m.layers, double(core::count_parameters(m)) / 1e6,
              core::to_string(config.optim.kind), flags.global_batch, m.seq_len);
  std::printf("cluster: %s — %d node(s) × %d device(s), %.1f GB, %.0f GFLOP/s, %.1f / %.1f GB/s intra/inter\n\n",
              cluster_name.c_str(), cluster.nodes, cluster.gpus_per_node, cluster.gpu_memory_gb,
              cluster.peak_gflops, cluster.intra_node_gbps, cluster.inter_node_gbps);
  std::fputs(format_plans(plans, cluster).c_str(), stdout);
  if (!flags.measured_path.empty()) print_measured(plans, flags, m.seq_len);
  return plan_status(plans, flags, cluster, m);
}

}  // namespace brt::launch
