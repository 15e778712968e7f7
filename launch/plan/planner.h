// The layout planner behind `brt-dist plan`: for a model config, a cluster
// description and a global batch of streams, every (DP, TP, ZeRO, micro-batch) layout with its
// predicted memory per device and step time, best first.
//
// Memory is what the code allocates, counted: the model itself is built on meta memory
// (kernels/meta_memory.h, count_model_memory below), so a new layer, form or parameter is
// declared once, in its layer; optimizer state follows model.md §10c (Adafactor's factored R/C
// exact) from the declared specs, the ZeRO-1 shard the partition of core/data_parallel.h.
// Step time: model.md §10 FLOPs ÷ (peak × efficiency) plus an α-β model of the collectives the
// trainer issues (docs/parallelism.md). Pure functions (the counted model lives and dies inside
// a call).
//
// Tensor parallelism (docs/parallelism.md, "Tensor parallelism"): parameters are the rank's
// slices of model.md §9's shapes, activations those of heads, F, vocabulary and state rows divided
// by TP; the TP all-reduces per layer are the ones the layers issue, costed with the α-β model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model_config.h"
#include "core/param.h"
#include "core/optim/optim_config.h"
#include "launch/plan/counted_step.h"

namespace brt::launch {

// A cluster description (TOML; every field required unless marked optional).
struct ClusterSpec {
  int gpus_per_node = 0;
  int nodes = 0;
  double gpu_memory_gb = 0;     // per device, GB = 1e9 bytes
  double peak_gflops = 0;       // per device (file: peak_tflops or peak_gflops)
  double intra_node_gbps = 0;   // GB/s (1e9 bytes/s) of payload per device within a node
  double inter_node_gbps = 0;   // GB/s per device across nodes
  double alpha_us = 5.0;        // optional: fixed cost per collective message, microseconds
  double efficiency = 0.5;      // optional: fraction of peak a step's FLOPs achieve
  // Optional, measured per kernel class (`brt-dist plan --measure-rates` writes them, e.g.
  // scripts/gpu-check.sh on the GPU machine): with gemm_tflops set, compute time is
  // matrix-product FLOPs ÷ gemm + attention FLOPs ÷ attention + memory-bound bytes ÷ memory
  // (efficiency unused); all three must then be given.
  double gemm_gflops = 0, attention_gflops = 0, memory_gbps = 0;
  bool has_rates() const { return gemm_gflops > 0; }
  // Optional: "h100" or "h200". Without measured rates, compute time is then the counted step
  // per component against that device's rates (launch/plan/counted_step.h), not peak ×
  // efficiency.
  std::string device;
  int world() const { return gpus_per_node * nodes; }
};

// Errors name the file and the field ("cluster.toml: missing field 'inter_node_gbps'").
ClusterSpec parse_cluster(std::string_view toml_text, const std::string& source_name);
ClusterSpec load_cluster(const std::string& path);
// `brt-dist plan --device h100|h200` without a cluster file: one node of 8 such GPUs (NVLink
// between them), the step counted per component against the device's rates (device_rates).
ClusterSpec device_node_cluster(std::string_view device);

// model.md §9 logical shapes in the order the model declares them (embed, layers 0..L-1 — a
// recurrent layer's state side first —, final_norm), read from the model's own declarations
// (count_model_memory below).
std::vector<std::vector<int64_t>> model_param_shapes(const core::ModelConfig& cfg);

// Bytes per device. `activations` is what Model::memory_report() counts; `backward_scratch`
// the recurrent layers' backward buffers it does not list (allocated all the same).
struct MemoryPrediction {
  int64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0, backward_scratch = 0,
          carried_state = 0;
  int64_t total() const {
    return parameters + gradients + optimizer + activations + backward_scratch + carried_state;
  }
};

// What one rank's model allocates, counted by building the model itself on meta memory
// (kernels/meta_memory.h) as rank 0 of a TP group of `tp` and a CP group of `cp` (the ranks of
// a group allocate alike): every MemoryPrediction category but the optimizer's, and the
// parameters' specs (whole shapes, this rank's slices and split axes) in declaration order. A
// new layer, form or parameter is thus declared once, in its layer. Throws
// std::invalid_argument naming the key that TP or CP cannot split, or an elem_bytes other than
// 4 (float) or 8 (double).
struct CountedModel {
  MemoryPrediction memory;  // optimizer 0
  std::vector<core::ParamSpec> specs;
  int elem_bytes = 4;
  int64_t backend_bytes = 0;  // everything the model allocated in backend memory
};
// A model of more than `max_counted_blocks` blocks per rank is built at max/2 and max blocks
// and counted along the line through them (every buffer is fixed or grows by the same bytes per
// block; building millions of blocks' buffer sets would take minutes).
constexpr int kMaxCountedBlocks = 256;
CountedModel count_model_memory(const core::ModelConfig& cfg, int streams, int elem_bytes = 4, int tp = 1,
                                int cp = 1, int max_counted_blocks = kMaxCountedBlocks);
// `model` with the optimizer state of model.md §10c (core::expected_optimizer_state_elems): all
// of it, or with `zero` and dp_cp > 1 that of `dp_cp_rank`'s ZeRO-1 run (core/data_parallel.h's
// partition of this rank's slices).
MemoryPrediction with_optimizer_state(const CountedModel& model, const core::OptimConfig& optim, int dp_cp,
                                      bool zero, int dp_cp_rank);

// One rank's memory for `streams` streams (B) with elements of `elem_bytes` bytes. With
// `zero` and dp_cp > 1 the optimizer state is that of `dp_cp_rank`'s ZeRO-1 run (over this TP rank's
// slices). `cfg` is the whole model's config; `tp` ranks share each layer; `cp` ranks share each
// segment (core/sharding/context_parallel.h: the layers hold N/cp tokens plus the exchange buffers; dp_cp
// and dp_cp_rank are the dp_cp group's, DP x CP).
MemoryPrediction predict_rank_memory(const core::ModelConfig& cfg, const core::OptimConfig& optim,
                                     int streams, int dp_cp, bool zero, int dp_cp_rank,
                                     int elem_bytes = 4, int tp = 1, int cp = 1);

struct Layout {
  int dp = 1, tp = 1;
  bool zero = false;
  int micro_batch = 1;  // B: streams per DP rank (= global batch / DP)
  int cp = 1;           // ranks per segment (context parallelism); world = DP x CP x TP
};

// One kind of collective the TP group issues in a training step's forward and backward
// (docs/parallelism.md, "Collectives per layer and step").
struct TpCollective {
  char kind = 'r';      // 'r' all-reduce, 'g' all-gather, 's' reduce-scatter
  int64_t bytes = 0;    // all-reduce: the buffer; all-gather / reduce-scatter: the whole tensor
  int64_t count = 0;    // calls per step
  std::string where;    // e.g. "MLP forward (row-parallel W2)"
};

// The collectives of one step for `streams` streams per rank at TP = tp (empty for tp = 1),
// as the layers issue them (tests/launch/plan checks the list against a recorded TP = 2 step). The
// optimizer's statistics all-reduces (a few small messages per step) are not listed.
std::vector<TpCollective> tp_collectives_per_step(const core::ModelConfig& cfg, int streams, int tp,
                                                  int elem_bytes = 4);
// α-β time of that list over `tp` ranks: ring all-reduce as ring_all_reduce_seconds (one
// message each), all-gather and reduce-scatter α + (p−1)/p·bytes/bw.
double tp_step_seconds(const core::ModelConfig& cfg, int streams, int tp, double bytes_per_s,
                       double alpha_s);

// Context parallelism (core/sharding/context_parallel.h): one kind of exchange over the cp group per
// step, as the layers issue it (tests/core/cp checks the list against a recorded step).
struct CpExchange {
  char kind = 'x';          // 'x' cyclic shift (one piece to a neighbour), 'g' all-gather
  int64_t piece_bytes = 0;  // what each rank sends per call ('g': to each of the others)
  int64_t count = 0;        // calls per step
  std::string where;
};
// Empty at cp = 1. The window halo (every layer) is a shift of 2·B·W·A/TP elements each way; the
// S4D state summaries an all-gather of B·C·Ds/TP·M complex doubles per BST layer each way,
// whatever N; MF's last context states a shift of B·S_ctx·D each way.
std::vector<CpExchange> cp_exchanges_per_step(const core::ModelConfig& cfg, int streams, int tp, int cp,
                                              int elem_bytes = 4);
// Bytes one rank sends per step: a piece per shift, (cp − 1) pieces per all-gather (the MPI
// communicator's all-gather sends its block to every other rank; a ring sends the same total).
int64_t cp_bytes_sent_per_step(const core::ModelConfig& cfg, int streams, int tp, int cp,
                               int elem_bytes = 4);
// α-β time of that list: α + piece/bw per shift, α + (cp − 1)·piece/bw per all-gather.
double cp_step_seconds(const core::ModelConfig& cfg, int streams, int tp, int cp, double bytes_per_s,
                       double alpha_s);

struct StepTimePrediction {
  double compute_s = 0;    // model.md §10 training FLOPs of one rank ÷ (peak × efficiency), or
                           // with measured rates gemm_s + attention_s + memory_s:
  double gemm_s = 0;       //   matrix-product FLOPs ÷ gemm rate
  double attention_s = 0;  //   attention FLOPs (core::FlopBreakdown::attention) ÷ attention rate
  double memory_s = 0;     //   memory-bound bytes (memory_bound_bytes) ÷ memory bandwidth
  double dp_cp_grad_s = 0;    // bucketed ring all-reduce of the gradient arena
  double zero_bcast_s = 0; // ZeRO-1: every run broadcast from its owner
  double tp_s = 0;         // TP collectives of a step (tp_collectives_per_step)
  double cp_s = 0;         // CP exchanges of a step (cp_exchanges_per_step)
  double total() const { return compute_s + dp_cp_grad_s + zero_bcast_s + tp_s + cp_s; }
};

// Bytes a training step's memory-bound kernels move on one rank (element-wise ops, norms,
// gates, softmax, optimizer), modelled from the rank's memory: every activation and backward
// scratch buffer written and read twice (forward, backward), parameters, gradients and
// optimizer state read and written once by the optimizer: 4·(activations + scratch) +
// 2·(parameters + gradients + optimizer).
double memory_bound_bytes(const MemoryPrediction& m);

struct LayoutPlan {
  Layout layout;
  MemoryPrediction memory;  // the largest over the layout's ranks
  // The CUDA backend's own device memory per GPU beside the model's (scratch arena, cuBLAS and
  // cuFFT workspaces, bf16 weight shadow; launch/plan/backend_workspace.h): counted in `fits`.
  int64_t workspace = 0;
  StepTimePrediction time;
  CountedStep counted;      // with a cluster `device`: the compute per component
  double tokens_per_s = 0;
  bool fits = true;         // memory.total() + workspace <= device memory
  bool runnable = true;     // every layout the planner lists can be run (brt-dist train --tp)
  std::string note;         // why it does not fit / is not runnable
};

struct PlanOptions {
  double bucket_mb = 4.0;   // train.bucket_mb
  bool bf16 = true;         // train.precision (the CUDA backend's bf16 scratch is larger)
};

// Ring all-reduce of `bytes` over p ranks in `buckets` messages: buckets·α + 2(p−1)/p·bytes/bw.
double ring_all_reduce_seconds(double bytes, int p, double bytes_per_s, double alpha_s, int buckets);

// Every layout with DP·CP·TP = the cluster's world, TP dividing what it splits (core/tp_split.h),
// CP > 1 only where the variant and N split (core::context_parallel_problem), DP dividing
// `global_batch`, ZeRO 0 and 1 (1 only when DP·CP > 1: ZeRO-1 shards over the dp_cp group).
// Sorted: runnable and fitting first, then by predicted step time. Throws std::invalid_argument
// when no DP divides the global batch.
std::vector<LayoutPlan> plan_layouts(const core::ModelConfig& cfg, const core::OptimConfig& optim,
                                     const ClusterSpec& cluster, int global_batch,
                                     const PlanOptions& options = {});

// Human-readable table of the plans (one line each) for the command.
std::string format_plans(const std::vector<LayoutPlan>& plans, const ClusterSpec& cluster);

}  // namespace brt::launch
