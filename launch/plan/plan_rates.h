// Kernel-class rates for `brt-dist plan`: `brt-dist plan --measure-rates
// OUT.toml CONFIG [--device cpu|cuda] [--precision ...]` times the backend the run would use on
// the config's own shapes — a matrix product (the MLP's [B·N, D] × [D, F]), the window
// attention forward + backward ([B, N, W, H, dh]) and a device-memory copy — and writes a
// cluster file (launch/plan/planner.h ClusterSpec) with gemm_tflops, attention_tflops and
// memory_gbps, so `brt-dist plan CONFIG --cluster OUT.toml` predicts step time from what this
// device measured; `--measured METRICS.jsonl` then prints the prediction next to a run's step time.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "launch/config/config.h"

namespace brt::launch {

struct MeasuredRates {
  double gemm_gflops = 0;       // the MLP-shaped matrix product, forward (2·M·N·K per call)
  double attention_gflops = 0;  // window attention fwd + bwd by model.md §10's count (3·4·W·A per token)
  double memory_gbps = 0;       // backend copy: 2 × bytes per copy
  double seconds = 0;           // wall time of the whole measurement
};

// Each class is timed for at least `seconds_each` (after one warm-up call), synchronising the
// backend's memory around the timed calls. The shapes: `streams` × the config's model.
MeasuredRates measure_rates(kernels::Backend<float>& backend, const core::ModelConfig& model,
                            int streams, double seconds_each);

// The cluster file for one device of this kind (1 node × 1 device; the link speeds are
// placeholders to edit for a multi-device cluster, and say so in a comment).
std::string rates_cluster_toml(const MeasuredRates& rates, const std::string& device,
                               double device_memory_gb, const std::string& config_path, int streams);

// Median tokens/s of the "train" records of a metrics.jsonl after the first `skip_fraction`
// of them (start-up and compilation excluded). Throws std::invalid_argument naming the file
// when it has no train records.
double median_tokens_per_s(const std::string& metrics_path, double skip_fraction = 0.2);

}  // namespace brt::launch
