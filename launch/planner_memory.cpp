// Memory side of the planner (launch/planner.h): MODEL §9 shapes in declaration order, the
// optimizer state of MODEL §10c, and the activation buffers each constructor allocates.
#include <stdexcept>
#include <string>

#include "core/adafactor.h"
#include "launch/data_parallel.h"
#include "launch/planner.h"

namespace brt::launch {

namespace {

using Shapes = std::vector<std::vector<int64_t>>;

constexpr int64_t kT5Buckets = 32;  // MODEL §9: attn.rel_bias [H, 32]

// core/gate.cpp declare_gate: fixed -> bias [D]; lstm -> wf, wi [in, D], bf, bi [D].
void add_gate(Shapes& s, core::GateKind kind, int64_t in, int64_t D) {
  if (kind == core::GateKind::kFixed) {
    s.push_back({D});
    return;
  }
  s.push_back({in, D});
  s.push_back({in, D});
  s.push_back({D});
  s.push_back({D});
}

// core/blocks.cpp declare_mlp: norm [D], w1 [D, F], w2 [F, D].
void add_mlp(Shapes& s, int64_t D, int64_t F) {
  s.push_back({D});
  s.push_back({D, F});
  s.push_back({F, D});
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Elements of ProjectionActs::allocate (core/blocks.cpp): h [R, D], rstd [R], out [R, A] per
// projection, rnorm [R, H] per normalised projection.
int64_t projection_acts(int64_t R, int64_t D, int64_t A, int64_t H, int projections, int normalised) {
  return R * D + R + projections * R * A + normalised * R * H;
}

// MlpActs::allocate: h [R, D], rstd [R], m [R, F].
int64_t mlp_acts(int64_t R, int64_t D, int64_t F) { return R * D + R + R * F; }

struct LayerElems {
  int64_t reported = 0, scratch = 0, carried = 0;
  int64_t reported_bytes = 0;  // buffers whose element type is not T (double S4D state, flags)
};

// core/standard_layer.cpp constructor.
LayerElems standard_layer_elems(const core::ModelConfig& c, int64_t B) {
  const int64_t D = c.d_model, A = c.attn_width(), H = c.heads, F = c.d_ff, N = c.seq_len,
                W = c.window, rows = B * N, cache = B * W * A;
  LayerElems e;
  e.reported = projection_acts(rows, D, A, H, 3, 2) + 2 * cache /*k,v_cache_used*/ +
               rows * A /*attn_out*/ + rows * H * 2 * W /*probs*/ + rows * D /*y*/ +
               mlp_acts(rows, D, F);
  e.carried = 2 * cache;  // k_cache, v_cache
  return e;
}

// core/recurrent_layer.cpp + core/recurrent_state.cpp constructors.
LayerElems recurrent_layer_elems(const core::ModelConfig& c, int64_t B) {
  const int64_t D = c.d_model, A = c.attn_width(), H = c.heads, F = c.d_ff, N = c.seq_len,
                W = c.window, S = c.state_size, Tb = c.blocks(), rows = B * N;
  const int64_t cache = B * W * A, ext = B * (W + N) * A, sd = B * S * D;
  const bool lstm = c.gate == core::GateKind::kLSTM, dual = c.rec_config == core::RecurrentConfig::kDual;
  LayerElems e;
  // Token side (reported by RecurrentLayer::activation_bytes).
  e.reported = projection_acts(rows, D, A, H, 4, 3) + 2 * cache + 2 * ext /*k,v_ext*/ +
               sd /*sigma0*/ + 2 * rows * A /*a_ee, a_es*/ + rows * H * 2 * W /*probs_ee*/ +
               Tb * B * H * W * S /*probs_es*/ + rows * D /*y*/ + mlp_acts(rows, D, F);
  e.scratch = 2 * ext /*dk_ext, dv_ext*/ + sd /*d_sigma0*/ + 2 * Tb * B * S * A /*dk_s, dv_s*/;
  e.carried = 2 * cache + sd;  // k_cache, v_cache, sigma
  // State side, R = B·S rows per block.
  const int64_t R = B * S, rd = R * D, ra = R * A;
  const int64_t gate_acts = lstm ? 2 * rd : 0;
  e.reported += (Tb + 1) * rd /*sigma_*/ +
                Tb * (projection_acts(R, D, A, H, 4, 3) + gate_acts + B * H * S * S /*probs_ss*/ +
                      B * H * S * 2 * W /*probs_se*/ + 2 * ra /*a_ss, a_se*/ + rd /*u1*/);
  if (dual) {
    e.reported += Tb * (2 * rd /*gated, u2*/ + mlp_acts(R, D, F) + gate_acts);
    e.scratch += 2 * rd /*d_gated, du2*/ + 2 * R * F /*scratch_f*/ + R * F /*dm*/;
  }
  e.scratch += 8 * rd + 7 * ra;  // d_next .. zi, d_ass .. scratch_a
  return e;
}

// core/bst_ssm.cpp + core/bst_context.cpp + core/bst_layer.cpp constructors (MODEL §7).
LayerElems bst_layer_elems(const core::ModelConfig& c, int64_t B, int elem_bytes) {
  const int64_t D = c.d_model, A = c.attn_width(), H = c.heads, F = c.d_ff, N = c.seq_len,
                W = c.window, Tb = c.blocks(), rows = B * N, cache = B * W * A, Ds = D / 4;
  const bool mf = c.bst_variant == core::BstVariant::kMF, mh = c.bst_variant == core::BstVariant::kMH;
  const bool s4d = c.ssm_kernel == core::SsmKernel::kS4D;
  const int64_t C = mf ? c.ctx_states : mh ? H : 1, R = C * Ds, M = c.ssm_state / 2;
  const bool ext = !s4d && c.ssm_carry;  // unstructured carry convolves [U_prev; U]
  const int64_t Lc = ext ? 2 * N : N, y = B * C * Lc * Ds, y_end = mf ? B * Tb * C * Ds : 0;
  const int64_t ctx_rows = mf ? B * Tb * C : mh ? H * rows : rows;
  const int64_t kv_rows = mf ? B * Tb * C : rows, G = mh ? H : 1, keys = mf ? c.ctx_states : W;
  const int64_t blocks = mf ? B * Tb * C * D : 0;
  LayerElems e;
  // BstSsm: z, rstd, u, conv_u, kernel, kernel_ext, y, y_end, ctx; double state_used, state_work.
  e.reported = rows * D + rows + rows * Ds + (ext ? B * Lc * Ds : 0) + R * N + (ext ? R * Lc : 0) +
               y + y_end + ctx_rows * D;
  const int64_t state = s4d && c.ssm_carry ? B * R * M * 2 : 0;  // doubles
  e.reported_bytes = 2 * state * 8 + B /*active_*/ + (mf ? B : 0) /*mf_continues_*/;
  e.scratch = y /*dy*/ + R * N /*dkernel*/ + (ext ? R * Lc + B * Lc * Ds : 0) + rows * Ds /*du*/ +
              rows * D /*dz*/ + y_end;
  // BstLayer: projections (q k v q2), context projection, caches, attention, MLP.
  e.reported += projection_acts(rows, D, A, H, 4, 3) + G * kv_rows * D + G * kv_rows /*h, rstd*/ +
                2 * kv_rows * A + kv_rows * H /*k, v, rnorm*/ + 2 * cache + 2 * rows * A +
                rows * H * 2 * W + B * Tb * H * W * keys + blocks + rows * D + mlp_acts(rows, D, F);
  e.scratch += 3 * kv_rows * A + G * kv_rows * D + ctx_rows * D + blocks;
  e.carried = 2 * cache + (state ? state * 8 / elem_bytes : 0) + (ext ? B * N * Ds : 0) +
              (mf ? B * c.ctx_states * D : 0);
  return e;
}

// core/bst_layer.cpp declaration order: the SSM sublayer (a member built first), then the
// attention, the MLP, and MF's context IDs and initial context.
void add_bst_layer(Shapes& s, const core::ModelConfig& c) {
  const int64_t D = c.d_model, A = c.attn_width(), H = c.heads, F = c.d_ff, Ds = D / 4;
  const bool mf = c.bst_variant == core::BstVariant::kMF, mh = c.bst_variant == core::BstVariant::kMH;
  const int64_t C = mf ? c.ctx_states : mh ? H : 1, M = c.ssm_state / 2, O = 64;
  s.push_back({D});                                               // ssm.norm.scale
  s.push_back({D, Ds});                                           // ssm.w_dn
  s.push_back(mh ? std::vector<int64_t>{H, Ds, D} : std::vector<int64_t>{Ds, D});  // ssm.w_up
  s.push_back({C, Ds});                                           // ssm.dskip
  if (c.ssm_kernel == core::SsmKernel::kS4D) {
    s.push_back({C, Ds});                                         // ssm.log_dt
    for (int k = 0; k < 4; ++k) s.push_back({C, Ds, M});          // a_re, a_im, c_re, c_im
  } else {  // ssm.filter.w0 b0 w1 b1 w2 b2 freq w_out
    const std::initializer_list<std::vector<int64_t>> filter = {{3, O}, {O}, {O, O}, {O}, {O, O}, {O}, {O}, {O, C * Ds}};
    s.insert(s.end(), filter);
  }
  s.push_back({D});                                  // attn_norm.scale
  for (int k = 0; k < 4; ++k) s.push_back({D, A});   // wq, wk, wv, wq2
  s.push_back({D});                                  // attn.ctx_norm.scale
  s.push_back({D, A});                               // attn.wkc
  s.push_back({D, A});                               // attn.wvc
  s.push_back({2 * A, D});                           // attn.wo
  s.push_back({H});                                  // attn.scale
  s.push_back({H});                                  // attn.scale2
  s.push_back({H, kT5Buckets});                      // attn.rel_bias
  add_mlp(s, D, F);
  if (mf) {
    s.push_back({c.ctx_states, D});  // ssm.ctx_ids
    s.push_back({c.ctx_states, D});  // ssm.ctx_init
  }
}

}  // namespace

Shapes model_param_shapes(const core::ModelConfig& c) {
  const int64_t D = c.d_model, A = c.attn_width(), H = c.heads, F = c.d_ff, V = c.vocab,
                S = c.state_size;
  Shapes s;
  s.push_back({V, D});  // embed
  for (int i = 0; i < c.layers; ++i) {
    if (c.is_bst_layer(i)) {
      add_bst_layer(s, c);
      continue;
    }
    const bool rec = c.is_recurrent_layer(i);
    if (rec) {  // RecurrentStateSide is a member built before the token side's body runs.
      s.push_back({D});     // state.norm.scale
      s.push_back({S, D});  // state.ids
      for (int k = 0; k < 4; ++k) s.push_back({D, A});  // state.wq, wk, wv, wq2
      s.push_back({H});     // state.scale
      s.push_back({H});     // state.scale2
      s.push_back({2 * A, D});  // state.wo
      add_gate(s, c.gate, 2 * A, D);
      if (c.rec_config == core::RecurrentConfig::kDual) {
        add_mlp(s, D, F);  // state.norm2.scale, state.w1, state.w2
        add_gate(s, c.gate, F, D);
      }
    }
    s.push_back({D});  // attn_norm.scale
    for (int k = 0; k < (rec ? 4 : 3); ++k) s.push_back({D, A});
    s.push_back({rec ? 2 * A : A, D});  // attn.wo
    s.push_back({H});                   // attn.scale
    if (rec) s.push_back({H});          // attn.scale2
    s.push_back({H, kT5Buckets});       // attn.rel_bias
    add_mlp(s, D, F);
    if (rec) s.push_back({S, D});  // state.init
  }
  s.push_back({D});  // final_norm.scale
  return s;
}

core::ModelConfig tp_shard_config(const core::ModelConfig& cfg, int tp) {
  if (tp < 1) throw std::invalid_argument("tp must be >= 1");
  core::ModelConfig c = cfg;
  auto split = [tp](int value, const char* key) {
    if (value % tp != 0)
      throw std::invalid_argument(std::string(key) + " = " + std::to_string(value) +
                                  " does not divide by tp = " + std::to_string(tp));
    return value / tp;
  };
  c.heads = split(cfg.heads, "model.heads");
  c.d_ff = split(cfg.d_ff, "model.d_ff");
  c.vocab = split(cfg.vocab, "model.vocab");
  return c;
}

int64_t optimizer_state_elems(const core::OptimConfig& optim, const Shapes& shapes,
                              const std::vector<bool>& owned) {
  const core::OptimConfig& o = optim;  // kind and min_dim_to_factor need no resolve()
  int64_t total = 0;
  for (size_t p = 0; p < shapes.size(); ++p) {
    if (!owned.empty() && !owned[p]) continue;
    const int64_t n = numel(shapes[p]);
    if (o.kind == core::OptimKind::kAdamW) {
      total += 2 * n;  // m, v
      continue;
    }
    total += n;  // momentum m (MODEL §10c)
    const auto axes = core::adafactor_factor_axes(shapes[p], o.min_dim_to_factor);
    if (!axes)
      total += n;  // full v
    else  // R drops the largest axis, C the second-largest (length r + c for a matrix)
      total += n / shapes[p][size_t(axes->largest)] + n / shapes[p][size_t(axes->normalized)];
  }
  return total;
}

MemoryPrediction predict_rank_memory(const core::ModelConfig& cfg_in, const core::OptimConfig& optim,
                                     int streams, int dp, bool zero, int dp_rank, int elem_bytes) {
  core::ModelConfig c = cfg_in;
  c.resolve();
  const Shapes shapes = model_param_shapes(c);
  int64_t params = 0;
  std::vector<int64_t> numels;
  for (const auto& s : shapes) {
    numels.push_back(numel(s));
    params += numels.back();
  }
  std::vector<bool> owned;
  if (zero && dp > 1) {
    const ParamPartition part = partition_parameters(numels, dp);
    owned.assign(shapes.size(), false);
    for (size_t p = 0; p < shapes.size(); ++p) owned[p] = part.owner[p] == dp_rank;
  }
  const int64_t B = streams, D = c.d_model, A = c.attn_width(), F = c.d_ff, V = c.vocab,
                rows = B * c.seq_len;
  // core/model.cpp: resid [L+1][rows, D], final_h, final_rstd, logits [rows, V], row_loss,
  // scratch d_model, d_norm [rows, D], d_ff [2, rows, F], d_attn 6×[rows, A], d_resid_a, _b.
  int64_t reported = (c.layers + 1) * rows * D + rows * D + rows + rows * V + rows + 2 * rows * D +
                     2 * rows * F + 6 * rows * A + 2 * rows * D;
  int64_t scratch = 0, carried = 0, reported_bytes = 0;
  for (int i = 0; i < c.layers; ++i) {
    const LayerElems e = c.is_bst_layer(i)         ? bst_layer_elems(c, B, elem_bytes)
                         : c.is_recurrent_layer(i) ? recurrent_layer_elems(c, B)
                                                   : standard_layer_elems(c, B);
    reported += e.reported;
    reported_bytes += e.reported_bytes;
    scratch += e.scratch;
    carried += e.carried;
  }
  MemoryPrediction m;
  m.parameters = params * elem_bytes;
  m.gradients = params * elem_bytes;
  m.optimizer = optimizer_state_elems(optim, shapes, owned) * elem_bytes;
  m.activations = reported * elem_bytes + reported_bytes;
  m.backward_scratch = scratch * elem_bytes + B;  // + doc_start_ (uint8 per stream)
  m.carried_state = carried * elem_bytes;
  return m;
}

}  // namespace brt::launch
