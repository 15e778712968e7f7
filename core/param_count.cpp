#include "core/param_count.h"

namespace brt::core {

int64_t standard_layer_parameters(const ModelConfig& c) {
  const int64_t D = c.d_model, A = c.attn_width(), H = c.heads, F = c.d_ff;
  const int64_t attn = D /*attn_norm*/ + 3 * D * A /*wq wk wv*/ + A * D /*wo*/ + H /*scale*/ + H * 32 /*rel_bias*/;
  const int64_t mlp = D /*mlp_norm*/ + D * F + F * D;
  return attn + mlp;
}

namespace {

// One gate of model.md §5.3 whose input y has width `in`.
int64_t gate_parameters(GateKind gate, int64_t in, int64_t D) {
  if (gate == GateKind::kFixed) return D;  // gate.bias
  return 2 * in * D + 2 * D;               // wf, wi [in, D]; bf, bi [D]
}

}  // namespace

int64_t recurrent_layer_extra(const ModelConfig& c) {
  const int64_t D = c.d_model, A = c.attn_width(), H = c.heads, F = c.d_ff, S = c.state_size;
  const int64_t token_side = D * A /*attn.wq2*/ + A * D /*wo widened A->2A*/ + H /*attn.scale2*/;
  int64_t state_side = D /*state.norm*/ + 2 * S * D /*ids, init*/ + 4 * D * A /*wq wk wv wq2*/ +
                       2 * H /*scale, scale2*/ + 2 * A * D /*state.wo*/ + gate_parameters(c.gate, 2 * A, D);
  if (c.rec_config == RecurrentConfig::kDual)  // norm2, w1, w2 and a second gate fed by m (width F)
    state_side += D + D * F + F * D + gate_parameters(c.gate, F, D);
  return token_side + state_side;
}

int64_t feedback_layer_extra(const ModelConfig& c) {
  const int64_t D = c.d_model, A = c.attn_width(), H = c.heads;
  return D * A /*attn.wq2*/ + A * D /*wo widened A->2A*/ + H /*attn.scale2*/;  // model.md §5.4
}

int64_t bst_layer_extra(const ModelConfig& c) {
  const int64_t D = c.d_model, A = c.attn_width(), H = c.heads, Ds = c.ssm_features();
  const int64_t C = c.ssm_channels();
  int64_t ssm = D /*norm*/ + D * Ds /*w_dn*/ + (c.bst_variant == BstVariant::kMH ? H : 1) * Ds * D /*w_up*/ +
                C * Ds /*dskip*/;
  if (c.ssm_kernel == SsmKernel::kS4D) {
    ssm += C * Ds /*log_dt*/ + 4 * C * Ds * (c.ssm_state / 2) /*a_re a_im c_re c_im*/;
  } else {
    // Implicit filter (model.md §7.1): Linear(3->64)+b, Linear(64->64)+b twice, Linear(64->C*Ds) no
    // bias, and one learned frequency vector omega [64] shared by the three sines (Hyena's Sin).
    ssm += (3 * 64 + 64) + 2 * (64 * 64 + 64) + 64 * C * Ds + 64;
  }
  if (c.bst_variant == BstVariant::kMF) ssm += 2 * int64_t{c.ctx_states} * D;  // ctx_ids, ctx_init
  const int64_t attn = D * A /*wq2*/ + 2 * D * A /*wkc wvc*/ + H /*scale2*/ + D /*ctx_norm*/ + A * D /*wo widened*/;
  return ssm + attn;
}

int64_t count_non_embedding_parameters(const ModelConfig& c) {
  int64_t total = c.d_model;  // final_norm.scale
  for (int i = 0; i < c.layers; ++i) {
    total += standard_layer_parameters(c);
    if (c.is_recurrent_layer(i)) total += recurrent_layer_extra(c);
    else if (c.feedback) total += feedback_layer_extra(c);
    if (c.is_bst_layer(i)) total += bst_layer_extra(c);
  }
  return total;
}

int64_t count_parameters(const ModelConfig& c) {
  return count_non_embedding_parameters(c) + int64_t{c.vocab} * c.d_model;
}

}  // namespace brt::core
