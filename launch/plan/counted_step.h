// A device's training step predicted per component from counts, not from an assumed
// efficiency: one step of the rank's model is issued at its real shapes to a counting backend
// on meta memory (kernels/counting_backend.h, kernels/meta_memory.h), and each kernel class's
// FLOPs, bytes and launches are turned into time against one table of device rates
// (device_rates below: the datasheet's peaks and the fractions of them each class is assumed to
// reach, stated beside their sources). A cluster file with `device = "h100"` or `"h200"` plans
// with it (launch/plan/planner.h); docs/gpu.md's table of predicted steps is this output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model_config.h"

namespace brt::launch {

struct MemoryPrediction;

// One device's rates. Peaks from the datasheet; the fractions are this planner's assumptions
// until a device run measures them (scripts/gpu-check.sh prints predicted beside measured).
struct DeviceRates {
  std::string name;               // "h100", "h200"
  double bf16_tflops = 0;         // dense bf16 tensor-core peak (the MFU denominator)
  double fp32_tflops = 0;         // CUDA-core fp32 peak (elementwise, loss, SSM arithmetic)
  double hbm_gbps = 0;            // HBM bandwidth, GB/s
  double gemm_fraction = 0;       // of bf16 peak, cuBLAS's large bf16 GEMMs
  double attention_fraction = 0;  // of bf16 peak, brt-dist's own tensor-core attention kernels
  double other_fraction = 0;      // of fp32 peak, the CUDA-core kernels
  double hbm_fraction = 0;        // of HBM bandwidth, a streaming kernel
  double launch_us = 0;           // per kernel launch, eager
  double round_trip_us = 0;       // a small device -> host copy the host waits for
  double small_all_reduce_us = 0; // a few-KB all-reduce over the TP group (NCCL, in a node)
  int sms = 0;                    // streaming multiprocessors
  int threads_per_sm = 0;         // resident threads per SM: a grid of fewer streams slower
  double memory_gb = 0;           // HBM capacity, GB (1e9 bytes)
  double nvlink_gbps = 0;         // NVLink payload per direction per GPU, GB/s
  std::string source;             // where the peaks come from
};
// The rates of `name` ("h100", "h200"); throws std::invalid_argument naming the known ones.
DeviceRates device_rates(std::string_view name);

struct ComponentTime {
  std::string name;
  double flops = 0, bytes = 0;
  int64_t launches = 0;  // the device's: backend calls × kernels/cuda_launches.h
  double seconds = 0;  // max(FLOPs ÷ rate, bytes ÷ bandwidth) + launches × launch cost
  bool optimizer = false;  // one of the optimizer's lines
};

struct CountedStep {
  std::vector<ComponentTime> components;  // the kernel classes, bf16 conversions, the optimizer's lines
  double model10_flops = 0;               // model.md §10 training FLOPs of this rank's step
  double compute_seconds() const;
  double optimizer_seconds() const;
  double seconds_of(const std::string& name) const;  // 0 when no component has that name
  // model.md §10 FLOPs ÷ (step time × bf16 peak): the MFU a measured step would report.
  double mfu(double step_seconds, const DeviceRates& rates) const;
};

// What of the run changes the device's launches (kernels/cuda_launches.h).
struct CountedRun {
  bool bf16 = true;       // train.precision: a bf16 GEMM converts its operands first
  bool adafactor = true;  // optim.kind: the optimizer's launches a step
  int64_t min_dim_to_factor = 128;  // optim.min_dim_to_factor: which tensors Adafactor factors
  int tp = 1;  // (count_step sets it) TP > 1 sums Adafactor's statistics through the host
};

// This rank's compute for `streams` streams (B) of `cfg` at TP `tp` and CP `cp`: the chunk's
// step counted at TP 1 and its FLOPs, bytes and launches' work shared by TP (an approximation:
// the norms TP replicates are counted as split); each class's backend calls made the CUDA
// backend's launches (kernels/cuda_launches.h); the optimizer's step is the CUDA optimizer's own
// launches over the chunk's parameters (kernels/cuda_optimizer_launches.h), each taking
// bytes ÷ (bandwidth × the share of the device's resident threads its grid fills) + its launch,
// and a copy the host waits for a round trip: two lines, Adafactor's row and column sums of G
// ("optimizer sums") and the rest. `memory` is no longer read (kept for the callers' plans).
CountedStep count_step(const core::ModelConfig& cfg, int streams, int tp, int cp, const MemoryPrediction& memory,
                       const DeviceRates& rates, const CountedRun& run = {});

// The per-component table of `step` for a step of `step_seconds` (compute + communication).
std::string format_counted_step(const CountedStep& step, const DeviceRates& rates, double step_seconds,
                                const std::string& what);

}  // namespace brt::launch
