// Memory side of the planner (launch/plan/planner.h): model.md §9 shapes in declaration order, the
// optimizer state of model.md §10c, and the activation buffers each constructor allocates.
#include <stdexcept>
#include <string>

#include "core/optim/adafactor.h"
#include "core/sharding/context_parallel.h"
#include "core/data_parallel.h"
#include "core/tp_split.h"
#include "kernels/backend.h"
#include "launch/plan/planner.h"

#include "core/sharding/context_parallel.h"
#include "kernels/backend.h"

namespace brt::launch {

namespace {

using Shapes = std::vector<std::vector<int64_t>>;

constexpr int64_t kT5Buckets = 32;  // model.md §9: attn.rel_bias [H, 32]

// model.md §9 shapes in declaration order, each with its tensor-parallel split axis (-1:
// replicated), as docs/parallelism.md "Shapes on every rank" lists them.
struct Declared {
  Shapes shapes;
  std::vector<int> split;
  void add(std::vector<int64_t> shape, int dim) {
    shapes.push_back(std::move(shape));
    split.push_back(dim);
  }
};

// core/layers/gate.cpp declare_gate: fixed -> bias [D]; lstm -> wf, wi [in, D] (rows split), bf, bi [D].
void add_gate(Declared& s, core::GateKind kind, int64_t in, int64_t D) {
  if (kind == core::GateKind::kFixed) {
    s.add({D}, -1);
    return;
  }
  s.add({in, D}, 0);
  s.add({in, D}, 0);
  s.add({D}, -1);
  s.add({D}, -1);
}

// core/layers/mlp.cpp declare_mlp: norm [D], w1 [D, F] (columns), w2 [F, D] (rows).
void add_mlp(Declared& s, int64_t D, int64_t F) {
  s.add({D}, -1);
  s.add({D, F}, 1);
  s.add({F, D}, 0);
}

// core/layers/bst_layer.cpp declaration order (model.md §7, §9): the SSM sublayer (a member built first),
// then the attention, the MLP, and MF's context IDs and initial context. Under TP the SSM
// features Ds and the heads are split (docs/parallelism.md, BST rows).
void add_bst_layer(Declared& s, const core::ModelConfig& c) {
  const int64_t D = c.d_model, A = c.attn_width(), H = c.heads, F = c.d_ff, Ds = c.ssm_features();
  const bool mf = c.bst_variant == core::BstVariant::kMF, mh = c.bst_variant == core::BstVariant::kMH;
  const int64_t C = c.ssm_channels(), M = c.ssm_state / 2, O = 64;
  s.add({D}, -1);                                 // ssm.norm.scale
  s.add({D, Ds}, 1);                              // ssm.w_dn: features
  if (mh)
    s.add({H, Ds, D}, 1);                         // ssm.w_up (MH): features
  else
    s.add({Ds, D}, 0);                            // ssm.w_up: features
  s.add({C, Ds}, 1);                              // ssm.dskip
  if (c.ssm_kernel == core::SsmKernel::kS4D) {
    s.add({C, Ds}, 1);                            // ssm.log_dt
    for (int k = 0; k < 4; ++k) s.add({C, Ds, M}, 1);  // a_re, a_im, c_re, c_im
  } else {  // ssm.filter.w0 b0 w1 b1 w2 b2 freq (replicated), w_out (this rank's filters)
    for (const auto& shape : {std::vector<int64_t>{3, O}, {O}, {O, O}, {O}, {O, O}, {O}, {O}})
      s.add(shape, -1);
    s.add({O, C * Ds}, 1);
  }
  s.add({D}, -1);                                 // attn_norm.scale
  for (int k = 0; k < 4; ++k) s.add({D, A}, 1);   // wq, wk, wv, wq2: heads
  s.add({D}, -1);                                 // attn.ctx_norm.scale
  s.add({D, A}, 1);                               // attn.wkc
  s.add({D, A}, 1);                               // attn.wvc
  s.add({2 * A, D}, 0);                           // attn.wo
  s.add({H}, 0);                                  // attn.scale
  s.add({H}, 0);                                  // attn.scale2
  s.add({H, kT5Buckets}, 0);                      // attn.rel_bias
  add_mlp(s, D, F);
  if (mf) {
    s.add({c.ctx_states, D}, -1);  // ssm.ctx_ids
    s.add({c.ctx_states, D}, -1);  // ssm.ctx_init
  }
}

Declared declared_params(const core::ModelConfig& c) {
  const int64_t D = c.d_model, A = c.attn_width(), H = c.heads, F = c.d_ff, V = c.vocab,
                S = c.state_size;
  Declared s;
  s.add({V, D}, 0);  // embed: vocabulary rows
  for (int i = 0; i < c.layers; ++i) {
    if (c.is_bst_layer(i)) {
      add_bst_layer(s, c);
      continue;
    }
    const bool rec = c.is_recurrent_layer(i) || c.feedback;  // the recurrent token side
    // RecurrentStateSide is a member built before the token side's body runs (in the feedback
    // stack, before every layer's token side).
    if (c.feedback ? i == 0 : c.is_recurrent_layer(i)) {
      s.add({D}, -1);     // state.norm.scale
      s.add({S, D}, -1);  // state.ids (replicated)
      for (int k = 0; k < 4; ++k) s.add({D, A}, 1);  // state.wq, wk, wv, wq2: heads
      s.add({H}, 0);      // state.scale
      s.add({H}, 0);      // state.scale2
      s.add({2 * A, D}, 0);  // state.wo
      add_gate(s, c.gate, 2 * A, D);
      if (c.rec_config == core::RecurrentConfig::kDual) {
        add_mlp(s, D, F);  // state.norm2.scale, state.w1, state.w2
        add_gate(s, c.gate, F, D);
      }
    }
    s.add({D}, -1);  // attn_norm.scale
    for (int k = 0; k < (rec ? 4 : 3); ++k) s.add({D, A}, 1);
    s.add({rec ? 2 * A : A, D}, 0);  // attn.wo
    s.add({H}, 0);                   // attn.scale
    if (rec) s.add({H}, 0);          // attn.scale2
    s.add({H, kT5Buckets}, 0);       // attn.rel_bias
    add_mlp(s, D, F);
    if (c.is_recurrent_layer(i)) s.add({S, D}, 0);  // state.init: state rows
  }
  s.add({D}, -1);  // final_norm.scale
  return s;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Elements of ProjectionActs::allocate (core/layers/projections.cpp): h [R, D], rstd [R], out [R, A] per
// projection, rnorm [R, H] per normalised projection (A, H: this TP rank's).
int64_t projection_acts(int64_t R, int64_t D, int64_t A, int64_t H, int projections, int normalised) {
  return R * D + R + projections * R * A + normalised * R * H;
}

// MlpActs::allocate: h [R, D], rstd [R], m [R, F] (F: this rank's), and under TP the
// row-parallel output's partial sum u [R, D].
int64_t mlp_acts(int64_t R, int64_t D, int64_t F, bool tp) { return R * D + R + R * F + (tp ? R * D : 0); }

struct LayerElems {
  int64_t reported = 0, scratch = 0, carried = 0;
  int64_t reported_bytes = 0;  // buffers whose element type is not T (double S4D state, flags)
};

// One TP rank's sizes (docs/parallelism.md, "Shapes on every rank"): heads, attention width and
// hidden units are this rank's; the state side runs its projections on every state row and
// keeps Σ, gates and their gradients for its own rows (sequence parallelism).
struct RankDims {
  int64_t D, A, H, F, V, N, W, S, S_local, Tb;
  bool tp;
  RankDims(const core::ModelConfig& c, int P)
      : D(c.d_model), A(c.attn_width() / P), H(c.heads / P), F(c.d_ff / P), V(c.vocab / P),
        N(c.seq_len), W(c.window), S(c.state_size), S_local(c.state_size / P), Tb(c.blocks()),
        tp(P > 1) {}
};

// Context parallelism's window buffers (core/layers/cached_window_attention.cpp): the halo sent and
// the one received, and (unless the blocks are detached, xl) the two-block problem of the halo's
// gradient (q, k, v, out, dq, dk, dv [B, 2W, A], the zero cache, probabilities [B, 2, H, W, 2W])
// and its discarded bias and scale gradients.
int64_t window_cp_elems(const RankDims& d, int64_t B, int cp, bool detached) {
  if (cp == 1) return 0;
  const int64_t block = B * d.W * d.A;
  if (detached) return 4 * block;
  return 2 * block + 2 * block + 7 * 2 * block + block + B * 2 * d.H * d.W * 2 * d.W +
         d.H * kernels::kT5Buckets + d.H;
}

// core/standard_layer.cpp constructor. xl (detached blocks) with T > 1 also keeps every block's
// cache, [B·T, W, A] for keys and values.
LayerElems standard_layer_elems(const RankDims& d, int64_t B, int cp, bool detached) {
  const int64_t rows = B * d.N, cache = B * d.W * d.A;
  LayerElems e;
  e.reported = projection_acts(rows, d.D, d.A, d.H, 3, 2) + 2 * cache /*k,v_cache_used*/ +
               rows * d.A /*attn_out*/ + rows * d.H * 2 * d.W /*probs*/ + rows * d.D /*y*/ +
               mlp_acts(rows, d.D, d.F, d.tp) + window_cp_elems(d, B, cp, detached) +
               (detached && d.Tb > 1 ? 2 * rows * d.A : 0);
  e.carried = 2 * cache;  // k_cache, v_cache
  return e;
}

void add_state_side(LayerElems& e, const RankDims& d, const core::ModelConfig& c, int64_t B);

// core/layers/recurrent_layer.cpp + core/layers/recurrent_state.cpp constructors.
LayerElems recurrent_layer_elems(const RankDims& d, const core::ModelConfig& c, int64_t B) {
  const int64_t D = d.D, A = d.A, H = d.H, F = d.F, W = d.W, S = d.S, Tb = d.Tb, rows = B * d.N;
  const int64_t cache = B * W * A, ext = B * (W + d.N) * A, sd = B * d.S_local * D;
  LayerElems e;
  // Token side (reported by RecurrentLayer::activation_bytes).
  e.reported = projection_acts(rows, D, A, H, 4, 3) + 2 * cache + 2 * ext /*k,v_ext*/ +
               sd /*sigma0*/ + 2 * rows * A /*a_ee, a_es*/ + rows * H * 2 * W /*probs_ee*/ +
               Tb * B * H * W * S /*probs_es*/ + rows * D /*y*/ + mlp_acts(rows, D, F, d.tp);
  e.scratch = 2 * ext /*dk_ext, dv_ext*/ + sd /*d_sigma0*/ + 2 * Tb * B * S * A /*dk_s, dv_s*/;
  e.carried = 2 * cache + sd;  // k_cache, v_cache, sigma
  add_state_side(e, d, c, B);
  return e;
}

// core/layers/feedback_stack.cpp constructor (model.md §5.4): every layer's token side per block
// (B·W rows, block-major), the two-block window layout, and one state side.
LayerElems feedback_stack_elems(const RankDims& d, const core::ModelConfig& c, int64_t B) {
  const int64_t D = d.D, A = d.A, H = d.H, F = d.F, W = d.W, S = d.S, Tb = d.Tb, L = c.layers;
  const int64_t bw = B * W, cache = B * W * A, sd = B * d.S_local * D, two = 2 * bw * A;
  LayerElems e;
  const int64_t per_block = projection_acts(bw, D, A, H, 4, 3) + 4 * two /*q,k,v,a_ext*/ +
                            B * 2 * H * W * 2 * W /*probs_ext*/ + 2 * bw * A /*a_ee, a_es*/ +
                            B * H * W * S /*probs_es*/ + bw * D /*y*/ + mlp_acts(bw, D, F, d.tp);
  e.reported = (L + 1) * Tb * bw * D /*res_*/ + L * Tb * per_block + 2 * L * cache /*caches used*/ +
               cache /*zero_cache*/ + sd /*sigma0*/;
  e.scratch = 2 * L * Tb * bw * A /*dk_, dv_*/ + 6 * two + 4 * bw * A + 2 * B * S * A /*dk_s, dv_s*/ +
              2 * bw * D /*dres*/ + sd /*d_sigma0*/;
  e.carried = 2 * L * cache + sd;
  add_state_side(e, d, c, B);
  return e;
}

// core/layers/recurrent_state.cpp constructor: R = B·S rows per block for the projections, RL =
// this rank's rows.
void add_state_side(LayerElems& e, const RankDims& d, const core::ModelConfig& c, int64_t B) {
  const int64_t D = d.D, A = d.A, H = d.H, F = d.F, W = d.W, S = d.S, Tb = d.Tb;
  const bool lstm = c.gate == core::GateKind::kLSTM, dual = c.rec_config == core::RecurrentConfig::kDual;
  const int64_t R = B * S, rd = R * D, ra = R * A, ld = B * d.S_local * D;
  const int64_t gate_acts = lstm ? 2 * ld : 0;
  e.reported += (Tb + 1) * ld /*sigma_*/ +
                Tb * (projection_acts(R, D, A, H, 4, 3) + gate_acts + B * H * S * S /*probs_ss*/ +
                      B * H * S * 2 * W /*probs_se*/ + 2 * ra /*a_ss, a_se*/ + ld /*u1*/);
  if (dual) {
    e.reported += Tb * (2 * ld /*gated, u2*/ + mlp_acts(R, D, F, d.tp) + gate_acts);
    e.scratch += 2 * ld /*d_gated, du2*/ + 2 * R * F /*scratch_f*/ + R * F /*dm*/;
  }
  e.scratch += 7 * ld /*d_next .. zi*/ + rd /*scratch_d*/ + 7 * ra /*d_ass .. scratch_a*/;
  if (d.tp) e.scratch += 5 * rd;  // sig_full, full_a, full_b; sequence-parallel full + staging
}

// core/layers/bst_ssm.cpp + core/layers/bst_context.cpp + core/layers/bst_layer.cpp constructors (model.md §7).
// Under TP: this rank's features Ds/P, heads and hidden units (tests/launch/plan checks every
// category against the allocation at TP 1 and 2).
LayerElems bst_layer_elems(const RankDims& d, const core::ModelConfig& c, int64_t B, int tp,
                           int elem_bytes, int cp) {
  const int64_t D = d.D, A = d.A, H = d.H, F = d.F, N = d.N, W = d.W, Tb = d.Tb, rows = B * N,
                cache = B * W * A, Ds = c.ssm_features() / tp;
  const bool mf = c.bst_variant == core::BstVariant::kMF, mh = c.bst_variant == core::BstVariant::kMH;
  const bool s4d = c.ssm_kernel == core::SsmKernel::kS4D;
  const int64_t C = c.ssm_channels(), R = C * Ds, M = c.ssm_state / 2;
  const bool ext = !s4d && c.ssm_carry;  // unstructured carry convolves [U_prev; U]
  const int64_t Lc = ext ? 2 * N : N, y = B * C * Lc * Ds, y_end = mf ? B * Tb * C * Ds : 0;
  // MH keeps every head's context (the row-parallel W_up output is all-reduced whole) and
  // normalises every group; only this rank's heads are projected.
  const int64_t ctx_rows = mf ? B * Tb * C : mh ? c.heads * rows : rows;
  const int64_t kv_rows = mf ? B * Tb * C : rows, G = mh ? c.heads : 1, keys = mf ? c.ctx_states : W;
  const int64_t blocks = mf ? B * Tb * C * D : 0;
  LayerElems e;
  // BstSsm: z, rstd, u, conv_u, kernel, kernel_ext, y, y_end, ctx; double state_used.
  e.reported = rows * D + rows + rows * Ds + (ext ? B * Lc * Ds : 0) + R * N + (ext ? R * Lc : 0) +
               y + y_end + ctx_rows * D;
  const int64_t state = s4d && c.ssm_carry ? B * R * M * 2 : 0;  // doubles
  e.reported_bytes = state * 8 + B /*active_*/ + (mf ? B : 0) /*mf_continues_*/;
  if (s4d && cp > 1) {  // state passing: the state read (also without the carry), the chunk's
    // summary, the previous chunk's state, its gradient and the scan's, every chunk's summary
    // and gradient (doubles), and the chunks' all-active flags
    e.reported_bytes += (c.ssm_carry ? 0 : B * R * M * 2 * 8) + (4 + 2 * cp) * B * R * M * 2 * 8 + B;
  }
  if (mf && cp > 1) e.reported += 2 * B * c.ctx_states * D;  // the last block end sent and received
  // The implicit filter network on the backend (kernels/implicit_filter.h, order 64):
  // z [N, 3], a_i and s_i [N, 64] x 3 layers, the decay rates [R] (doubles); dact, dpre scratch.
  if (!s4d) {
    e.reported += N * (3 + 6 * 64);
    e.reported_bytes += R * 8;
  }
  // Under TP the replicated filter network's gradient is summed over TP in its own buffer.
  const int64_t filter_dgrad = (!s4d && tp > 1) ? 3 * 64 + 4 * 64 + 2 * 64 * 64 : 0;
  e.scratch = filter_dgrad + (s4d ? 0 : 2 * N * 64) /*filter dact, dpre*/ + y /*dy*/ + R * N /*dkernel*/ + (ext ? R * Lc + B * Lc * Ds : 0) + rows * Ds /*du*/ +
              rows * D /*dz*/ + y_end;
  // BstLayer: projections (q k v q2), context projection, caches, attention, MLP.
  e.reported += projection_acts(rows, D, A, H, 4, 3) + G * kv_rows * D + G * kv_rows /*h, rstd*/ +
                2 * kv_rows * A + kv_rows * H /*k, v, rnorm*/ + 2 * cache + 2 * rows * A +
                rows * H * 2 * W + B * Tb * H * W * keys + blocks + rows * D + mlp_acts(rows, D, F, d.tp) +
                window_cp_elems(d, B, cp, false);
  e.scratch += 3 * kv_rows * A + G * kv_rows * D + ctx_rows * D + blocks;
  e.carried = 2 * cache + (state ? state * 8 / elem_bytes : 0) + (ext ? B * N * Ds : 0) +
              (mf ? B * c.ctx_states * D : 0);
  return e;
}

}  // namespace

Shapes model_param_shapes(const core::ModelConfig& c) { return declared_params(c).shapes; }

std::vector<int> model_param_split_dims(const core::ModelConfig& c) { return declared_params(c).split; }

int64_t optimizer_state_elems(const core::OptimConfig& optim, const Shapes& shapes,
                              const std::vector<bool>& owned, const Shapes& local_shapes) {
  const core::OptimConfig& o = optim;  // kind and min_dim_to_factor need no resolve()
  int64_t total = 0;
  for (size_t p = 0; p < shapes.size(); ++p) {
    if (!owned.empty() && !owned[p]) continue;
    // Under TP the whole shape decides the factoring, the rank's slice the sizes (model.md §10c).
    const std::vector<int64_t>& local = local_shapes.empty() ? shapes[p] : local_shapes[p];
    const int64_t n = numel(local);
    if (o.kind == core::OptimKind::kAdamW) {
      total += 2 * n;  // m, v
      continue;
    }
    total += n;  // momentum m (model.md §10c)
    const auto axes = core::adafactor_factor_axes(shapes[p], o.min_dim_to_factor);
    if (!axes)
      total += n;  // full v
    else  // R drops the largest axis, C the second-largest (length r + c for a matrix)
      total += n / local[size_t(axes->largest)] + n / local[size_t(axes->normalized)];
  }
  return total;
}

MemoryPrediction predict_rank_memory(const core::ModelConfig& cfg_in, const core::OptimConfig& optim,
                                     int streams, int dp, bool zero, int dp_rank, int elem_bytes,
                                     int tp, int cp) {
  core::ModelConfig whole = cfg_in;
  whole.resolve();
  // The layers hold this rank's chunk of the segment (core/sharding/context_parallel.h; throws naming why
  // a variant or length does not split).
  const core::ModelConfig full = core::chunk_config(whole, cp);
  if (tp > 1)  // a key that does not divide is named
    if (const std::string problem = core::tensor_parallel_split_problem(full, tp); !problem.empty())
      throw std::invalid_argument(problem);
  // Parameters: the rank's slices (docs/parallelism.md "Shapes on every rank").
  const Declared declared = declared_params(full);
  Shapes local = declared.shapes;
  for (size_t p = 0; p < local.size(); ++p)
    if (tp > 1 && declared.split[p] >= 0) local[p][size_t(declared.split[p])] /= tp;
  int64_t params = 0;
  std::vector<int64_t> numels;
  for (const auto& s : local) {
    numels.push_back(numel(s));
    params += numels.back();
  }
  std::vector<bool> owned;
  if (zero && dp > 1) {
    const core::ParamPartition part = core::partition_parameters(numels, dp);
    owned.assign(local.size(), false);
    for (size_t p = 0; p < local.size(); ++p) owned[p] = part.owner[p] == dp_rank;
  }
  const RankDims d(full, tp);
  const int64_t B = streams, D = d.D, rows = B * d.N;
  // core/model.cpp: resid [L+1][rows, D], final_h, final_rstd, logits [rows, V/TP], row_loss,
  // scratch d_model, d_norm [rows, D], d_ff [2, rows, F/TP], d_attn 6×[rows, A/TP], d_resid_a,
  // _b; under TP the vocabulary-parallel cross-entropy's max, sum and target (double) per row.
  const int64_t layer_objects = full.feedback ? 1 : full.layers;  // the feedback stack is one
  int64_t reported = (layer_objects + 1) * rows * D + rows * D + rows + rows * d.V + rows + 2 * rows * D +
                     2 * rows * d.F + 6 * rows * d.A + 2 * rows * D;
  const int64_t xent_bytes = d.tp ? rows * 3 * 8 : 0;
  int64_t scratch = 0, carried = 0, reported_bytes = 0;
  for (int i = 0; i < full.layers; ++i) {
    if (full.feedback && i > 0) break;
    const LayerElems e = full.feedback                ? feedback_stack_elems(d, full, B)
                         : full.is_bst_layer(i)         ? bst_layer_elems(d, full, B, tp, elem_bytes, cp)
                         : full.is_recurrent_layer(i) ? recurrent_layer_elems(d, full, B)
                                                      : standard_layer_elems(d, B, cp, full.family == core::ModelFamily::kXL);
    reported += e.reported;
    reported_bytes += e.reported_bytes;
    scratch += e.scratch;
    carried += e.carried;
  }
  MemoryPrediction m;
  m.parameters = params * elem_bytes;
  m.gradients = params * elem_bytes;
  m.optimizer = optimizer_state_elems(optim, declared.shapes, owned, local) * elem_bytes;
  // + the step's input tokens, targets (int32) and mask (uint8) the model keeps in backend
  // memory, its staged loss gradient scale (one element) and its loss result (the loss sum and
  // the first bad target row: two doubles).
  const int64_t input_bytes = rows * (2 * int64_t(sizeof(int32_t)) + int64_t(sizeof(uint8_t))) +
                              elem_bytes + 2 * int64_t(sizeof(double));
  m.activations = reported * elem_bytes + reported_bytes + xent_bytes + input_bytes;
  m.backward_scratch = scratch * elem_bytes + B;  // + doc_start_ (uint8 per stream)
  m.carried_state = carried * elem_bytes;
  return m;
}

}  // namespace brt::launch
