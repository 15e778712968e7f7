#include "core/flops.h"

namespace brt::core {

FlopBreakdown flops_per_token(const ModelConfig& cfg) {
  const double D = cfg.d_model, A = cfg.attn_width(), F = cfg.d_ff, W = cfg.window;
  const double S = cfg.state_size, V = cfg.vocab;
  FlopBreakdown f;
  const double standard = 2 * (4 * D * A + 2 * D * F) + 4 * W * A;
  f.layers = standard * cfg.layers;
  f.logits = 2 * D * V;
  f.attention = 4 * W * A * cfg.layers;
  if (cfg.family == ModelFamily::kRecurrent) {
    double per_state = 8 * D * A + 4 * S * A + 8 * W * A + 2 * 2 * A * D;
    if (cfg.gate == GateKind::kLSTM) per_state += 2 * (2 * 2 * A * D);
    if (cfg.rec_config == RecurrentConfig::kDual) {
      per_state += 2 * 2 * D * F;
      if (cfg.gate == GateKind::kLSTM) per_state += 2 * (2 * F * D);
    }
    const double extra = 2 * (2 * D * A) + 4 * S * A + (S / W) * per_state;
    // Feedback (model.md §5.4; §10 does not list it): every other layer adds the recurrent
    // layer's token-side extra, its q2 and the state half of Wo, 2(2DA), and attention to the
    // S state vectors, 4SA.
    const double feedback_extra = 2 * (2 * D * A) + 4 * S * A;
    const double extra_attention = 4 * S * A + (S / W) * (4 * S * A + 8 * W * A);
    for (int i = 0; i < cfg.layers; ++i)
      if (cfg.is_recurrent_layer(i)) f.recurrent += extra, f.attention += extra_attention;
      else if (cfg.feedback) f.recurrent += feedback_extra, f.attention += 4 * S * A;
  }
  if (cfg.family == ModelFamily::kBST) {
    // model.md §10 BST extra over a standard layer (counted with the recurrent extras).
    const double Ds = cfg.ssm_features(), H = cfg.heads, C = cfg.ssm_channels();
    const bool mf = cfg.bst_variant == BstVariant::kMF, mh = cfg.bst_variant == BstVariant::kMH;
    const double r = mf ? cfg.ctx_states / W : 1, k_c = mf ? cfg.ctx_states : W / 2;
    const double u = mf ? cfg.ctx_states / W : mh ? H : 1;
    const double extra = 2 * (D * A + A * D) + 4 * D * A * r + 4 * A * k_c + 2 * D * Ds +
                         2 * Ds * D * u + (65 * (1 + C) + 8 * C) * Ds;
    for (int i = 0; i < cfg.layers; ++i)
      if (cfg.is_bst_layer(i)) f.recurrent += extra, f.attention += 4 * A * k_c;
  }
  return f;
}

}  // namespace brt::core
