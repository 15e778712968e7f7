#include "core/layers/recurrent_state.h"

#include <array>
#include <cmath>

#include "core/layers/linear.h"

namespace brt::core {

namespace {

// `count` buffers of n elements each in `memory`.
template <typename T>
std::vector<kernels::Buffer<T>> buffers(kernels::Memory& memory, int count, size_t n,
                                        const char* what) {
  std::vector<kernels::Buffer<T>> out(static_cast<size_t>(count));
  for (auto& b : out) b.allocate(memory, n, what);
  return out;
}

}  // namespace

template <typename T>
RecurrentStateSide<T>::RecurrentStateSide(ParamStore<T>& store, const ModelConfig& cfg,
                                          const std::string& prefix, int streams,
                                          kernels::Memory& memory, const TensorParallel& tp)
    : store_(store),
      cfg_(cfg),
      tp_(tp),
      shape_{cfg.d_model, tp.local(cfg.heads, "model.heads"), cfg.head_dim},
      streams_(streams),
      rows_(streams * cfg.state_size),
      local_rows_(streams * tp.local(cfg.state_size, "model.state_size")),
      seq_(tp.active() ? RowSplit(tp, streams, cfg.state_size) : RowSplit()),
      dual_(cfg.rec_config == RecurrentConfig::kDual) {
  const int D = cfg.d_model, A_full = cfg.attn_width(), H_full = cfg.heads, S = cfg.state_size;
  const int A = shape_.width(), H = shape_.heads;  // this rank's
  const std::string sp = prefix + "state.";
  proj_.norm = declare_norm(store, sp + "norm.scale", D);
  proj_.ids = declare_normal(store, sp + "ids", {S, D}, cfg.state_id_std);
  proj_.id_rows = S;
  // init [S, D] ~ N(0, model.state_init_std = 0.1) is declared by the owner (it is read at document starts).
  const auto column = [&](const char* name) {
    return declare_matrix(store, sp + name, D, A_full, 1.0, tp.columns());
  };
  proj_.weights = {column("wq"), column("wk"), column("wv"), column("wq2")};
  proj_.normalised = {true, true, false, true};
  proj_.tp = tp;
  scale1_ = declare_ones(store, sp + "scale", {H_full}, tp.heads());
  scale2_ = declare_ones(store, sp + "scale2", {H_full}, tp.heads());
  wo_ = declare_matrix(store, sp + "wo", 2 * A_full, D, 1.0, tp.rows(2));
  gate1_ = declare_gate(store, sp + "gate.", cfg.gate, 2 * A_full, D, tp, 2, cfg.gate_bias_mean);
  gate1_.seq = seq_;
  if (dual_) {
    mlp_ = declare_mlp(store, sp + "norm2.scale", sp, D, cfg.d_ff, tp);
    mlp_.hidden_for_products = false;  // Gate2 reads m (model.md §5.3)
    gate2_ = declare_gate(store, sp + "gate2.", cfg.gate, cfg.d_ff, D, tp, 1, cfg.gate_bias_mean);
    gate2_.seq = seq_;
  }
  const int F = dual_ ? mlp_.d_ff : 0;  // this rank's hidden units

  const int blocks = cfg.blocks(), W = cfg.window, R = rows_, RL = local_rows_;
  // rd: every row (projections, attentions, MLP); ld: this rank's rows (Σ, gates).
  const size_t rd = static_cast<size_t>(R) * D, ra = static_cast<size_t>(R) * A;
  const size_t ld = static_cast<size_t>(RL) * D;
  sigma_ = buffers<T>(memory, blocks + 1, ld, "recurrent state sigma");
  proj_acts_.resize(blocks);
  gate1_acts_.resize(blocks);
  for (int t = 0; t < blocks; ++t) {
    proj_acts_[t].allocate(memory, proj_, shape_, R);
    gate1_acts_[t].allocate(memory, gate1_, RL);
  }
  probs_ss_ = buffers<T>(memory, blocks, static_cast<size_t>(streams) * H * S * S,
                         "state self-attention probs");
  probs_se_ = buffers<T>(memory, blocks, static_cast<size_t>(streams) * H * S * 2 * W,
                         "state window-attention probs");
  a_ss_ = buffers<T>(memory, blocks, ra, "state self-attention output");
  a_se_ = buffers<T>(memory, blocks, ra, "state window-attention output");
  u1_ = buffers<T>(memory, blocks, ld, "state gate input u1");
  if (dual_) {
    gated_ = buffers<T>(memory, blocks, ld, "state gated U");
    u2_ = buffers<T>(memory, blocks, ld, "state gate input u2");
    mlp_acts_.resize(blocks);
    gate2_acts_.resize(blocks);
    for (int t = 0; t < blocks; ++t) {
      mlp_acts_[t].allocate(memory, mlp_, R);
      gate2_acts_[t].allocate(memory, gate2_, RL);
    }
    d_gated_.allocate(memory, ld, "state backward scratch");
    du2_.allocate(memory, ld, "state backward scratch");
    scratch_f_.allocate(memory, static_cast<size_t>(R) * F, "state backward scratch");
    dm_.allocate(memory, static_cast<size_t>(R) * F, "state backward scratch");
  }
  for (auto* v : {&d_next_, &d_cur_, &du1_, &dzf_, &dzi_, &zf_, &zi_})
    v->allocate(memory, ld, "state scratch");
  scratch_d_.allocate(memory, rd, "state backward scratch");
  for (auto* v : {&d_ass_, &d_ase_, &dq_, &dk_, &dv_, &dq2_, &scratch_a_})
    v->allocate(memory, ra, "state backward scratch");
  if (seq_.active()) {
    for (auto* v : {&sig_full_, &full_a_, &full_b_}) v->allocate(memory, rd, "state gathered rows");
    seq_scratch_.allocate(memory, int64_t(rd));
  }
}

template <typename T>
const T* RecurrentStateSide<T>::all_rows(kernels::Backend<T>& be, const T* local,
                                         kernels::Buffer<T>& buf) {
  if (!seq_.active()) return local;
  seq_.all_gather(be, local, buf.data(), shape_.d_model, seq_scratch_.staging.data());
  return buf.data();
}

template <typename T>
void RecurrentStateSide<T>::forward(kernels::Backend<T>& be, const T* sigma0, const T* k_ext,
                                    const T* v_ext) {
  const int W = cfg_.window, N = cfg_.seq_len, A = shape_.width();
  begin_forward(be, sigma0);
  for (int t = 0; t < cfg_.blocks(); ++t) {
    forward_keys(be, t);
    const int64_t win = int64_t(t) * W * A;
    forward_update(be, t, k_ext + win, v_ext + win, int64_t(W + N) * A);
  }
}

template <typename T>
void RecurrentStateSide<T>::begin_forward(kernels::Backend<T>& be, const T* sigma0) {
  be.copy(sigma0, static_cast<int64_t>(local_rows_) * shape_.d_model, sigma_[0].data());
}

template <typename T>
void RecurrentStateSide<T>::forward_keys(kernels::Backend<T>& be, int t) {
  // Sequence parallel: all-gather Σ's rows before the column-parallel projections.
  projections_forward(be, store_, proj_, shape_, all_rows(be, sigma_[t].data(), sig_full_), rows_,
                      proj_acts_[t]);
}

template <typename T>
void RecurrentStateSide<T>::forward_update(kernels::Backend<T>& be, int t, const T* k_win,
                                           const T* v_win, int64_t kv_stride) {
  const int D = shape_.d_model, A = shape_.width(), H = shape_.heads, dh = shape_.head_dim;
  const int S = cfg_.state_size, W = cfg_.window, R = rows_, RL = local_rows_;
  // Σ_t attends to itself (S×S) and to block t's 2W-token window (S×2W), no mask (§5.2).
  const kernels::CrossAttnDims self{streams_, S, S, H, dh, int64_t(S) * A, int64_t(S) * A, false};
  const kernels::CrossAttnDims window{streams_, S, 2 * W, H, dh, int64_t(S) * A, kv_stride, false};
  const T* wo = store_[wo_].value;
  const T* sig = sigma_[t].data();  // this rank's rows
  ProjectionActs<T>& pa = proj_acts_[t];
  be.cross_attention_forward(self, pa.out[0].data(), pa.out[1].data(), pa.out[2].data(),
                             store_[scale1_].value, a_ss_[t].data(), probs_ss_[t].data());
  be.cross_attention_forward(window, pa.out[3].data(), k_win, v_win, store_[scale2_].value,
                             a_se_[t].data(), probs_se_[t].data());
  // c = concat(A_ss, A_se); u = c·Wo_s (Wo_s rows [0, A) act on A_ss, [A, 2A) on A_se).
  // Row-parallel Wo_s: the partial sums over every row are reduce-scattered to their owners.
  T* u1_all = seq_.active() ? full_a_.data() : u1_[t].data();
  linear_forward(be, a_ss_[t].data(), R, A, wo, D, u1_all);
  linear_forward(be, a_se_[t].data(), R, A, wo + int64_t(A) * D, D, u1_all, T(1));
  if (seq_.active())
    seq_.reduce_scatter(be, u1_all, u1_[t].data(), D, seq_scratch_.staging.data());
  const std::array<std::pair<const T*, int>, 2> c = {{{a_ss_[t].data(), A}, {a_se_[t].data(), A}}};
  T* next = sigma_[t + 1].data();
  if (!dual_) {
    gate_forward(be, store_, gate1_, sig, u1_[t].data(), c, RL, next, gate1_acts_[t], zf_.data(),
                 zi_.data(), seq_scratch());
    return;
  }
  // dual: U = Gate1(Σ, c·Wo_s); m = ReLU(RMSNorm_s2(U)·W1_s); Σ' = Gate2(U, m·W2_s, y = m).
  gate_forward(be, store_, gate1_, sig, u1_[t].data(), c, RL, gated_[t].data(), gate1_acts_[t],
               zf_.data(), zi_.data(), seq_scratch());
  // The MLP runs on every row (its W2 output is all-reduced inside); this rank keeps its rows.
  T* u2_all = seq_.active() ? full_a_.data() : u2_[t].data();
  mlp_forward(be, store_, mlp_, all_rows(be, gated_[t].data(), sig_full_), R, mlp_acts_[t], u2_all,
              T(0));
  if (seq_.active()) {
    be.fill(u2_[t].data(), int64_t(RL) * D, T(0));
    seq_.add_local_rows(be, u2_all, u2_[t].data(), D);
  }
  const std::array<std::pair<const T*, int>, 1> m = {{{mlp_acts_[t].m.data(), mlp_.d_ff}}};
  gate_forward(be, store_, gate2_, gated_[t].data(), u2_[t].data(), m, RL, next, gate2_acts_[t],
               zf_.data(), zi_.data(), seq_scratch());
}

template <typename T>
void RecurrentStateSide<T>::backward(kernels::Backend<T>& be, const T* k_ext, const T* v_ext,
                                     const T* dk_s, const T* dv_s, T* dk_ext, T* dv_ext,
                                     T* d_sigma0) {
  const int W = cfg_.window, N = cfg_.seq_len, A = shape_.width();
  const int64_t ra = int64_t(rows_) * A;
  begin_backward(be);
  for (int t = cfg_.blocks() - 1; t >= 0; --t) {
    const int64_t win = int64_t(t) * W * A;
    backward_update(be, t, k_ext + win, v_ext + win, int64_t(W + N) * A, dk_ext + win,
                    dv_ext + win);
    backward_keys(be, t, dk_s + int64_t(t) * ra, dv_s + int64_t(t) * ra);
  }
  end_backward(be, d_sigma0);
}

template <typename T>
void RecurrentStateSide<T>::begin_backward(kernels::Backend<T>& be) {
  // Σ_T is carried to the next segment detached (§8): no gradient enters from above.
  be.fill(d_next_.data(), int64_t(local_rows_) * shape_.d_model, T(0));
}

template <typename T>
void RecurrentStateSide<T>::end_backward(kernels::Backend<T>& be, T* d_sigma0) {
  be.copy(d_next_.data(), int64_t(local_rows_) * shape_.d_model, d_sigma0);
}

template <typename T>
void RecurrentStateSide<T>::backward_update(kernels::Backend<T>& be, int t, const T* k_win,
                                            const T* v_win, int64_t kv_stride, T* dk_win,
                                            T* dv_win) {
  const int D = shape_.d_model, A = shape_.width(), H = shape_.heads, dh = shape_.head_dim;
  const int S = cfg_.state_size, W = cfg_.window, R = rows_, RL = local_rows_;
  const int64_t rd = int64_t(R) * D, ra = int64_t(R) * A, ld = int64_t(RL) * D;
  const kernels::CrossAttnDims window{streams_, S, 2 * W, H, dh, int64_t(S) * A, kv_stride, false};
  auto& wo = store_[wo_];
  const T* sig = sigma_[t].data();
  const std::array<std::pair<const T*, int>, 2> c = {{{a_ss_[t].data(), A}, {a_se_[t].data(), A}}};
  be.fill(d_cur_.data(), ld, T(0));
  be.fill(du1_.data(), ld, T(0));
  be.fill(d_ass_.data(), ra, T(0));
  be.fill(d_ase_.data(), ra, T(0));
  const std::array<T*, 2> dc = {d_ass_.data(), d_ase_.data()};
  if (!dual_) {
    gate_backward(be, store_, gate1_, sig, u1_[t].data(), c, RL, gate1_acts_[t], d_next_.data(),
                  d_cur_.data(), du1_.data(), dc, dzf_.data(), dzi_.data(), seq_scratch());
  } else {
    const std::array<std::pair<const T*, int>, 1> m = {{{mlp_acts_[t].m.data(), mlp_.d_ff}}};
    const std::array<T*, 1> dm = {dm_.data()};
    be.fill(d_gated_.data(), ld, T(0));
    be.fill(du2_.data(), ld, T(0));
    be.fill(dm_.data(), int64_t(R) * mlp_.d_ff, T(0));
    gate_backward(be, store_, gate2_, gated_[t].data(), u2_[t].data(), m, RL, gate2_acts_[t],
                  d_next_.data(), d_gated_.data(), du2_.data(), dm, dzf_.data(), dzi_.data(),
                  seq_scratch());
    // The MLP ran on every row: gather du2 and U, and keep this rank's rows of dU (complete
    // on every rank: the column-parallel W1's input gradient is all-reduced inside).
    const T* du2_all = all_rows(be, du2_.data(), full_a_);
    const T* gated_all = all_rows(be, gated_[t].data(), full_b_);
    T* d_gated_all = seq_.active() ? sig_full_.data() : d_gated_.data();
    if (seq_.active()) be.fill(d_gated_all, rd, T(0));
    mlp_backward(be, store_, mlp_, gated_all, R, mlp_acts_[t], du2_all, d_gated_all,
                 scratch_f_.data(), scratch_d_.data(), dm_.data());
    if (seq_.active()) seq_.add_local_rows(be, d_gated_all, d_gated_.data(), D);
    gate_backward(be, store_, gate1_, sig, u1_[t].data(), c, RL, gate1_acts_[t], d_gated_.data(),
                  d_cur_.data(), du1_.data(), dc, dzf_.data(), dzi_.data(), seq_scratch());
  }
  // u = A_ss·Wo_s[0:A] + A_se·Wo_s[A:2A] (du gathered: Wo_s read every row)
  const T* du1_all = all_rows(be, du1_.data(), full_a_);
  linear_backward(be, a_ss_[t].data(), R, A, wo.value, D, du1_all, d_ass_.data(), wo.grad);
  linear_backward(be, a_se_[t].data(), R, A, wo.value + int64_t(A) * D, D, du1_all,
                  d_ase_.data(), wo.grad + int64_t(A) * D);
  for (auto* v : {&dq_, &dq2_}) be.fill(v->data(), ra, T(0));
  be.cross_attention_backward(window, proj_acts_[t].out[3].data(), k_win, v_win,
                              store_[scale2_].value, probs_se_[t].data(), d_ase_.data(),
                              dq2_.data(), dk_win, dv_win, store_[scale2_].grad);
}

template <typename T>
void RecurrentStateSide<T>::backward_keys(kernels::Backend<T>& be, int t, const T* dk_s_t,
                                          const T* dv_s_t) {
  const int D = shape_.d_model, A = shape_.width(), H = shape_.heads, dh = shape_.head_dim;
  const int S = cfg_.state_size, R = rows_;
  const int64_t rd = int64_t(R) * D, ra = int64_t(R) * A;
  const kernels::CrossAttnDims self{streams_, S, S, H, dh, int64_t(S) * A, int64_t(S) * A, false};
  const ProjectionActs<T>& pa = proj_acts_[t];
  // K̂_s and V_s of Σ_t also fed the tokens of block t (their gradient arrives in dk_s/dv_s).
  be.copy(dk_s_t, ra, dk_.data());
  be.copy(dv_s_t, ra, dv_.data());
  be.cross_attention_backward(self, pa.out[0].data(), pa.out[1].data(), pa.out[2].data(),
                              store_[scale1_].value, probs_ss_[t].data(), d_ass_.data(),
                              dq_.data(), dk_.data(), dv_.data(), store_[scale1_].grad);
  const std::array<const T*, 4> grads = {dq_.data(), dk_.data(), dv_.data(), dq2_.data()};
  // The projections read every row of Σ_t; their input gradient is complete on every rank
  // (all-reduced inside), so this rank keeps its rows.
  const T* sig = sigma_[t].data();
  const T* sig_all = all_rows(be, sig, sig_full_);
  T* d_sig_all = seq_.active() ? full_b_.data() : d_cur_.data();
  if (seq_.active()) be.fill(d_sig_all, rd, T(0));
  projections_backward(be, store_, proj_, shape_, sig_all, R, pa, grads, d_sig_all,
                       scratch_a_.data(), scratch_d_.data());
  if (seq_.active()) seq_.add_local_rows(be, d_sig_all, d_cur_.data(), D);
  std::swap(d_next_, d_cur_);
}

template <typename T>
int64_t RecurrentStateSide<T>::activation_bytes() const {
  int64_t n = 0;
  auto add = [&n](const Buffers& vs) {
    for (const auto& v : vs) n += static_cast<int64_t>(v.size()) * sizeof(T);
  };
  add(sigma_);
  add(probs_ss_);
  add(probs_se_);
  add(a_ss_);
  add(a_se_);
  add(u1_);
  add(gated_);
  add(u2_);
  for (const auto& a : proj_acts_) n += a.bytes();
  for (const auto& a : gate1_acts_) n += a.bytes();
  for (const auto& a : gate2_acts_) n += a.bytes();
  for (const auto& a : mlp_acts_) n += a.bytes();
  return n;
}

template <typename T>
int64_t RecurrentStateSide<T>::backward_scratch_bytes() const {
  int64_t n = 0;
  for (const auto* v : {&d_next_, &d_cur_, &du1_, &d_gated_, &du2_, &dzf_, &dzi_, &d_ass_, &d_ase_,
                        &dq_, &dk_, &dv_, &dq2_, &scratch_a_, &scratch_d_, &scratch_f_, &dm_, &zf_,
                        &zi_, &sig_full_, &full_a_, &full_b_})
    n += static_cast<int64_t>(v->size());
  return n * static_cast<int64_t>(sizeof(T)) + seq_scratch_.bytes();
}

template <typename T>
void RecurrentStateSide<T>::accumulate_gate_statistics(kernels::Memory& memory,
                                                       const uint8_t* active,
                                                       LayerDiagnostics& out) const {
  const int D = cfg_.d_model, S_local = local_rows_ / streams_;
  const auto one_gate = [&](const GateParams& p, const std::vector<GateActs<T>>& acts,
                            MomentSums& gate, MomentSums& input) {
    if (p.kind == GateKind::kFixed) {  // g = σ(b), a parameter: counted once (model.md §5.3)
      if (gate.count > 0) return;
      for (T b : kernels::copy_to_host(memory, store_[p.bias].value, size_t(D)))
        gate.add(1.0 / (1.0 + std::exp(-double(b))));
      return;
    }
    for (const auto& a : acts) {  // lstm: f and i of each block, the active streams' rows
      const auto f = kernels::copy_to_host(memory, a.f.data(), a.f.size());
      const auto i = kernels::copy_to_host(memory, a.i.data(), a.i.size());
      for (int b = 0; b < streams_; ++b) {
        if (!active[b]) continue;
        const size_t begin = size_t(b) * S_local * D, end = begin + size_t(S_local) * D;
        for (size_t k = begin; k < end; ++k) {
          gate.add(double(f[k]));
          input.add(double(i[k]));
        }
      }
    }
  };
  one_gate(gate1_, gate1_acts_, out.gate, out.gate_input);
  if (dual_) one_gate(gate2_, gate2_acts_, out.gate2, out.gate2_input);
}

template class RecurrentStateSide<float>;
template class RecurrentStateSide<double>;

}  // namespace brt::core
