#include "core/model.h"

#include <cmath>
#include <stdexcept>

#include "core/blocks.h"
#include "core/bst_layer.h"
#include "core/recurrent_layer.h"
#include "core/standard_layer.h"

namespace brt::core {

template <typename T>
Model<T>::Model(const ModelConfig& cfg, int streams, kernels::Backend<T>& backend,
                const TensorParallel& tp)
    : cfg_(cfg), streams_(streams), be_(backend), tp_(tp),
      xent_(tp.active() ? streams * cfg.seq_len : 0) {
  cfg_.resolve();
  vocab_ = core::vocab_range(tp_, cfg_.vocab);
  const int D = cfg_.d_model, V = cfg_.vocab, N = cfg_.seq_len, A = cfg_.attn_width();
  // MODEL §1: E ~ N(0, 1); §2: final RMSNorm gain.
  // Under TP, E is split by rows (vocabulary ranges).
  embed_ = declare_normal(params_, "embed", {V, D}, 1.0, tp_.rows());
  for (int i = 0; i < cfg_.layers; ++i) {
    const int64_t begin = params_.total_numel();
    if (cfg_.is_bst_layer(i))  // MODEL §7: the other layers of a BST model are standard
      layers_.push_back(std::make_unique<BstLayer<T>>(params_, cfg_, i, streams, tp_));
    else if (cfg_.is_recurrent_layer(i))
      layers_.push_back(std::make_unique<RecurrentLayer<T>>(params_, cfg_, i, streams, tp_));
    else
      layers_.push_back(std::make_unique<StandardLayer<T>>(params_, cfg_, i, streams, tp_));
    layer_ranges_.emplace_back(begin, params_.total_numel());
  }
  final_norm_ = declare_norm(params_, "final_norm.scale", D);
  params_.finalize();

  const size_t rows = size_t(streams) * N;
  resid_.assign(cfg_.layers + 1, std::vector<T>(rows * D, T(0)));
  final_h_.assign(rows * D, T(0));
  final_rstd_.assign(rows, T(0));
  logits_.assign(rows * size_t(vocab_.size()), T(0));
  row_loss_.assign(rows, T(0));
  doc_start_.assign(streams, 0);
  scratch_.d_model.assign(rows * D, T(0));
  scratch_.d_norm.assign(rows * D, T(0));
  // Per-rank widths under TP: F / TP hidden units, A / TP attention columns.
  scratch_.d_ff.assign(2 * rows * size_t(cfg_.d_ff / tp_.size()), T(0));
  for (auto& v : scratch_.d_attn) v.assign(rows * size_t(A / tp_.size()), T(0));
  d_resid_a_.assign(rows * D, T(0));
  d_resid_b_.assign(rows * D, T(0));
}

template <typename T>
const T* Model<T>::forward_logits(const ModelInput& in) {
  const int D = cfg_.d_model, V = cfg_.vocab, rows = streams_ * cfg_.seq_len;
  saved_input_ = in;
  input_ = &saved_input_;
  const StepContext<T> ctx{be_, streams_, cfg_.seq_len, in.doc_start};
  for (int i = 0; i < rows; ++i)
    if (in.inputs[i] < 0 || in.inputs[i] >= V ||
        (in.mask != nullptr && in.mask[i] && (in.targets[i] < 0 || in.targets[i] >= V)))
      throw std::out_of_range("token id out of range [0, model.vocab=" + std::to_string(V) +
                              ") at position " + std::to_string(i));
  if (tp_.active())
    vocab_parallel_embedding_forward(be_, tp_, vocab_, in.inputs, rows, params_[embed_].value, D,
                                     resid_[0].data());
  else
    be_.embedding_forward(in.inputs, rows, params_[embed_].value, D, resid_[0].data());
  for (size_t l = 0; l < layers_.size(); ++l)
    layers_[l]->forward(ctx, resid_[l].data(), resid_[l + 1].data());
  be_.rmsnorm_forward(resid_.back().data(), params_[final_norm_].value, rows, D, final_h_.data(),
                      final_rstd_.data());
  // logits = RMSNorm_final(x_L)·Eᵀ/√V (tied embedding, MODEL §1); this rank's vocabulary.
  const T inv_sqrt_v = T(1) / std::sqrt(T(V));
  const int VL = vocab_.size();
  be_.gemm(kernels::Trans::N, kernels::Trans::T, rows, VL, D, inv_sqrt_v, final_h_.data(), D,
           params_[embed_].value, D, T(0), logits_.data(), VL);
  return logits_.data();
}

template <typename T>
LossSums Model<T>::forward(const ModelInput& in, T grad_scale) {
  const int V = cfg_.vocab, rows = streams_ * cfg_.seq_len;
  forward_logits(in);
  LossSums sums;
  if (tp_.active())
    sums.nats = xent_.forward_backward(tp_, vocab_, logits_.data(), in.targets, in.mask, rows,
                                       grad_scale, logits_.data(), row_loss_.data());
  else
    sums.nats = be_.softmax_xent_forward_backward(logits_.data(), in.targets, in.mask, rows, V,
                                                  grad_scale, logits_.data(), row_loss_.data());
  for (int i = 0; i < rows; ++i) sums.count += in.mask[i] != 0;
  return sums;
}

template <typename T>
void Model<T>::backward() {
  if (input_ == nullptr) throw std::logic_error("Model::backward without forward");
  const int D = cfg_.d_model, V = cfg_.vocab, rows = streams_ * cfg_.seq_len;
  const int64_t nd = int64_t(rows) * D;
  const StepContext<T> ctx{be_, streams_, cfg_.seq_len, input_->doc_start};
  const T inv_sqrt_v = T(1) / std::sqrt(T(V));
  auto& embed = params_[embed_];
  T* dh = scratch_.d_norm.data();
  // dh = dlogits·E/√V;  dE += dlogitsᵀ·h/√V. Under TP the output is column-parallel over
  // the vocabulary: each rank's dh is a partial sum, all-reduced before the final norm.
  const int VL = vocab_.size();
  be_.gemm(kernels::Trans::N, kernels::Trans::N, rows, D, VL, inv_sqrt_v, logits_.data(), VL,
           embed.value, D, T(0), dh, D);
  tp_.reduce_input_grad(dh, nd);
  be_.gemm(kernels::Trans::T, kernels::Trans::N, VL, D, rows, inv_sqrt_v, logits_.data(), VL,
           final_h_.data(), D, T(1), embed.grad, D);
  be_.fill(d_resid_a_.data(), nd, T(0));
  auto& fn = params_[final_norm_];
  be_.rmsnorm_backward(resid_.back().data(), fn.value, final_rstd_.data(), dh, rows, D,
                       d_resid_a_.data(), fn.grad);
  for (size_t l = layers_.size(); l-- > 0;) {
    be_.fill(d_resid_b_.data(), nd, T(0));
    layers_[l]->backward(ctx, d_resid_a_.data(), d_resid_b_.data(), scratch_);
    std::swap(d_resid_a_, d_resid_b_);
    if (hook_) hook_(int(l));
  }
  if (tp_.active())
    vocab_parallel_embedding_backward(be_, vocab_, input_->inputs, rows, d_resid_a_.data(), D,
                                      embed.grad);
  else
    be_.embedding_backward(input_->inputs, rows, d_resid_a_.data(), D, embed.grad);
  if (hook_) hook_(-1);
}

template <typename T>
std::vector<TensorRef<T>> Model<T>::carried_state() {
  std::vector<TensorRef<T>> all;
  for (auto& layer : layers_)
    for (auto& ref : layer->carried_state()) all.push_back(ref);
  return all;
}

template <typename T>
std::vector<std::vector<T>> Model<T>::snapshot_carried_state() {
  std::vector<std::vector<T>> out;
  for (const auto& ref : carried_state()) {
    int64_t n = 1;
    for (auto s : ref.shape) n *= s;
    out.emplace_back(ref.data, ref.data + n);
  }
  return out;
}

template <typename T>
void Model<T>::restore_carried_state(const std::vector<std::vector<T>>& snapshot) {
  auto refs = carried_state();
  if (refs.size() != snapshot.size())
    throw std::logic_error("restore_carried_state: snapshot of another model");
  for (size_t i = 0; i < refs.size(); ++i)
    std::copy(snapshot[i].begin(), snapshot[i].end(), refs[i].data);
}

template <typename T>
MemoryReport Model<T>::memory_report() const {
  MemoryReport r;
  const int64_t elem = sizeof(T);
  r.parameters = params_.total_numel() * elem;
  r.gradients = params_.total_numel() * elem;
  int64_t act = 0;
  for (const auto& v : resid_) act += int64_t(v.size());
  act += int64_t(final_h_.size() + final_rstd_.size() + logits_.size() + row_loss_.size());
  act += xent_.bytes() / elem;
  act += int64_t(scratch_.d_model.size() + scratch_.d_norm.size() + scratch_.d_ff.size() +
                 d_resid_a_.size() + d_resid_b_.size());
  for (const auto& v : scratch_.d_attn) act += int64_t(v.size());
  r.activations = act * elem;
  for (const auto& layer : layers_) {
    r.activations += layer->activation_bytes();
    r.backward_scratch += layer->backward_scratch_bytes();
  }
  r.backward_scratch += int64_t(doc_start_.size());
  auto* self = const_cast<Model<T>*>(this);
  for (const auto& ref : self->carried_state()) {
    int64_t n = 1;
    for (auto s : ref.shape) n *= s;
    r.carried_state += n * elem;
  }
  return r;
}

template class Model<float>;
template class Model<double>;

}  // namespace brt::core
