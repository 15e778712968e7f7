// The planner's context-parallel traffic (launch/plan/planner.h, docs/parallelism.md "Context
// parallelism"): the shifts and all-gathers over the cp group that a training step's layers
// issue, as core/layers/cached_window_attention.cpp, core/layers/bst_ssm.cpp and core/layers/bst_layer.cpp issue them.
#include <string>
#include <vector>

#include "core/sharding/context_parallel.h"
#include "launch/plan/planner.h"

namespace brt::launch {

std::vector<CpExchange> cp_exchanges_per_step(const core::ModelConfig& cfg_in, int streams, int tp, int cp,
                                              int elem_bytes) {
  core::ModelConfig cfg = cfg_in;
  cfg.resolve();
  std::vector<CpExchange> out;
  if (cp == 1) return out;
  const int64_t B = streams, e = elem_bytes, A = cfg.attn_width() / tp, W = cfg.window, D = cfg.d_model;
  // Every layer of slide and of a BST model attends over a window with a halo.
  const int64_t halo = 2 * B * W * A * e;  // K̂ and V of the last block
  out.push_back({'x', halo, cfg.layers, "window halo forward: the last block's K̂, V"});
  if (cfg.family == core::ModelFamily::kXL) return out;  // xl's blocks are detached: no gradient back
  out.push_back({'x', halo, cfg.layers, "window halo backward: their gradient back"});
  if (cfg.family != core::ModelFamily::kBST) return out;
  int64_t bst = 0;
  for (int i = 0; i < cfg.layers; ++i) bst += cfg.is_bst_layer(i) ? 1 : 0;
  const bool mf = cfg.bst_variant == core::BstVariant::kMF;
  const int64_t C = cfg.ssm_channels(), R = C * (cfg.ssm_features() / tp), M = cfg.ssm_state / 2;
  const int64_t state = B * R * M * 2 * int64_t(sizeof(double));  // independent of N
  out.push_back({'g', state, bst, "S4D forward: the chunks' state summaries"});
  out.push_back({'g', state, bst, "S4D backward: the chunks' state gradients"});
  if (mf) {
    out.push_back({'x', B * cfg.ctx_states * D * e, bst, "MF forward: the last block's context states"});
    out.push_back({'x', B * cfg.ctx_states * D * e, bst, "MF backward: their gradient back"});
  }
  return out;
}

int64_t cp_bytes_sent_per_step(const core::ModelConfig& cfg, int streams, int tp, int cp, int elem_bytes) {
  int64_t bytes = 0;
  for (const CpExchange& x : cp_exchanges_per_step(cfg, streams, tp, cp, elem_bytes))
    bytes += x.count * (x.kind == 'g' ? cp - 1 : 1) * x.piece_bytes;
  return bytes;
}

double cp_step_seconds(const core::ModelConfig& cfg, int streams, int tp, int cp, double bytes_per_s,
                       double alpha_s) {
  double seconds = 0;
  for (const CpExchange& x : cp_exchanges_per_step(cfg, streams, tp, cp))
    seconds += double(x.count) * (alpha_s + double(x.kind == 'g' ? cp - 1 : 1) * double(x.piece_bytes) / bytes_per_s);
  return seconds;
}

}  // namespace brt::launch
