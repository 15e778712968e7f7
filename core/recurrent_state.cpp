#include "core/recurrent_state.h"

#include <array>

#include "core/linear.h"

namespace brt::core {

template <typename T>
RecurrentStateSide<T>::RecurrentStateSide(ParamStore<T>& store, const ModelConfig& cfg,
                                          const std::string& prefix, int streams)
    : store_(store),
      cfg_(cfg),
      shape_{cfg.d_model, cfg.heads, cfg.head_dim},
      streams_(streams),
      rows_(streams * cfg.state_size),
      dual_(cfg.rec_config == RecurrentConfig::kDual) {
  const int D = cfg.d_model, A = cfg.attn_width(), H = cfg.heads, S = cfg.state_size;
  const std::string sp = prefix + "state.";
  proj_.norm = declare_norm(store, sp + "norm.scale", D);
  proj_.ids = declare_normal(store, sp + "ids", {S, D}, 1.0);
  proj_.id_rows = S;
  // init [S, D] ~ N(0, 0.1) is declared by the owner (it is read at document starts).
  proj_.weights = {declare_matrix(store, sp + "wq", D, A), declare_matrix(store, sp + "wk", D, A),
                   declare_matrix(store, sp + "wv", D, A), declare_matrix(store, sp + "wq2", D, A)};
  proj_.normalised = {true, true, false, true};
  scale1_ = declare_ones(store, sp + "scale", {H});
  scale2_ = declare_ones(store, sp + "scale2", {H});
  wo_ = declare_matrix(store, sp + "wo", 2 * A, D);
  gate1_ = declare_gate(store, sp + "gate.", cfg.gate, 2 * A, D);
  if (dual_) {
    mlp_ = declare_mlp(store, sp + "norm2.scale", sp, D, cfg.d_ff);
    gate2_ = declare_gate(store, sp + "gate2.", cfg.gate, cfg.d_ff, D);
  }

  const int blocks = cfg.blocks(), W = cfg.window, R = rows_;
  const size_t rd = static_cast<size_t>(R) * D, ra = static_cast<size_t>(R) * A;
  sigma_.assign(blocks + 1, std::vector<T>(rd, T(0)));
  proj_acts_.resize(blocks);
  gate1_acts_.resize(blocks);
  for (int t = 0; t < blocks; ++t) {
    proj_acts_[t].allocate(proj_, shape_, R);
    gate1_acts_[t].allocate(gate1_, R);
  }
  probs_ss_.assign(blocks, std::vector<T>(static_cast<size_t>(streams) * H * S * S, T(0)));
  probs_se_.assign(blocks, std::vector<T>(static_cast<size_t>(streams) * H * S * 2 * W, T(0)));
  a_ss_.assign(blocks, std::vector<T>(ra, T(0)));
  a_se_.assign(blocks, std::vector<T>(ra, T(0)));
  u1_.assign(blocks, std::vector<T>(rd, T(0)));
  if (dual_) {
    gated_.assign(blocks, std::vector<T>(rd, T(0)));
    u2_.assign(blocks, std::vector<T>(rd, T(0)));
    mlp_acts_.resize(blocks);
    gate2_acts_.resize(blocks);
    for (int t = 0; t < blocks; ++t) {
      mlp_acts_[t].allocate(mlp_, R);
      gate2_acts_[t].allocate(gate2_, R);
    }
    d_gated_.assign(rd, T(0));
    du2_.assign(rd, T(0));
    scratch_f_.assign(2 * static_cast<size_t>(R) * cfg.d_ff, T(0));
    dm_.assign(static_cast<size_t>(R) * cfg.d_ff, T(0));
  }
  for (auto* v : {&d_next_, &d_cur_, &du1_, &dzf_, &dzi_, &scratch_d_, &zf_, &zi_})
    v->assign(rd, T(0));
  for (auto* v : {&d_ass_, &d_ase_, &dq_, &dk_, &dv_, &dq2_, &scratch_a_}) v->assign(ra, T(0));
}

template <typename T>
void RecurrentStateSide<T>::forward(kernels::Backend<T>& be, const T* sigma0, const T* k_ext,
                                    const T* v_ext) {
  const int D = shape_.d_model, A = shape_.width(), H = shape_.heads, dh = shape_.head_dim;
  const int S = cfg_.state_size, W = cfg_.window, N = cfg_.seq_len, R = rows_;
  const int64_t rd = static_cast<int64_t>(R) * D;
  be.copy(sigma0, rd, sigma_[0].data());
  // Σ_t attends to itself (S×S) and to block t's 2W-token window (S×2W), no mask (§5.2).
  const kernels::CrossAttnDims self{streams_, S, S, H, dh, int64_t(S) * A, int64_t(S) * A, false};
  const kernels::CrossAttnDims window{streams_, S, 2 * W, H, dh, int64_t(S) * A,
                                      int64_t(W + N) * A, false};
  const T* wo = store_[wo_].value;
  for (int t = 0; t < cfg_.blocks(); ++t) {
    const T* sig = sigma_[t].data();
    ProjectionActs<T>& pa = proj_acts_[t];
    projections_forward(be, store_, proj_, shape_, sig, R, pa);
    be.cross_attention_forward(self, pa.out[0].data(), pa.out[1].data(), pa.out[2].data(),
                               store_[scale1_].value, a_ss_[t].data(), probs_ss_[t].data());
    const int64_t win = int64_t(t) * W * A;
    be.cross_attention_forward(window, pa.out[3].data(), k_ext + win, v_ext + win,
                               store_[scale2_].value, a_se_[t].data(), probs_se_[t].data());
    // c = concat(A_ss, A_se); u = c·Wo_s (Wo_s rows [0, A) act on A_ss, [A, 2A) on A_se).
    linear_forward(be, a_ss_[t].data(), R, A, wo, D, u1_[t].data());
    linear_forward(be, a_se_[t].data(), R, A, wo + int64_t(A) * D, D, u1_[t].data(), T(1));
    const std::array<std::pair<const T*, int>, 2> c = {{{a_ss_[t].data(), A}, {a_se_[t].data(), A}}};
    T* next = sigma_[t + 1].data();
    if (!dual_) {
      gate_forward(be, store_, gate1_, sig, u1_[t].data(), c, R, next, gate1_acts_[t],
                   zf_.data(), zi_.data());
      continue;
    }
    // dual: U = Gate1(Σ, c·Wo_s); m = ReLU(RMSNorm_s2(U)·W1_s); Σ' = Gate2(U, m·W2_s, y = m).
    gate_forward(be, store_, gate1_, sig, u1_[t].data(), c, R, gated_[t].data(), gate1_acts_[t],
                 zf_.data(), zi_.data());
    mlp_forward(be, store_, mlp_, gated_[t].data(), R, mlp_acts_[t], u2_[t].data(), T(0));
    const std::array<std::pair<const T*, int>, 1> m = {{{mlp_acts_[t].m.data(), cfg_.d_ff}}};
    gate_forward(be, store_, gate2_, gated_[t].data(), u2_[t].data(), m, R, next,
                 gate2_acts_[t], zf_.data(), zi_.data());
  }
}

template <typename T>
void RecurrentStateSide<T>::backward(kernels::Backend<T>& be, const T* k_ext, const T* v_ext,
                                     const T* dk_s, const T* dv_s, T* dk_ext, T* dv_ext,
                                     T* d_sigma0) {
  const int D = shape_.d_model, A = shape_.width(), H = shape_.heads, dh = shape_.head_dim;
  const int S = cfg_.state_size, W = cfg_.window, N = cfg_.seq_len, R = rows_;
  const int64_t rd = int64_t(R) * D, ra = int64_t(R) * A;
  const kernels::CrossAttnDims self{streams_, S, S, H, dh, int64_t(S) * A, int64_t(S) * A, false};
  const kernels::CrossAttnDims window{streams_, S, 2 * W, H, dh, int64_t(S) * A,
                                      int64_t(W + N) * A, false};
  auto& wo = store_[wo_];
  // Σ_T is carried to the next segment detached (§8): no gradient enters from above.
  be.fill(d_next_.data(), rd, T(0));
  for (int t = cfg_.blocks() - 1; t >= 0; --t) {
    const T* sig = sigma_[t].data();
    const std::array<std::pair<const T*, int>, 2> c = {{{a_ss_[t].data(), A}, {a_se_[t].data(), A}}};
    be.fill(d_cur_.data(), rd, T(0));
    be.fill(du1_.data(), rd, T(0));
    be.fill(d_ass_.data(), ra, T(0));
    be.fill(d_ase_.data(), ra, T(0));
    const std::array<T*, 2> dc = {d_ass_.data(), d_ase_.data()};
    if (!dual_) {
      gate_backward(be, store_, gate1_, sig, u1_[t].data(), c, R, gate1_acts_[t], d_next_.data(),
                    d_cur_.data(), du1_.data(), dc, dzf_.data(), dzi_.data());
    } else {
      const std::array<std::pair<const T*, int>, 1> m = {{{mlp_acts_[t].m.data(), cfg_.d_ff}}};
      const std::array<T*, 1> dm = {dm_.data()};
      be.fill(d_gated_.data(), rd, T(0));
      be.fill(du2_.data(), rd, T(0));
      be.fill(dm_.data(), int64_t(R) * cfg_.d_ff, T(0));
      gate_backward(be, store_, gate2_, gated_[t].data(), u2_[t].data(), m, R, gate2_acts_[t],
                    d_next_.data(), d_gated_.data(), du2_.data(), dm, dzf_.data(),
                    dzi_.data());
      mlp_backward(be, store_, mlp_, gated_[t].data(), R, mlp_acts_[t], du2_.data(),
                   d_gated_.data(), scratch_f_.data(), scratch_d_.data(), dm_.data());
      gate_backward(be, store_, gate1_, sig, u1_[t].data(), c, R, gate1_acts_[t],
                    d_gated_.data(), d_cur_.data(), du1_.data(), dc, dzf_.data(), dzi_.data());
    }
    // u = A_ss·Wo_s[0:A] + A_se·Wo_s[A:2A]
    linear_backward(be, a_ss_[t].data(), R, A, wo.value, D, du1_.data(), d_ass_.data(), wo.grad);
    linear_backward(be, a_se_[t].data(), R, A, wo.value + int64_t(A) * D, D, du1_.data(),
                    d_ase_.data(), wo.grad + int64_t(A) * D);
    const ProjectionActs<T>& pa = proj_acts_[t];
    for (auto* v : {&dq_, &dq2_}) be.fill(v->data(), ra, T(0));
    // K̂_s and V_s of Σ_t also fed the tokens of block t (their gradient arrives in dk_s/dv_s).
    be.copy(dk_s + int64_t(t) * ra, ra, dk_.data());
    be.copy(dv_s + int64_t(t) * ra, ra, dv_.data());
    be.cross_attention_backward(self, pa.out[0].data(), pa.out[1].data(), pa.out[2].data(),
                                store_[scale1_].value, probs_ss_[t].data(), d_ass_.data(),
                                dq_.data(), dk_.data(), dv_.data(), store_[scale1_].grad);
    const int64_t win = int64_t(t) * W * A;
    be.cross_attention_backward(window, pa.out[3].data(), k_ext + win, v_ext + win,
                                store_[scale2_].value, probs_se_[t].data(), d_ase_.data(),
                                dq2_.data(), dk_ext + win, dv_ext + win, store_[scale2_].grad);
    const std::array<const T*, 4> grads = {dq_.data(), dk_.data(), dv_.data(), dq2_.data()};
    projections_backward(be, store_, proj_, shape_, sig, R, pa, grads, d_cur_.data(),
                         scratch_a_.data(), scratch_d_.data());
    std::swap(d_next_, d_cur_);
  }
  be.copy(d_next_.data(), rd, d_sigma0);
}

template <typename T>
int64_t RecurrentStateSide<T>::activation_bytes() const {
  int64_t n = 0;
  auto add = [&n](const std::vector<std::vector<T>>& vs) {
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
                        &zi_})
    n += static_cast<int64_t>(v->size());
  return n * static_cast<int64_t>(sizeof(T));
}

template class RecurrentStateSide<float>;
template class RecurrentStateSide<double>;

}  // namespace brt::core
