// Cluster file, step-time model and layout enumeration of the planner (launch/plan/planner.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <toml++/toml.h>

#include "core/sharding/context_parallel.h"
#include "core/flops.h"
#include "core/tp_split.h"
#include "launch/plan/backend_workspace.h"
#include "launch/plan/planner.h"

namespace brt::launch {

namespace {

std::string cluster_error(const std::string& source, const std::string& what) {
  return "cluster file " + source + ": " + what;
}

double read_number(const toml::table& t, const std::string& source, const char* key, bool required,
                   double fallback) {
  const toml::node* node = t.get(key);
  if (node == nullptr) {
    if (required)
      throw std::invalid_argument(cluster_error(source, std::string("missing field '") + key + "'"));
    return fallback;
  }
  if (auto v = node->value<double>()) {
    if (!(*v > 0))
      throw std::invalid_argument(cluster_error(source, std::string("field '") + key + "' must be > 0"));
    return *v;
  }
  throw std::invalid_argument(cluster_error(source, std::string("field '") + key + "' must be a number"));
}

// More devices than any cluster the planner is for; it also keeps nodes × gpus_per_node an int.
constexpr int64_t kMaxClusterDevices = int64_t(1) << 20;

int read_count(const toml::table& t, const std::string& source, const char* key) {
  const double v = read_number(t, source, key, true, 0);
  if (v != std::floor(v))
    throw std::invalid_argument(cluster_error(source, std::string("field '") + key + "' must be a whole number"));
  if (v > double(kMaxClusterDevices)) {
    char shown[40];
    std::snprintf(shown, sizeof shown, "%.0f", v);
    throw std::invalid_argument(cluster_error(source, std::string("field '") + key + "' = " + shown +
                                                          " is more than " + std::to_string(kMaxClusterDevices) +
                                                          " (the most devices brt-dist plans for)"));
  }
  return int(v);
}

std::string human_bytes(double bytes) {
  char buf[32];
  if (bytes >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

}  // namespace

ClusterSpec parse_cluster(std::string_view text, const std::string& source) {
  toml::table t;
  try {
    t = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw std::invalid_argument(cluster_error(source, std::string("not valid TOML: ") +
                                                          std::string(e.description())));
  }
  static constexpr const char* kKnown[] = {"gpus_per_node", "nodes", "gpu_memory_gb", "peak_tflops",
                                           "peak_gflops", "intra_node_gbps", "inter_node_gbps",
                                           "alpha_us", "efficiency", "gemm_tflops",
                                           "attention_tflops", "memory_gbps", "device"};
  for (const auto& [key, node] : t) {
    (void)node;
    if (std::find(std::begin(kKnown), std::end(kKnown), key.str()) == std::end(kKnown))
      throw std::invalid_argument(cluster_error(source, "unknown field '" + std::string(key.str()) + "'"));
  }
  ClusterSpec c;
  c.gpus_per_node = read_count(t, source, "gpus_per_node");
  c.nodes = read_count(t, source, "nodes");
  if (int64_t(c.nodes) * c.gpus_per_node > kMaxClusterDevices)
    throw std::invalid_argument(cluster_error(
        source, "nodes × gpus_per_node = " + std::to_string(int64_t(c.nodes) * c.gpus_per_node) + " devices, more than " +
                    std::to_string(kMaxClusterDevices) + " (the most brt-dist plans for)"));
  c.gpu_memory_gb = read_number(t, source, "gpu_memory_gb", true, 0);
  if (t.contains("peak_tflops"))
    c.peak_gflops = 1e3 * read_number(t, source, "peak_tflops", true, 0);
  else if (t.contains("peak_gflops"))
    c.peak_gflops = read_number(t, source, "peak_gflops", true, 0);
  else
    throw std::invalid_argument(cluster_error(source, "missing field 'peak_tflops' (or 'peak_gflops')"));
  c.intra_node_gbps = read_number(t, source, "intra_node_gbps", true, 0);
  c.inter_node_gbps = read_number(t, source, "inter_node_gbps", true, 0);
  c.alpha_us = read_number(t, source, "alpha_us", false, c.alpha_us);
  c.efficiency = read_number(t, source, "efficiency", false, c.efficiency);
  if (c.efficiency > 1)
    throw std::invalid_argument(cluster_error(source, "field 'efficiency' must be in (0, 1]"));
  if (const auto device = t["device"].value<std::string>()) {
    try {
      c.device = device_rates(*device).name;
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(cluster_error(source, std::string("field 'device': ") + e.what()));
    }
  }
  // Measured kernel-class rates: all or none.
  const bool any_rate = t.contains("gemm_tflops") || t.contains("attention_tflops") || t.contains("memory_gbps");
  if (any_rate) {
    for (const char* k : {"gemm_tflops", "attention_tflops", "memory_gbps"})
      if (!t.contains(k))
        throw std::invalid_argument(cluster_error(
            source, std::string("missing field '") + k +
                        "' (gemm_tflops, attention_tflops and memory_gbps go together)"));
    c.gemm_gflops = 1e3 * read_number(t, source, "gemm_tflops", true, 0);
    c.attention_gflops = 1e3 * read_number(t, source, "attention_tflops", true, 0);
    c.memory_gbps = read_number(t, source, "memory_gbps", true, 0);
  }
  return c;
}

ClusterSpec load_cluster(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) throw std::invalid_argument(cluster_error(path, "cannot open (no such file?)"));
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return parse_cluster(text, path);
}

ClusterSpec device_node_cluster(std::string_view device) {
  const DeviceRates r = device_rates(device);
  ClusterSpec c;
  c.gpus_per_node = 8;
  c.nodes = 1;
  c.gpu_memory_gb = r.memory_gb;
  c.peak_gflops = 1e3 * r.bf16_tflops;
  c.intra_node_gbps = r.nvlink_gbps;
  c.inter_node_gbps = r.nvlink_gbps;  // one node: no link leaves it
  c.device = r.name;
  return c;
}

double memory_bound_bytes(const MemoryPrediction& m) {
  return 4.0 * double(m.activations + m.backward_scratch) +
         2.0 * double(m.parameters + m.gradients + m.optimizer);
}

double ring_all_reduce_seconds(double bytes, int p, double bytes_per_s, double alpha_s, int buckets) {
  if (p <= 1) return 0.0;
  return buckets * alpha_s + 2.0 * (p - 1) / p * bytes / bytes_per_s;
}

std::vector<TpCollective> tp_collectives_per_step(const core::ModelConfig& cfg_in, int streams, int tp,
                                                  int elem_bytes) {
  if (tp <= 1) return {};
  core::ModelConfig c = cfg_in;
  c.resolve();
  const int64_t e = elem_bytes, B = streams, D = c.d_model, rows = B * c.seq_len;
  const int64_t R = B * c.state_size, Tb = c.blocks(), L = c.layers;
  int64_t recurrent = 0;
  for (int i = 0; i < c.layers; ++i) recurrent += c.is_recurrent_layer(i) ? 1 : 0;
  const bool lstm = c.gate == core::GateKind::kLSTM, dual = c.rec_config == core::RecurrentConfig::kDual;
  const int64_t x = rows * D * e;  // the replicated residual stream [B·N, D]
  std::vector<TpCollective> out;
  const auto add = [&out](char kind, int64_t bytes, int64_t count, const char* where) {
    if (count > 0) out.push_back({kind, bytes, count, where});
  };
  add('r', x, 1, "embedding forward (vocabulary-parallel lookup)");
  add('r', x, 2 * L, "attention forward (row-parallel Wo) and backward (dh of the column projections)");
  add('r', x, 2 * L, "MLP forward (row-parallel W2) and backward (dh of W1)");
  add('r', rows * 8, 3, "vocabulary-parallel cross-entropy: max, sum of exp, target logit (double)");
  add('r', x, 1, "output backward (dh before the final norm)");
  // State side of each recurrent layer, per block: Σ rows split over TP (sequence parallelism).
  const int64_t s = R * D * e, blocks = recurrent * Tb;
  add('g', s, blocks, "state forward: all-gather Σ_t");
  add('s', s, blocks, "state forward: reduce-scatter c·Wo_s");
  if (lstm) add('s', s, 2 * blocks * (dual ? 2 : 1), "state forward: LSTM gate pre-activations");
  if (dual) {
    add('g', s, blocks, "state forward: all-gather U");
    add('r', s, blocks, "state forward: dual MLP output (row-parallel W2)");
  }
  add('g', s, 2 * blocks, "state backward: all-gather du and Σ_t");
  if (lstm) add('g', s, 2 * blocks * (dual ? 2 : 1), "state backward: all-gather dz_f, dz_i");
  if (dual) add('g', s, 2 * blocks, "state backward: all-gather du2 and U");
  add('r', s, blocks * (dual ? 2 : 1), "state backward: dh of the projections (and the MLP)");
  if (!lstm) add('r', D * e, blocks * (dual ? 2 : 1), "state backward: fixed gate bias gradient, per block");
  return out;
}

double tp_step_seconds(const core::ModelConfig& cfg, int streams, int tp, double bytes_per_s, double alpha_s) {
  double seconds = 0;
  for (const TpCollective& c : tp_collectives_per_step(cfg, streams, tp))
    seconds += double(c.count) * (c.kind == 'r' ? ring_all_reduce_seconds(double(c.bytes), tp, bytes_per_s, alpha_s, 1)
                                                : alpha_s + (tp - 1.0) / tp * double(c.bytes) / bytes_per_s);
  return seconds;
}

namespace {

// The compute part of `plan`'s step: one rank's share of the step's `tokens_per_rank` (TP splits
// each token's FLOPs), at the measured kernel-class rates or at peak × efficiency.
void plan_compute_time(LayoutPlan& plan, const core::FlopBreakdown& flops, double tokens_per_rank,
                       const ClusterSpec& cluster) {
  const double flops_per_token = flops.training(), attention_per_token = 3.0 * flops.attention;
  const int tp = plan.layout.tp;
  if (cluster.has_rates()) {
    plan.time.gemm_s = (flops_per_token - attention_per_token) * tokens_per_rank / tp / (cluster.gemm_gflops * 1e9);
    plan.time.attention_s = attention_per_token * tokens_per_rank / tp / (cluster.attention_gflops * 1e9);
    plan.time.memory_s = memory_bound_bytes(plan.memory) / (cluster.memory_gbps * 1e9);
    plan.time.compute_s = plan.time.gemm_s + plan.time.attention_s + plan.time.memory_s;
  } else {
    plan.time.compute_s = flops_per_token * tokens_per_rank / tp / (cluster.peak_gflops * 1e9 * cluster.efficiency);
  }
}

}  // namespace

namespace {

// One layout's memory (the largest over its ZeRO-1 runs) and step time.
LayoutPlan plan_layout(const core::ModelConfig& cfg, const core::OptimConfig& optim, const ClusterSpec& cluster,
                       const core::FlopBreakdown& flops, int global_batch, const PlanOptions& options,
                       const Layout& layout) {
  const int world = cluster.world(), dp = layout.dp, tp = layout.tp, cp = layout.cp, B = layout.micro_batch;
  const int grad_ranks = dp * cp;  // the dp_cp group: gradients summed and ZeRO-1 owned over DP x CP
  const double alpha = cluster.alpha_us * 1e-6, capacity = cluster.gpu_memory_gb * 1e9;
  const double intra = cluster.intra_node_gbps * 1e9, inter = cluster.inter_node_gbps * 1e9;
  LayoutPlan plan;
  plan.layout = layout;
  const CountedModel counted = count_model_memory(cfg, B, 4, tp, cp);  // built once per layout
  for (int r = 0; r < (layout.zero ? grad_ranks : 1); ++r) {  // ZeRO-1 runs differ: take the largest
    const MemoryPrediction m = with_optimizer_state(counted, optim, grad_ranks, layout.zero, r);
    if (m.total() > plan.memory.total()) plan.memory = m;
  }
  if (!cluster.device.empty() && !cluster.has_rates()) {  // the step counted per component
    plan.counted = count_step(cfg, B, tp, cp, plan.memory, device_rates(cluster.device),
                              {options.bf16, optim.kind == core::OptimKind::kAdafactor, optim.min_dim_to_factor});
    plan.time.compute_s = plan.counted.compute_seconds();
  } else {
    plan_compute_time(plan, flops, double(B) * cfg.seq_len / cp, cluster);
  }
  // The dp_cp group is strided (docs/parallelism.md): it stays in a node only if the world does.
  const double dp_cp_bw = world <= cluster.gpus_per_node ? intra : inter;
  const double grad_bytes = double(plan.memory.gradients);
  const int buckets = std::max(1, int(std::ceil(grad_bytes / (options.bucket_mb * 1048576.0))));
  plan.time.dp_cp_grad_s = ring_all_reduce_seconds(grad_bytes, grad_ranks, dp_cp_bw, alpha, buckets);
  // ZeRO-1: each owner broadcasts its run (≈ 1/DP of the weights) linearly to the others.
  if (layout.zero)
    plan.time.zero_bcast_s = grad_ranks * (grad_ranks - 1) * alpha + (grad_ranks - 1.0) / grad_ranks * grad_bytes / dp_cp_bw;
  if (tp > 1) {  // the TP group is consecutive ranks: within a node if tp fits in one
    const double tp_bw = tp <= cluster.gpus_per_node ? intra : inter;
    plan.time.tp_s = tp_step_seconds(cfg, B, tp, tp_bw, alpha);
  }
  if (cp > 1) {  // the cp group spans tp·cp consecutive ranks
    const double cp_bw = tp * cp <= cluster.gpus_per_node ? intra : inter;
    plan.time.cp_s = cp_step_seconds(cfg, B, tp, cp, cp_bw, alpha);
  }
  plan.tokens_per_s = double(global_batch) * cfg.seq_len / plan.time.total();
  core::ModelConfig chunk = core::chunk_config(cfg, cp);  // the backend's workspace follows the chunk
  plan.workspace = cuda_backend_workspace(chunk, B, options.bf16, tp, plan.memory.parameters).total();
  const double needed = double(plan.memory.total() + plan.workspace);
  if (needed > capacity) {
    plan.fits = false;
    plan.note = "does not fit: needs " + human_bytes(needed) + " per device, has " + human_bytes(capacity);
  }
  return plan;
}

}  // namespace

std::vector<LayoutPlan> plan_layouts(const core::ModelConfig& cfg_in, const core::OptimConfig& optim,
                                     const ClusterSpec& cluster, int global_batch,
                                     const PlanOptions& options) {
  core::ModelConfig cfg = cfg_in;
  cfg.resolve();
  const int world = cluster.world();
  if (world < 1) throw std::invalid_argument("cluster has no devices");
  if (global_batch < 1) throw std::invalid_argument("--global-batch must be >= 1");
  const core::FlopBreakdown flops = core::flops_per_token(cfg);
  std::vector<LayoutPlan> plans;
  std::string no_dp_reason;
  for (int tp = 1; tp <= world; ++tp) {
    if (world % tp != 0) continue;
    if (!core::tensor_parallel_split_problem(cfg, tp).empty()) continue;  // a size TP splits does not divide
    for (int cp = 1; cp <= world / tp; ++cp) {
      if ((world / tp) % cp != 0 || !core::context_parallel_problem(cfg, cp).empty()) continue;
      const int dp = world / (tp * cp);
      if (global_batch % dp != 0) {
        no_dp_reason += " DP " + std::to_string(dp) + " (TP " + std::to_string(tp) + ", CP " + std::to_string(cp) + ")";
        continue;
      }
      for (int zero = 0; zero <= (dp * cp > 1 ? 1 : 0); ++zero)
        plans.push_back(plan_layout(cfg, optim, cluster, flops, global_batch, options,
                                    Layout{dp, tp, zero == 1, global_batch / dp, cp}));
    }
  }
  if (plans.empty())
    throw std::invalid_argument("no layout of " + std::to_string(world) + " devices divides --global-batch " +
                                std::to_string(global_batch) + " into whole streams per DP rank (tried" +
                                no_dp_reason + ")");
  std::stable_sort(plans.begin(), plans.end(), [](const LayoutPlan& a, const LayoutPlan& b) {
    const int ka = (a.fits ? 0 : 2) + (a.runnable ? 0 : 1), kb = (b.fits ? 0 : 2) + (b.runnable ? 0 : 1);
    if (ka != kb) return ka < kb;
    if (a.time.total() != b.time.total()) return a.time.total() < b.time.total();
    return a.memory.total() < b.memory.total();
  });
  return plans;
}

std::string format_plans(const std::vector<LayoutPlan>& plans, const ClusterSpec& cluster) {
  std::string out;
  char line[1024];
  std::snprintf(line, sizeof line,
                "%-4s %-4s %-4s %-5s %-4s %10s %10s %10s %10s %10s %10s %10s | %9s %9s %9s %9s %9s %9s %12s  %s\n",
                "DP", "TP", "ZeRO", "B", "CP", "params", "grads", "optim", "activ", "carried", "gpu-ws", "total",
                "compute", "dp_cp-ar", "zero-bc", "tp-ar", "cp-ag", "step", "tokens/s", "status");
  out += line;
  for (const auto& p : plans) {
    const auto& m = p.memory;
    const auto mb = [](int64_t b) { return double(b) / 1e6; };
    std::snprintf(line, sizeof line,
                  "%-4d %-4d %-4d %-5d %-4d %8.1fMB %8.1fMB %8.1fMB %8.1fMB %8.1fMB %8.1fMB %8.1fMB | %8.4fs %8.4fs "
                  "%8.4fs %8.4fs %8.4fs %8.4fs %12.0f  %s\n",
                  p.layout.dp, p.layout.tp, p.layout.zero ? 1 : 0, p.layout.micro_batch, p.layout.cp, mb(m.parameters),
                  mb(m.gradients), mb(m.optimizer), mb(m.activations + m.backward_scratch), mb(m.carried_state),
                  mb(p.workspace), mb(m.total() + p.workspace), p.time.compute_s, p.time.dp_cp_grad_s, p.time.zero_bcast_s, p.time.tp_s,
                  p.time.cp_s, p.time.total(), p.tokens_per_s, p.note.empty() ? "ok" : p.note.c_str());
    out += line;
  }
  std::string compute_rule;
  if (cluster.has_rates()) {
    char rule[512];
    std::snprintf(rule, sizeof rule,
                  "matrix-product FLOPs ÷ %.1f GFLOP/s + attention FLOPs ÷ %.1f GFLOP/s + memory-bound "
                  "bytes ÷ %.1f GB/s (measured rates; best layout: %.4fs + %.4fs + %.4fs)",
                  cluster.gemm_gflops, cluster.attention_gflops, cluster.memory_gbps,
                  plans.empty() ? 0.0 : plans.front().time.gemm_s,
                  plans.empty() ? 0.0 : plans.front().time.attention_s,
                  plans.empty() ? 0.0 : plans.front().time.memory_s);
    compute_rule = rule;
  } else if (!cluster.device.empty()) {
    compute_rule = "the counted step per component on " + cluster.device + " (below)";
  } else {
    char rule[256];
    std::snprintf(rule, sizeof rule, "model.md §10 training FLOPs ÷ (%.0f GFLOP/s × efficiency %.2f)",
                  cluster.peak_gflops, cluster.efficiency);
    compute_rule = rule;
  }
  std::snprintf(line, sizeof line,
                "\nmemory: fp32 buffers as allocated (MB = 1e6 bytes; device %.1f GB); gpu-ws: the CUDA backend's scratch, cuBLAS "
                "and cuFFT workspaces, in bf16 the weights' bf16 shadow. step = compute + "
                "communication, no overlap assumed (an upper bound);\ncompute = %s; communication: α-β, α = %.1f µs, ring all-reduce "
                "2(p−1)/p·bytes/bw + α per train.bucket_mb bucket;\ntp-ar = the TP group's collectives of a step "
                "as the layers issue them (all-reduce as above, all-gather / reduce-scatter (p−1)/p·bytes/bw + α);\ncp-ag = the "
                "context-parallel exchanges of a step (window halos: α + piece/bw; S4D state summaries: α + (p−1)·piece/bw).\n",
                cluster.gpu_memory_gb, compute_rule.c_str(), cluster.alpha_us);
  out += line;
  if (!cluster.device.empty() && !cluster.has_rates() && !plans.empty() && !plans.front().counted.components.empty()) {
    const LayoutPlan& best = plans.front();
    char what[160];
    std::snprintf(what, sizeof what, "the first layout: DP %d, TP %d, CP %d, B %d", best.layout.dp, best.layout.tp,
                  best.layout.cp, best.layout.micro_batch);
    out += "\n" + format_counted_step(best.counted, device_rates(cluster.device), best.time.total(), what);
  }
  return out;
}

}  // namespace brt::launch
