#include "launch/plan/counted_step.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "core/flops.h"
#include "core/model.h"
#include "core/sharding/context_parallel.h"
#include "kernels/counting_backend.h"
#include "core/optim/adafactor.h"
#include "core/optim/optim_stats.h"
#include "kernels/cuda_launches.h"
#include "kernels/cuda_optimizer_launches.h"
#include "kernels/meta_memory.h"
#include "launch/plan/planner.h"

namespace brt::launch {

DeviceRates device_rates(std::string_view name) {
  // Peaks: NVIDIA H100 Tensor Core GPU datasheet (SXM5: bf16 989.4 TFLOP/s dense, fp32 66.9,
  // HBM3 3.35 TB/s) and NVIDIA H200 Tensor Core GPU datasheet (SXM: the same compute, HBM3e
  // 4.8 TB/s). Fractions (assumed, to be measured): cuBLAS bf16 GEMMs of these sizes ~0.70 of
  // peak; brt-dist's own attention kernels 0.25 (not FlashAttention-class); CUDA-core kernels
  // 0.5 of fp32; a streaming kernel 0.85 of HBM; 4 µs per eager launch. Memory: 80 GB HBM3
  // (H100), 141 GB HBM3e (H200); NVLink 4: 900 GB/s per GPU both ways, 450 each way.
  DeviceRates r;
  r.bf16_tflops = 989.4;
  r.fp32_tflops = 66.9;
  r.gemm_fraction = 0.70;
  r.attention_fraction = 0.25;
  r.other_fraction = 0.5;
  r.hbm_fraction = 0.85;
  r.launch_us = 4.0;
  // Hopper (H100 SXM5 and H200 SXM): 132 SMs, 2048 resident threads each (CUDA C++ Programming
  // Guide, compute capability 9.0). A synchronising copy of a few KB: ~10 µs (assumed); an
  // all-reduce of a few KB over NVLink inside a node, latency-bound: ~15 µs (assumed).
  r.sms = 132;
  r.threads_per_sm = 2048;
  r.round_trip_us = 10.0;
  r.small_all_reduce_us = 15.0;
  r.nvlink_gbps = 450;
  if (name == "h100") {
    r.name = "h100";
    r.hbm_gbps = 3350;
    r.memory_gb = 80;
    r.source = "NVIDIA H100 SXM5 datasheet";
  } else if (name == "h200") {
    r.name = "h200";
    r.hbm_gbps = 4800;
    r.memory_gb = 141;
    r.source = "NVIDIA H200 SXM datasheet";
  } else {
    throw std::invalid_argument("device '" + std::string(name) + "': the planner knows h100 and h200");
  }
  return r;
}

double CountedStep::compute_seconds() const {
  double s = 0;
  for (const ComponentTime& c : components) s += c.seconds;
  return s;
}

double CountedStep::optimizer_seconds() const {
  double s = 0;
  for (const ComponentTime& c : components)
    if (c.optimizer) s += c.seconds;
  return s;
}

double CountedStep::seconds_of(const std::string& name) const {
  for (const ComponentTime& c : components)
    if (c.name == name) return c.seconds;
  return 0.0;
}

double CountedStep::mfu(double step_seconds, const DeviceRates& rates) const {
  return step_seconds > 0 ? model10_flops / (step_seconds * rates.bf16_tflops * 1e12) : 0.0;
}

namespace {

struct Work {
  std::array<kernels::KernelCounts, kernels::kKernelClasses> counts{};
  kernels::CountingBackend<float>::Conversions conversions;
  std::vector<kernels::OptimizerLaunch> optimizer;
};

// The CUDA optimizer's launches over `params` (kernels/cuda_optimizer_launches.h).
std::vector<kernels::OptimizerLaunch> optimizer_launches(const core::ParamStore<float>& params, const CountedRun& run) {
  return kernels::cuda_optimizer_step_launches(core::optimizer_layouts(params, run.adafactor, run.min_dim_to_factor),
                                              core::ChunkTable(params).size(), run.adafactor, run.tp > 1);
}

// The step's device work at TP 1 on this rank's chunk, counted.
Work counted_work(const core::ModelConfig& chunk, int streams, const CountedRun& run) {
  kernels::MetaMemory meta;
  kernels::CountingBackend<float> backend(meta);
  core::Model<float> model(chunk, streams, backend);
  const size_t rows = size_t(streams) * size_t(chunk.seq_len);
  const std::vector<int32_t> tokens(rows, 0);
  const std::vector<uint8_t> mask(rows, 1), doc_start(size_t(streams), 1);
  model.stage_step({tokens.data(), tokens.data(), mask.data(), doc_start.data()});
  backend.reset();
  model.device_work();
  Work w;
  for (int k = 0; k < kernels::kKernelClasses; ++k) w.counts[size_t(k)] = backend.counts(kernels::KernelClass(k));
  w.conversions = backend.bf16_conversions();
  w.optimizer = optimizer_launches(model.params(), run);
  return w;
}

double rate_of(kernels::KernelClass c, const DeviceRates& r) {
  switch (c) {
    case kernels::KernelClass::kGemm: return r.bf16_tflops * 1e12 * r.gemm_fraction;
    case kernels::KernelClass::kWindowAttention:
    case kernels::KernelClass::kCrossAttention: return r.bf16_tflops * 1e12 * r.attention_fraction;
    default: return r.fp32_tflops * 1e12 * r.other_fraction;
  }
}

}  // namespace

CountedStep count_step(const core::ModelConfig& cfg, int streams, int tp, int cp, const MemoryPrediction& memory,
                       const DeviceRates& rates, const CountedRun& run) {
  core::ModelConfig whole = cfg;
  whole.resolve();
  const core::ModelConfig chunk = core::chunk_config(whole, cp);
  CountedRun with_tp = run;
  with_tp.tp = tp;
  const Work work = counted_work(chunk, streams, with_tp);
  CountedStep step;
  const double hbm = rates.hbm_gbps * 1e9 * rates.hbm_fraction, launch = rates.launch_us * 1e-6;
  for (int k = 0; k < kernels::kKernelClasses; ++k) {
    const auto c = kernels::KernelClass(k);
    const kernels::KernelCounts& n = work.counts[size_t(k)];
    const auto launches = int64_t(std::llround(double(n.launches) * kernels::cuda_launches_per_call(c, run.bf16)));
    ComponentTime t{kernels::kernel_class_name(c), n.flops / tp, n.bytes() / tp, launches, 0};
    t.seconds = std::max(t.flops / rate_of(c, rates), t.bytes / hbm) + double(t.launches) * launch;
    step.components.push_back(t);
  }
  // bf16: every matrix product's operands rounded to bf16 first, one kernel each (read fp32,
  // write bf16), memory-bound.
  if (run.bf16) {
    ComponentTime conv{"bf16 conversions", 0, 6.0 * work.conversions.elements / tp, work.conversions.launches, 0};
    conv.seconds = conv.bytes / hbm + double(conv.launches) * launch;
    step.components.push_back(conv);
  }
  // The optimizer, launch by launch: a grid that fills a share of the resident threads streams at
  // that share of the bandwidth. TP shares each launch's bytes and threads.
  (void)memory;
  ComponentTime sums{"optimizer sums", 0, 0, 0, 0, true}, rest{"optimizer", 0, 0, 0, 0, true};
  const double resident = double(rates.sms) * rates.threads_per_sm;
  for (const kernels::OptimizerLaunch& l : work.optimizer) {
    ComponentTime& t = l.factor_sums ? sums : rest;
    t.bytes += l.bytes / tp;
    ++t.launches;
    if (l.copy || l.collective) {
      t.seconds += (l.copy ? rates.round_trip_us : rates.small_all_reduce_us) * 1e-6;
      continue;
    }
    const double fill = std::min(1.0, double(l.threads) / tp / resident);
    t.seconds += l.bytes / tp / (hbm * fill) + launch;
  }
  step.components.push_back(sums);
  step.components.push_back(rest);
  step.model10_flops = core::flops_per_token(whole).training() * double(streams) * chunk.seq_len / tp;
  return step;
}

std::string format_counted_step(const CountedStep& step, const DeviceRates& rates, double step_seconds,
                                const std::string& what) {
  std::string out = "counted step on " + rates.name + " (" + what + "): one rank's step issued to a counting "
                    "backend at its real shapes, each component max(FLOPs ÷ rate, bytes ÷ bandwidth) + launches × " +
                    std::to_string(int(rates.launch_us)) + " µs\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-18s %12s %12s %9s %10s %7s\n", "component", "GFLOP", "GB moved", "launches",
                "time", "share");
  out += line;
  const double compute = step.compute_seconds();
  for (const ComponentTime& c : step.components) {
    std::snprintf(line, sizeof line, "  %-18s %12.1f %12.2f %9lld %9.2fms %6.1f%%\n", c.name.c_str(), c.flops / 1e9,
                  c.bytes / 1e9, static_cast<long long>(c.launches), c.seconds * 1e3,
                  compute > 0 ? 100.0 * c.seconds / compute : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line,
                "  compute %.2f ms, step %.2f ms with communication; model.md §10 %.1f GFLOP: predicted MFU %.1f%% "
                "of the %.1f TFLOP/s bf16 peak\n  rates (%s; fractions assumed until measured): GEMM %.2f and "
                "attention %.2f of bf16 peak, other kernels %.2f of %.1f TFLOP/s fp32, HBM %.0f GB/s x %.2f\n",
                compute * 1e3, step_seconds * 1e3, step.model10_flops / 1e9, 100.0 * step.mfu(step_seconds, rates),
                rates.bf16_tflops, rates.source.c_str(), rates.gemm_fraction, rates.attention_fraction,
                rates.other_fraction, rates.fp32_tflops, rates.hbm_gbps, rates.hbm_fraction);
  out += line;
  return out;
}

}  // namespace brt::launch
