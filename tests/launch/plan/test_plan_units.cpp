// Planner units (launch/plan/planner.h): cluster file errors, the ring all-reduce formula, the
// model.md §10c state count on hand-computed shapes, the parameter count against the independent
// model.md §9/§12 count (core/param_count.h), and the layout enumeration and ordering.
#include <gtest/gtest.h>

#include "core/flops.h"
#include "core/param_count.h"
#include "launch/config/config.h"
#include "kernels/cuda_optimizer_launches.h"
#include "launch/plan/planner.h"

namespace brt::launch {
namespace {

const char* kCluster =
    "gpus_per_node = 8\nnodes = 2\ngpu_memory_gb = 80\npeak_tflops = 989\n"
    "intra_node_gbps = 450\ninter_node_gbps = 50\n";

TEST(PlanCluster, ParsesAllFields) {
  const ClusterSpec c = parse_cluster(kCluster, "c.toml");
  EXPECT_EQ(c.world(), 16);
  EXPECT_DOUBLE_EQ(c.peak_gflops, 989e3);
  EXPECT_DOUBLE_EQ(c.alpha_us, 5.0);  // optional default
}

TEST(PlanCluster, MissingFieldNamesFieldAndFile) {
  for (const char* field : {"gpus_per_node", "nodes", "gpu_memory_gb", "intra_node_gbps", "inter_node_gbps"}) {
    std::string text;
    for (const std::string line : {"gpus_per_node = 8", "nodes = 2", "gpu_memory_gb = 80", "peak_tflops = 989",
                                   "intra_node_gbps = 450", "inter_node_gbps = 50"})
      if (line.rfind(field, 0) != 0) text += line + "\n";
    try {
      parse_cluster(text, "mine.toml");
      FAIL() << "accepted a file without " << field;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("missing field '") + field + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("mine.toml"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_cluster("gpus_per_node = 8\nnodes = 1\ngpu_memory_gb = 8\nintra_node_gbps = 1\n"
                             "inter_node_gbps = 1\n", "x.toml"), std::invalid_argument);  // no peak
  EXPECT_THROW(parse_cluster(std::string(kCluster) + "gpu_per_node = 3\n", "x.toml"), std::invalid_argument);
}

// Measured kernel-class rates (brt-dist plan --measure-rates): all three or none, and the
// compute time is then gemm FLOPs ÷ gemm + attention FLOPs ÷ attention + bytes ÷ bandwidth.
TEST(PlanCluster, KernelClassRatesGoTogetherAndSetTheComputeTime) {
  try {
    parse_cluster(std::string(kCluster) + "gemm_tflops = 500\n", "rates.toml");
    ADD_FAILURE() << "a lone gemm_tflops was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rates.toml: missing field 'attention_tflops'"),
              std::string::npos) << e.what();
  }
  const ClusterSpec plain = parse_cluster(kCluster, "c.toml");
  EXPECT_FALSE(plain.has_rates());
  const ClusterSpec rated = parse_cluster(
      std::string(kCluster) + "gemm_tflops = 600\nattention_tflops = 150\nmemory_gbps = 3000\n", "r.toml");
  ASSERT_TRUE(rated.has_rates());
  EXPECT_DOUBLE_EQ(rated.gemm_gflops, 600e3);
  EXPECT_DOUBLE_EQ(rated.attention_gflops, 150e3);
  EXPECT_DOUBLE_EQ(rated.memory_gbps, 3000);

  const RunConfig rc = load_run_config("configs/150m.toml");
  core::ModelConfig cfg = rc.model;
  cfg.resolve();
  const auto plans = plan_layouts(cfg, rc.optim, rated, 16);
  const core::FlopBreakdown f = core::flops_per_token(cfg);
  EXPECT_GT(f.attention, 0.0);
  EXPECT_LT(f.attention, f.forward());
  for (const auto& p : plans) {
    const double tokens = double(p.layout.micro_batch) * cfg.seq_len / p.layout.tp;
    EXPECT_DOUBLE_EQ(p.time.gemm_s, (f.training() - 3 * f.attention) * tokens / 600e12);
    EXPECT_DOUBLE_EQ(p.time.attention_s, 3 * f.attention * tokens / 150e12);
    EXPECT_DOUBLE_EQ(p.time.memory_s, memory_bound_bytes(p.memory) / 3000e9);
    EXPECT_DOUBLE_EQ(p.time.compute_s, p.time.gemm_s + p.time.attention_s + p.time.memory_s);
  }
  // The attention share by hand for a standard layer stack (slide): 4·W·A per layer.
  core::ModelConfig slide = cfg;
  slide.variant = "slide";
  slide.resolve();
  EXPECT_DOUBLE_EQ(core::flops_per_token(slide).attention,
                   4.0 * slide.window * slide.attn_width() * slide.layers);
}

// device = "h100" | "h200": the compute is the counted step per component (launch/plan/
// counted_step.h): every component's time is max(FLOPs ÷ rate, bytes ÷ bandwidth) + launches ×
// launch cost, the layout's compute is their sum, and the predicted MFU is model.md §10's
// FLOPs over the step at the bf16 peak; the H200's wider HBM makes the same step no slower.
// An unknown device is refused naming the file and the known ones.
TEST(PlanCluster, ADeviceFieldPlansTheCountedStep) {
  try {
    parse_cluster(std::string(kCluster) + "device = \"a100\"\n", "dev.toml");
    ADD_FAILURE() << "device a100 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("dev.toml"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("h100 and h200"), std::string::npos) << e.what();
  }
  const RunConfig rc = load_run_config("configs/150m.toml");
  double compute[2] = {0, 0};
  int i = 0;
  for (const char* device : {"h100", "h200"}) {
    const ClusterSpec c = parse_cluster(std::string(kCluster) + "device = \"" + device + "\"\n", "c.toml");
    EXPECT_EQ(c.device, device);
    const auto plans = plan_layouts(rc.model, rc.optim, c, 16);
    ASSERT_FALSE(plans.empty());
    const LayoutPlan& best = plans.front();
    // Six kernel classes, the bf16 operands' conversions and the optimizer's two lines.
    ASSERT_EQ(best.counted.components.size(), 9u);
    EXPECT_GT(best.counted.seconds_of("bf16 conversions"), 0.0);
    const DeviceRates rates = device_rates(device);
    double sum = 0;
    for (const ComponentTime& t : best.counted.components) {
      EXPECT_GE(t.seconds, t.bytes / (rates.hbm_gbps * 1e9 * rates.hbm_fraction)) << t.name;
      sum += t.seconds;
    }
    EXPECT_DOUBLE_EQ(best.time.compute_s, sum);
    const double mfu = best.counted.mfu(best.time.total(), rates);
    EXPECT_GT(mfu, 0.05) << device;
    EXPECT_LT(mfu, 0.70) << device;  // below the GEMMs' own fraction
    EXPECT_NE(format_plans(plans, c).find("predicted MFU"), std::string::npos);
    compute[i++] = best.time.compute_s;
  }
  EXPECT_LE(compute[1], compute[0]);
}

// The optimizer's launches as kernels/cuda/optim issues them: the gradient norm and its read-back,
// then Adafactor's kernels in core's order, five per factored tensor (the tiled sums and their
// fold, accumulators, means, factors), with the grids the launchers choose; under TP each
// statistic reduced on the device (per-parameter totals where core makes them, then gather,
// all-reduce, scatter), with no host round trip but the step scalars'.
TEST(PlanOptimizer, LaunchesFollowTheKernelsGrids) {
  kernels::OptimTensor<float> matrix, vector;
  matrix.factored = 1;
  matrix.n1 = 2048;
  matrix.n2 = 8192;
  vector.p0 = 1000;
  const auto one_rank = kernels::cuda_optimizer_step_launches({matrix, vector}, 10, true, false);
  // The norm and the coefficients made on the device: the step scalars' two copies only.
  ASSERT_EQ(one_rank.size(), 13u);
  EXPECT_EQ(one_rank[1].kernel, "grad_norm_finish");
  EXPECT_EQ(one_rank[11].kernel, "adafactor_coefficients");
  EXPECT_TRUE(one_rank[2].copy && one_rank[3].copy && !one_rank[7].copy && !one_rank[12].copy);
  EXPECT_EQ(one_rank[5].kernel, "adafactor_tile_sums");
  EXPECT_EQ(one_rank[5].threads, 64 * 64 * 128);  // 2048 / 32 row tiles x 8192 / 128 column tiles
  EXPECT_DOUBLE_EQ(one_rank[5].bytes, 4.0 * 2048 * 8192 + 8.0 * (64 * 2048 + 64 * 8192));
  EXPECT_EQ(one_rank[6].kernel, "adafactor_fold_sums");
  EXPECT_EQ(one_rank[6].threads, (2048 + 8192) / 32 * 32 * 16);
  EXPECT_TRUE(one_rank[5].factor_sums && one_rank[6].factor_sums && !one_rank[7].factor_sums);

  // TP: six statistics reduced (the gradient, parameter and update squares, rows, columns,
  // means), three of them from per-parameter totals; the same two copies.
  const auto tp = kernels::cuda_optimizer_step_launches({matrix, vector}, 10, true, true);
  ASSERT_EQ(tp.size(), 13u + 6 * 3 + 3);
  int copies = 0, collectives = 0, totals = 0;
  for (const auto& l : tp) {
    copies += l.copy ? 1 : 0;
    collectives += l.collective ? 1 : 0;
    totals += l.kernel == "segment_sums" ? 1 : 0;
  }
  EXPECT_EQ(copies, 2);
  EXPECT_EQ(collectives, 6);
  EXPECT_EQ(totals, 3);
  EXPECT_EQ(tp[1].kernel, "segment_sums");
  EXPECT_EQ(tp[3].kernel, "TP all-reduce (gradient squares)");
  EXPECT_DOUBLE_EQ(tp[3].bytes, 8.0 * 2);  // one total per parameter
  EXPECT_EQ(tp[5].kernel, "grad_norm_finish");
  EXPECT_EQ(tp[tp.size() - 2].kernel, "adafactor_coefficients");
  for (const auto& l : tp)
    if (l.kernel == "TP all-reduce (row sums)") EXPECT_DOUBLE_EQ(l.bytes, 8.0 * 2048);

  const auto adamw = kernels::cuda_optimizer_step_launches({matrix, vector}, 10, false);
  ASSERT_EQ(adamw.size(), 5u);
  EXPECT_DOUBLE_EQ(adamw[4].bytes, 7 * 4.0 * (2048 * 8192 + 1000));
}

TEST(PlanComm, RingAllReduceFormula) {
  // 2(p−1)/p · bytes / bw + buckets · α: p = 4, 1 GB at 10 GB/s, 3 buckets of 1 ms.
  EXPECT_DOUBLE_EQ(ring_all_reduce_seconds(1e9, 4, 1e10, 1e-3, 3), 1.5 * 0.1 + 3e-3);
  EXPECT_DOUBLE_EQ(ring_all_reduce_seconds(1e9, 1, 1e10, 1e-3, 3), 0.0);
}

TEST(PlanShapes, ParameterCountMatchesModel12) {
  for (const char* name : {"configs/150m.toml", "configs/40m-slide.toml", "configs/tiny.toml"}) {
    core::ModelConfig cfg = load_run_config(name).model;
    cfg.resolve();
    int64_t n = 0;
    for (const auto& s : model_param_shapes(cfg)) {
      int64_t k = 1;
      for (auto d : s) k *= d;
      n += k;
    }
    EXPECT_EQ(n, core::count_parameters(cfg)) << name;
  }
}

TEST(PlanLayouts, EnumeratesSortsAndCostsTensorParallel) {
  core::ModelConfig cfg = load_run_config("configs/150m.toml").model;
  const RunConfig rc = load_run_config("configs/150m.toml");
  const ClusterSpec cluster = parse_cluster(kCluster, "c.toml");
  const auto plans = plan_layouts(cfg, rc.optim, cluster, 16);
  // TP ∈ {1, 2, 4, 8} (heads 8), 16 = DP × TP, DP divides 16; ZeRO 0/1 when DP > 1: 4 × 2 = 8.
  ASSERT_EQ(plans.size(), 8u);
  EXPECT_TRUE(plans.front().runnable);
  EXPECT_TRUE(plans.front().fits);
  core::ModelConfig resolved = cfg;
  resolved.resolve();
  for (size_t i = 0; i < plans.size(); ++i) {
    const auto& p = plans[i];
    EXPECT_EQ(p.layout.dp * p.layout.tp, 16);
    EXPECT_EQ(p.layout.micro_batch * p.layout.dp, 16);
    EXPECT_TRUE(p.runnable);  // tensor parallelism runs (brt-dist train --tp)
    // TP traffic: the step's TP collectives over the node's links (TP <= 8 = one node).
    const double tp_s = tp_step_seconds(resolved, p.layout.micro_batch, p.layout.tp,
                                        cluster.intra_node_gbps * 1e9, cluster.alpha_us * 1e-6);
    EXPECT_DOUBLE_EQ(p.time.tp_s, tp_s);
    if (p.layout.tp > 1) {
      EXPECT_GT(p.time.tp_s, 0.0);
    } else {
      EXPECT_EQ(p.time.tp_s, 0.0);
    }
    if (i > 0 && plans[i - 1].runnable == p.runnable && plans[i - 1].fits == p.fits) {
      EXPECT_LE(plans[i - 1].time.total(), p.time.total());
    }
  }
  // ZeRO-1 shrinks the optimizer state per device; TP shrinks parameters.
  const auto find = [&](int tp, bool zero) {
    for (const auto& p : plans)
      if (p.layout.tp == tp && p.layout.zero == zero) return p;
    return LayoutPlan{};
  };
  // ZeRO-1 cuts by whole parameters: at DP 16 the rank holding the [V, D] embedding (33M of
  // 193M elements) keeps the largest shard, about 1/6 of the state rather than 1/16.
  EXPECT_LT(find(1, true).memory.optimizer, find(1, false).memory.optimizer / 5);
  EXPECT_GT(find(1, true).memory.optimizer, find(1, false).memory.optimizer / 16);
  EXPECT_LT(find(2, false).memory.parameters, find(1, false).memory.parameters);
  EXPECT_GT(find(1, true).time.zero_bcast_s, 0.0);
}

TEST(PlanLayouts, TinyDeviceMarksEveryLayoutInfeasible) {
  const RunConfig rc = load_run_config("configs/150m.toml");
  ClusterSpec cluster = parse_cluster(kCluster, "c.toml");
  cluster.gpu_memory_gb = 0.01;
  const auto plans = plan_layouts(rc.model, rc.optim, cluster, 16);
  for (const auto& p : plans) {
    EXPECT_FALSE(p.fits);
    EXPECT_NE(p.note.find("does not fit"), std::string::npos) << p.note;
  }
  EXPECT_THROW(plan_layouts(rc.model, rc.optim, cluster, 3), std::invalid_argument);  // 3 streams, 16 devices
}

}  // namespace
}  // namespace brt::launch
