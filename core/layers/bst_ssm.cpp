#include "core/layers/bst_ssm.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/layers/linear.h"

namespace brt::core {

namespace ssm = kernels::ssm;

namespace {

template <typename T>
int declare_with(ParamStore<T>& store, const std::string& name, std::vector<int64_t> shape,
                 InitSpec init, ShardSpec shard = {}) {
  return store.declare({name, std::move(shape), init, shard});
}

InitSpec uniform_init(double low, double high) {
  InitSpec s{InitKind::kUniform};
  s.low = low;
  s.high = high;
  return s;
}

// PyTorch's nn.Linear default, U(±1/√fan_in), as the Hyena reference's filter network uses.
InitSpec linear_default_init(int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return uniform_init(-bound, bound);
}

}  // namespace

template <typename T>
BstSsm<T>::BstSsm(ParamStore<T>& store, const ModelConfig& cfg, const std::string& prefix,
                  int streams, kernels::Backend<T>& backend, const TensorParallel& tp,
                  const ContextParallel& cp)
    : store_(store),
      cfg_(cfg),
      tp_(tp),
      prefix_(prefix + "ssm."),
      memory_(backend.memory()),
      streams_(streams),
      channels_(cfg.ssm_channels()),
      d_full_(cfg.ssm_features()),
      d_small_(tp.local(cfg.ssm_features(), "model.d_model / 4 (the BST SSM features Ds)")),
      modes_(cfg.ssm_state / 2),
      s4d_(cfg.ssm_kernel == SsmKernel::kS4D),
      carry_(cfg.ssm_carry),
      cp_(cp.bound_to(backend.memory())) {
  if (cp_.active() && !s4d_)
    throw std::invalid_argument(context_parallel_problem(cfg, 2));
  // Declared with the full Ds (model.md §9); Ds below is this rank's features.
  const int D = cfg.d_model, Ds_full = d_full_, Ds = d_small_, C = channels_, N = cfg.seq_len;
  const ShardSpec features{1, tp.rank(), tp.size(), 1};  // dim 1 of [C, Ds(, M)] and [H, Ds, D]
  conv_len_ = (!s4d_ && carry_) ? 2 * N : N;
  norm_ = declare_norm(store, prefix_ + "norm.scale", D);
  w_dn_ = declare_matrix(store, prefix_ + "w_dn", D, Ds_full, 1.0, tp.columns());
  {
    InitSpec up{InitKind::kTruncNormal};
    up.fan_in = Ds_full;
    std::vector<int64_t> shape = {Ds_full, D};
    ShardSpec shard = tp.rows();
    if (cfg.bst_variant == BstVariant::kMH) {
      shape.insert(shape.begin(), cfg.heads);
      shard = features;
    }
    w_up_ = declare_with(store, prefix_ + "w_up", shape, up, shard);
  }
  dskip_ = declare_normal(store, prefix_ + "dskip", {C, Ds_full}, 1.0, features);
  if (s4d_)
    declare_s4d_modes(features);
  else
    declare_implicit_filter(backend, tp);

  allocate_activations();
  allocate_s4d_state();
  // Plans and spectra (cuFFT work areas on the GPU) here, not in the first step.
  conv_ = backend.make_fft_conv(conv_len_, C, streams, Ds);
}

template <typename T>
void BstSsm<T>::declare_s4d_modes(const ShardSpec& features) {
  const int Ds_full = d_full_, C = channels_, M = modes_;
  // model.md §7.1 S4D-Lin: log Δ ~ U[ln 1e−3, ln 1e−1], a_n = ln 0.5, b_n = π·n, C ~ complex N(0, 1).
  log_dt_ = declare_with(store_, prefix_ + "log_dt", {C, Ds_full},
                         uniform_init(std::log(1e-3), std::log(1e-1)), features);
  InitSpec a_re{InitKind::kConstant};
  a_re.value = std::log(0.5);
  a_re_ = declare_with(store_, prefix_ + "a_re", {C, Ds_full, M}, a_re, features);
  InitSpec a_im{InitKind::kArange};
  a_im.value = std::numbers::pi;
  a_im.period = M;
  a_im_ = declare_with(store_, prefix_ + "a_im", {C, Ds_full, M}, a_im, features);
  c_re_ = declare_normal(store_, prefix_ + "c_re", {C, Ds_full, M}, std::sqrt(0.5), features);
  c_im_ = declare_normal(store_, prefix_ + "c_im", {C, Ds_full, M}, std::sqrt(0.5), features);
}

template <typename T>
void BstSsm<T>::declare_implicit_filter(kernels::Backend<T>& backend, const TensorParallel& tp) {
  const int Ds_full = d_full_, Ds = d_small_, C = channels_, N = cfg_.seq_len;
  const int64_t R = int64_t{C} * Ds;
  const int O = 64, E = ssm::ImplicitFilter<T>::kEmbed;
  const std::string f = prefix_ + "filter.";
  filter_[0] = declare_with(store_, f + "w0", {E, O}, linear_default_init(E));
  filter_[1] = declare_with(store_, f + "b0", {O}, linear_default_init(E));
  filter_[2] = declare_with(store_, f + "w1", {O, O}, linear_default_init(O));
  filter_[3] = declare_with(store_, f + "b1", {O}, linear_default_init(O));
  filter_[4] = declare_with(store_, f + "w2", {O, O}, linear_default_init(O));
  filter_[5] = declare_with(store_, f + "b2", {O}, linear_default_init(O));
  filter_[6] = declare_ones(store_, f + "freq", {O});
  // w_out's columns are the filters r = c·Ds + f: each of the C blocks of Ds columns is
  // split, so a rank makes its own features' filters of every channel.
  filter_[7] = declare_with(store_, f + "w_out", {O, int64_t{C} * Ds_full}, linear_default_init(O),
                            ShardSpec{1, tp.rank(), tp.size(), C});
  filter_net_ = std::make_unique<ssm::ImplicitFilter<T>>(backend, N, static_cast<int>(R), O);
  if (tp.size() > 1) {  // the decay rate follows the global filter index
    std::vector<int> ids(static_cast<size_t>(R));
    for (int c = 0; c < C; ++c)
      for (int j = 0; j < Ds; ++j) ids[size_t(c) * Ds + j] = c * Ds_full + tp.rank() * Ds + j;
    filter_net_->set_filter_ids(ids, C * Ds_full);
    int64_t replicated = 0;
    for (int i = 0; i < 7; ++i) replicated += store_[filter_[i]].spec.numel();
    filter_dgrad_.allocate(memory_, size_t(replicated), "BST filter network gradient");
  }
}

template <typename T>
void BstSsm<T>::allocate_activations() {
  const int D = cfg_.d_model, Ds = d_small_, C = channels_, N = cfg_.seq_len;
  const int64_t R = int64_t{C} * Ds;
  kernels::Memory& memory = memory_;
  const size_t B = streams_, rows = B * N;
  auto buffer = [&memory](kernels::Buffer<T>& b, size_t n, const char* what) {
    b.allocate(memory, n, what);
  };
  buffer(z_, rows * D, "BST SSM norm output");
  buffer(dz_, rows * D, "BST SSM norm gradient");
  buffer(rstd_, rows, "BST SSM norm rstd");
  buffer(u_, rows * Ds, "BST SSM input U");
  buffer(du_, rows * Ds, "BST SSM dU");
  buffer(kernel_, R * N, "BST SSM kernel");
  buffer(dkernel_, R * N, "BST SSM kernel gradient");
  const size_t y = B * C * conv_len_ * Ds;
  buffer(y_, y, "BST SSM convolution output");
  buffer(dy_, y, "BST SSM convolution output gradient");
  if (conv_len_ != N) {
    buffer(conv_u_, B * conv_len_ * Ds, "BST SSM [U_prev; U]");
    buffer(du_conv_, B * conv_len_ * Ds, "BST SSM d[U_prev; U]");
    buffer(kernel_ext_, R * conv_len_, "BST SSM padded kernel");
    buffer(dkernel_ext_, R * conv_len_, "BST SSM padded kernel gradient");
    buffer(u_prev_, rows * Ds, "BST SSM carried U");
  }
  if (cfg_.bst_variant == BstVariant::kMF) {
    buffer(y_end_, B * cfg_.blocks() * C * Ds, "BST SSM MF block ends");
    buffer(dy_end_, y_end_.size(), "BST SSM MF block end gradient");
  }
  buffer(ctx_, static_cast<size_t>(context_rows()) * D, "BST SSM context");
  active_.assign(B, 0);
  active_device_.allocate(memory, B, "BST SSM active streams");
}

template <typename T>
void BstSsm<T>::allocate_s4d_state() {
  const int64_t R = int64_t{channels_} * d_small_;
  const int M = modes_;
  kernels::Memory& memory = memory_;
  const size_t B = streams_;
  const size_t state_elems = B * R * M * 2;
  if (s4d_ && carry_) state_.allocate(memory, state_elems, "BST SSM s4d carried state");
  if (s4d_ && (carry_ || cp_.active()))
    state_used_.allocate(memory, state_elems, "BST SSM s4d state read");
  if (s4d_ && cp_.active()) {
    const size_t all = state_elems * size_t(cp_.size());
    summary_.allocate(memory, state_elems, "BST SSM chunk state summary");
    summaries_.allocate(memory, all, "BST SSM chunk state summaries");
    state_prev_.allocate(memory, state_elems, "BST SSM previous chunk's state");
    state_grad_.allocate(memory, state_elems, "BST SSM chunk state gradient");
    state_grads_.allocate(memory, all, "BST SSM chunk state gradients");
    scan_grad_.allocate(memory, state_elems, "BST SSM scan gradient");
    all_active_.allocate(memory, B, "BST SSM chunk streams");
    all_active_.from_host(std::vector<uint8_t>(B, 1));
  }
}

template <typename T>
BstSsm<T>::~BstSsm() = default;

template <typename T>
int64_t BstSsm<T>::context_rows() const {
  const int64_t BN = int64_t{streams_} * cfg_.seq_len;
  switch (cfg_.bst_variant) {
    case BstVariant::kSH: return BN;
    case BstVariant::kMH: return BN * cfg_.heads;
    case BstVariant::kMF: return int64_t{streams_} * cfg_.blocks() * channels_;
  }
  return BN;
}

template <typename T>
ssm::S4dParams<T> BstSsm<T>::s4d_params() const {
  return {store_[log_dt_].value, store_[a_re_].value, store_[a_im_].value, store_[c_re_].value,
          store_[c_im_].value};
}

template <typename T>
ssm::S4dGrads<T> BstSsm<T>::s4d_grads() const {
  return {store_[log_dt_].grad, store_[a_re_].grad, store_[a_im_].grad, store_[c_re_].grad,
          store_[c_im_].grad};
}

template <typename T>
ssm::ImplicitFilterParams<T> BstSsm<T>::filter_params() const {
  const auto v = [this](int i) -> const T* { return store_[filter_[i]].value; };
  return {v(0), v(1), v(2), v(3), v(4), v(5), v(6), v(7)};
}

// K [C, Ds, N] (model.md §7.1): S4D modes or the implicit filter network, both as backend calls
// on the parameters where they live (on a GPU: device kernels and cuBLAS, no host copy).
template <typename T>
void BstSsm<T>::generate_kernel(kernels::Backend<T>& be) {
  if (s4d_) {
    be.s4d_kernel_forward(ssm::S4dDims{channels_ * d_small_, modes_, cfg_.seq_len}, s4d_params(),
                          kernel_.data());
    return;
  }
  filter_net_->forward(filter_params(), kernel_.data());
}

template <typename T>
T* BstSsm<T>::y_rows(T* y, int b, int c) const {
  const int64_t N = cfg_.seq_len;
  return y + ((int64_t{b} * channels_ + c) * conv_len_ + (conv_len_ - N)) * d_small_;
}

template <typename T>
void BstSsm<T>::stage(const uint8_t* doc_start) {
  staged_active_.resize(size_t(streams_));
  for (int b = 0; b < streams_; ++b) staged_active_[size_t(b)] = carry_ && !doc_start[b];
  if (carry_) active_device_.from_host(staged_active_);
  staged_ = true;
}

template <typename T>
void BstSsm<T>::forward(kernels::Backend<T>& be, const uint8_t* doc_start, const T* x) {
  const int D = cfg_.d_model, Ds = d_small_, C = channels_, N = cfg_.seq_len, B = streams_;
  const int rows = B * N, R = C * Ds;
  x_ = x;
  // Z = RMSNorm_ssm(X); U = Z·W_dn
  be.rmsnorm_forward(x, store_[norm_].value, rows, D, z_.data(), rstd_.data());
  linear_forward(be, z_.data(), rows, D, store_[w_dn_].value, Ds, u_.data());
  generate_kernel(be);
  bool any = false;
  for (int b = 0; b < B; ++b) {
    active_[size_t(b)] = carry_ && !doc_start[b];
    any = any || active_[size_t(b)];
  }
  // Copied here only when stage() did not copy these very values (a direct caller).
  if (carry_ && !(staged_ && staged_active_ == active_)) active_device_.from_host(active_);
  staged_ = false;
  const T* dskip = store_[dskip_].value;
  if (conv_len_ != N) {
    // unstructured carry: convolve [U_prev; U] (U_prev zero at a document start) with the
    // N-tap kernel zero-padded to 2N taps, and keep the last N outputs (model.md §7.3).
    be.copy_rows(kernel_.data(), N, R, N, kernel_ext_.data(), conv_len_);
    const int64_t seg = int64_t{N} * Ds;
    for (int b = 0; b < B; ++b) {
      T* dst = conv_u_.data() + 2 * b * seg;
      if (active_[size_t(b)]) be.copy(u_prev_.data() + b * seg, seg, dst);
      else be.fill(dst, seg, T(0));
    }
    be.copy_rows(u_.data(), seg, B, seg, conv_u_.data() + seg, 2 * seg);
    conv_->forward({B, C, conv_len_, Ds}, kernel_ext_.data(), conv_u_.data(), dskip, y_.data());
    be.copy(u_.data(), int64_t{rows} * Ds, u_prev_.data());
  } else {
    conv_->forward({B, C, N, Ds}, kernel_.data(), u_.data(), dskip, y_.data());
  }
  if (s4d_ && (carry_ || cp_.active())) state_forward(be, any);
  up_forward(be);
}

template <typename T>
void BstSsm<T>::state_forward(kernels::Backend<T>& be, bool any_continues) {
  const int Ds = d_small_, C = channels_, N = cfg_.seq_len, B = streams_, R = C * Ds;
  const ssm::S4dCarryDims cd{B, C, Ds, modes_, N};
  // model.md §7.3: the state entering the segment, zero where a document starts (or carry off).
  if (carry_) {
    const size_t per_stream = size_t(R) * modes_ * 2;
    for (int b = 0; b < B; ++b)
      if (!active_[size_t(b)])
        memory_.fill_zero(state_.data() + b * per_stream, per_stream * sizeof(double));
    memory_.copy(state_used_.data(), state_.data(), size_t(state_.bytes()));
  } else {
    memory_.fill_zero(state_used_.data(), size_t(state_used_.bytes()));
  }
  if (cp_.active()) {
    pass_state_forward(be, cd);  // state_used_ = x_in(r); state_ = the state after the segment
  } else {
    be.s4d_carry_update(cd, s4d_params(), u_.data(), state_.data());
  }
  // Its response on this segment's (chunk's) positions (none when every stream starts from zero).
  if (any_continues || !cp_.first()) be.s4d_carry_apply(cd, s4d_params(), state_used_.data(), y_.data());
}

// x_in(j+1) = w^L·x_in(j) + h_j over the chunks before this one (kernels/ssm/s4d_state_passing.h);
// the carry continues over the rest, so every rank ends with the segment's final state.
template <typename T>
void BstSsm<T>::pass_state_forward(kernels::Backend<T>& be, const ssm::S4dCarryDims& cd) {
  const int64_t n = int64_t(summary_.size());
  memory_.fill_zero(summary_.data(), size_t(summary_.bytes()));
  be.s4d_carry_update(cd, s4d_params(), u_.data(), summary_.data());
  cp_.all_gather(summary_.data(), summaries_.data(), n);
  for (int j = 0; j < cp_.rank(); ++j) {
    if (j == cp_.rank() - 1) memory_.copy(state_prev_.data(), state_used_.data(), size_t(state_used_.bytes()));
    be.s4d_state_advance(cd, s4d_params(), summaries_.data() + j * n, state_used_.data(), false);
  }
  if (!carry_) return;
  memory_.copy(state_.data(), state_used_.data(), size_t(state_.bytes()));
  for (int j = cp_.rank(); j < cp_.size(); ++j)
    be.s4d_state_advance(cd, s4d_params(), summaries_.data() + j * n, state_.data(), false);
}

template <typename T>
void BstSsm<T>::state_backward(kernels::Backend<T>& be) {
  const ssm::S4dCarryDims cd{streams_, channels_, d_small_, modes_, cfg_.seq_len};
  const bool any = std::any_of(active_.begin(), active_.end(), [](uint8_t a) { return a != 0; });
  // The response's parameter gradient (the state itself is detached on chunk 0, §8).
  if (any || !cp_.first())
    be.s4d_carry_apply_backward(cd, s4d_params(), state_used_.data(),
                                cp_.first() ? active_device_.data() : all_active_.data(), dy_.data(),
                                s4d_grads());
  if (cp_.active()) pass_state_backward(be, cd);
}

// The reverse scan: g_k = ∂ℓ/∂x_in(k) from every chunk, ∂ℓ/∂h_r = Gt_{r+1} with
// Gt_k = g_k + conj(w^L)·Gt_{k+1}; h_r's gradient reaches U and the parameters, and Gt_r the
// parameters through the w^L of x_in(r) = w^L·x_in(r−1) + h_{r−1}.
template <typename T>
void BstSsm<T>::pass_state_backward(kernels::Backend<T>& be, const ssm::S4dCarryDims& cd) {
  const int64_t n = int64_t(state_grad_.size());
  const int r = cp_.rank();
  if (cp_.first())  // chunk 0's entering state is the detached carry
    memory_.fill_zero(state_grad_.data(), size_t(state_grad_.bytes()));
  else
    be.s4d_state_apply_grad(cd, s4d_params(), dy_.data(), state_grad_.data());
  cp_.all_gather(state_grad_.data(), state_grads_.data(), n);
  memory_.fill_zero(scan_grad_.data(), size_t(scan_grad_.bytes()));
  for (int k = cp_.size() - 1; k > r; --k)
    be.s4d_state_advance(cd, s4d_params(), state_grads_.data() + k * n, scan_grad_.data(), true);
  if (!cp_.last()) be.s4d_summary_backward(cd, s4d_params(), u_.data(), scan_grad_.data(), du_.data(), s4d_grads());
  if (cp_.first()) return;
  be.s4d_state_advance(cd, s4d_params(), state_grads_.data() + r * n, scan_grad_.data(), true);
  be.s4d_state_advance_backward(cd, s4d_params(), state_prev_.data(), scan_grad_.data(), s4d_grads());
}

template <typename T>
void BstSsm<T>::up_forward(kernels::Backend<T>& be) {
  const int D = cfg_.d_model, Ds = d_small_, C = channels_, N = cfg_.seq_len, B = streams_;
  const T* w_up = store_[w_up_].value;
  switch (cfg_.bst_variant) {
    case BstVariant::kSH:
      for (int b = 0; b < B; ++b)
        linear_forward(be, y_rows(y_.data(), b, 0), N, Ds, w_up, D, ctx_.data() + int64_t{b} * N * D);
      break;
    case BstVariant::kMH:
      for (int h = 0; h < C; ++h)
        for (int b = 0; b < B; ++b)
          linear_forward(be, y_rows(y_.data(), b, h), N, Ds, w_up + int64_t{h} * Ds * D, D,
                         ctx_.data() + (int64_t{h} * B + b) * N * D);
      break;
    case BstVariant::kMF: {
      // Only the block ends (k+1)·W − 1 are context states (model.md §7.2 MF): row k of the
      // gather reads Y_c[(k+1)·W − 1] into y_end[b, k, c].
      const int Tb = cfg_.blocks(), W = cfg_.window;
      for (int b = 0; b < B; ++b)
        for (int c = 0; c < C; ++c)
          be.copy_rows(y_rows(y_.data(), b, c) + int64_t{W - 1} * Ds, int64_t{W} * Ds, Tb, Ds,
                       y_end_.data() + (int64_t{b} * Tb * C + c) * Ds, int64_t{C} * Ds);
      linear_forward(be, y_end_.data(), B * Tb * C, Ds, w_up, D, ctx_.data());
      break;
    }
  }
  // Row-parallel W_up: each rank's features contribute a partial context.
  tp_.reduce_output(ctx_.data(), int64_t(ctx_.size()));
}

// dK → the generator's parameter gradients (backend calls: see generate_kernel). The filter
// network is replicated under TP but each rank backpropagates only its own filters: its
// gradient contributions are summed over TP (not the accumulated gradient, which may hold
// earlier micro-batches' already-reduced sums).
template <typename T>
void BstSsm<T>::kernel_backward(kernels::Backend<T>& be) {
  if (s4d_) {
    be.s4d_kernel_backward(ssm::S4dDims{channels_ * d_small_, modes_, cfg_.seq_len}, s4d_params(),
                           dkernel_.data(), s4d_grads());
    return;
  }
  // The network consumes dK (scaled in place by the decay): nothing reads dkernel_ after this.
  const auto grad = [this](int i) { return store_[filter_[i]].grad; };
  if (filter_dgrad_.empty()) {
    filter_net_->backward(filter_params(), dkernel_.data(),
                          {grad(0), grad(1), grad(2), grad(3), grad(4), grad(5), grad(6), grad(7)});
    return;
  }
  T* parts[7];
  int64_t offset = 0;
  for (int i = 0; i < 7; ++i) {
    parts[i] = filter_dgrad_.data() + offset;
    offset += store_[filter_[i]].spec.numel();
  }
  be.fill(filter_dgrad_.data(), int64_t(filter_dgrad_.size()), T(0));
  // w_out (slot 7) is this rank's filters' own: accumulated directly; the replicated network's
  // contributions are summed over TP first.
  filter_net_->backward(filter_params(), dkernel_.data(), {parts[0], parts[1], parts[2], parts[3],
                                                          parts[4], parts[5], parts[6], grad(7)});
  tp_.all_reduce_sum(filter_dgrad_.data(), int64_t(filter_dgrad_.size()));
  offset = 0;
  for (int i = 0; i < 7; ++i) {
    const int64_t n = store_[filter_[i]].spec.numel();
    be.add_inplace(store_[filter_[i]].grad, filter_dgrad_.data() + offset, n);
    offset += n;
  }
}

template <typename T>
void BstSsm<T>::up_backward(kernels::Backend<T>& be, const T* dctx) {
  const int D = cfg_.d_model, Ds = d_small_, C = channels_, N = cfg_.seq_len, B = streams_;
  auto& w_up = store_[w_up_];
  be.fill(dy_.data(), int64_t(dy_.size()), T(0));
  switch (cfg_.bst_variant) {
    case BstVariant::kSH:
      for (int b = 0; b < B; ++b)
        linear_backward(be, y_rows(y_.data(), b, 0), N, Ds, w_up.value, D,
                        dctx + int64_t{b} * N * D, y_rows(dy_.data(), b, 0), w_up.grad);
      break;
    case BstVariant::kMH:
      for (int h = 0; h < C; ++h)
        for (int b = 0; b < B; ++b) {
          const int64_t w = int64_t{h} * Ds * D;
          linear_backward(be, y_rows(y_.data(), b, h), N, Ds, w_up.value + w, D,
                          dctx + (int64_t{h} * B + b) * N * D, y_rows(dy_.data(), b, h),
                          w_up.grad + w);
        }
      break;
    case BstVariant::kMF: {
      const int Tb = cfg_.blocks(), W = cfg_.window;
      be.fill(dy_end_.data(), int64_t(dy_end_.size()), T(0));
      linear_backward(be, y_end_.data(), B * Tb * C, Ds, w_up.value, D, dctx, dy_end_.data(),
                      w_up.grad);
      for (int b = 0; b < B; ++b)  // scatter back to the block-end rows (the gather's inverse)
        for (int c = 0; c < C; ++c)
          be.copy_rows(dy_end_.data() + (int64_t{b} * Tb * C + c) * Ds, int64_t{C} * Ds, Tb, Ds,
                       y_rows(dy_.data(), b, c) + int64_t{W - 1} * Ds, int64_t{W} * Ds);
      break;
    }
  }
}

template <typename T>
void BstSsm<T>::backward(kernels::Backend<T>& be, const T* dctx, T* dx) {
  const int D = cfg_.d_model, Ds = d_small_, C = channels_, N = cfg_.seq_len, B = streams_;
  const int rows = B * N, R = C * Ds;
  up_backward(be, dctx);
  be.fill(dkernel_.data(), int64_t(dkernel_.size()), T(0));
  be.fill(du_.data(), int64_t(du_.size()), T(0));
  T* ddskip = store_[dskip_].grad;
  const T* dskip = store_[dskip_].value;
  if (conv_len_ != N) {
    be.fill(dkernel_ext_.data(), int64_t(dkernel_ext_.size()), T(0));
    be.fill(du_conv_.data(), int64_t(du_conv_.size()), T(0));
    conv_->backward({B, C, conv_len_, Ds}, kernel_ext_.data(), conv_u_.data(), dskip, dy_.data(),
                    du_conv_.data(), dkernel_ext_.data(), ddskip);
    be.copy_rows(dkernel_ext_.data(), conv_len_, R, N, dkernel_.data(), N);
    const int64_t seg = int64_t{N} * Ds;  // U_prev was carried detached: only U's half counts
    be.copy_rows(du_conv_.data() + seg, 2 * seg, B, seg, du_.data(), seg);
  } else {
    conv_->backward({B, C, N, Ds}, kernel_.data(), u_.data(), dskip, dy_.data(), du_.data(),
                    dkernel_.data(), ddskip);
  }
  kernel_backward(be);
  if (s4d_ && (carry_ || cp_.active())) state_backward(be);
  be.fill(dz_.data(), int64_t(dz_.size()), T(0));
  auto& w_dn = store_[w_dn_];
  linear_backward(be, z_.data(), rows, D, w_dn.value, Ds, du_.data(), dz_.data(), w_dn.grad);
  tp_.reduce_input_grad(dz_.data(), int64_t(dz_.size()));  // column-parallel W_dn
  auto& g = store_[norm_];
  be.rmsnorm_backward(x_, g.value, rstd_.data(), dz_.data(), rows, D, dx, g.grad);
}

template <typename T>
std::vector<TensorRef<T>> BstSsm<T>::carried_state() {
  // Both hold this rank's features along dim 2 (each feature's M·2k state words contiguous).
  const ShardSpec features{2, tp_.rank(), tp_.size(), 1};
  if (s4d_ && carry_)
    return {{prefix_ + "carry",
             {streams_, channels_, d_small_, modes_, int64_t(2 * sizeof(double) / sizeof(T))},
             reinterpret_cast<T*>(state_.data()), features}};
  if (!u_prev_.empty())
    return {{prefix_ + "carry_u", {streams_, cfg_.seq_len, d_small_}, u_prev_.data(), features}};
  return {};
}

template <typename T>
int64_t BstSsm<T>::activation_bytes() const {
  int64_t n = 0;
  for (const auto* v : {&z_, &rstd_, &u_, &conv_u_, &kernel_, &kernel_ext_, &y_, &y_end_, &ctx_})
    n += v->bytes();
  if (filter_net_) n += filter_net_->activation_bytes();
  for (const auto* v : {&state_used_, &summary_, &summaries_, &state_prev_, &state_grad_,
                        &state_grads_, &scan_grad_})
    n += v->bytes();
  return n + active_device_.bytes() + all_active_.bytes();
}

template <typename T>
int64_t BstSsm<T>::backward_scratch_bytes() const {
  int64_t n = 0;
  for (const auto* v : {&dy_, &dkernel_, &dkernel_ext_, &du_conv_, &du_, &dz_, &dy_end_, &filter_dgrad_})
    n += v->bytes();
  if (filter_net_) n += filter_net_->scratch_bytes();
  return n;
}

template class BstSsm<float>;
template class BstSsm<double>;

}  // namespace brt::core
