#include "core/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/layers/bst_layer.h"
#include "core/layers/feedback_stack.h"
#include "core/layers/recurrent_layer.h"
#include "core/standard_layer.h"

namespace brt::core {

template <typename T>
Model<T>::Model(const ModelConfig& cfg, int streams, kernels::Backend<T>& backend,
                const TensorParallel& tp, const ContextParallel& cp)
    : cfg_(cfg), streams_(streams), be_(backend), tp_(tp.bound_to(backend.memory())),
      cp_(cp.bound_to(backend.memory())) {
  cfg_.resolve();
  // The layers see this rank's chunk of the segment (the whole segment without CP).
  layer_cfg_ = chunk_config(cfg_, cp_.size());
  seq_ = layer_cfg_.seq_len;
  kernels::Memory& memory = be_.memory();
  vocab_ = core::vocab_range(tp_, cfg_.vocab);
  const int D = cfg_.d_model, V = cfg_.vocab, N = seq_, A = cfg_.attn_width();
  // model.md §1: E ~ N(0, 1); §2: final RMSNorm gain.
  // Under TP, E is split by rows (vocabulary ranges).
  embed_ = declare_normal(params_, "embed", {V, D}, 1.0, tp_.rows());
  for (int i = 0; i < cfg_.layers && !cfg_.feedback; ++i) {
    const int64_t begin = params_.total_numel();
    if (cfg_.is_bst_layer(i))  // model.md §7: the other layers of a BST model are standard
      layers_.push_back(std::make_unique<BstLayer<T>>(params_, layer_cfg_, i, streams, be_, tp_, cp_));
    else if (cfg_.is_recurrent_layer(i))
      layers_.push_back(
          std::make_unique<RecurrentLayer<T>>(params_, layer_cfg_, i, streams, memory, tp_));
    else
      layers_.push_back(std::make_unique<StandardLayer<T>>(params_, layer_cfg_, i, streams, memory, tp_, cp_));
    layer_ranges_.emplace_back(begin, params_.total_numel());
  }
  if (cfg_.feedback) {  // model.md §5.4: the layers run block-major, as one stack
    const int64_t begin = params_.total_numel();
    layers_.push_back(std::make_unique<FeedbackStack<T>>(params_, layer_cfg_, streams, memory, tp_));
    layer_ranges_.emplace_back(begin, params_.total_numel());
  }
  final_norm_ = declare_norm(params_, "final_norm.scale", D);
  params_.finalize(memory);

  const size_t rows = size_t(streams) * N;
  inputs_.allocate(memory, rows, "input tokens");
  targets_.allocate(memory, rows, "target tokens");
  mask_.allocate(memory, rows, "target mask");
  doc_start_.assign(size_t(streams), 0);
  resid_.resize(layers_.size() + 1);  // the feedback stack is one layer of L
  for (auto& r : resid_) r.allocate(memory, rows * D, "residual stream");
  final_h_.allocate(memory, rows * D, "final norm output");
  final_rstd_.allocate(memory, rows, "final norm rstd");
  logits_.allocate(memory, rows * size_t(vocab_.size()), "logits");
  row_loss_.allocate(memory, rows, "row losses");
  loss_scale_.allocate(memory, 1, "loss gradient scale");
  loss_result_.allocate(memory, 2, "loss sum and bad target row");
  if (tp_.active()) {
    local_ids_.assign(2 * rows, 0);  // inputs, then targets (never reused while in flight)
    xent_.allocate(memory, int(rows));
  }
  // Per-rank widths under TP: F / TP hidden units, A / TP attention columns.
  scratch_.allocate(memory, int64_t(rows), D, cfg_.d_ff / tp_.size(), A / tp_.size());
  d_resid_a_.allocate(memory, rows * D, "residual gradient");
  d_resid_b_.allocate(memory, rows * D, "residual gradient");
  // Binds the weights now, so that a backend's copy of them (CUDA bf16: a bf16 shadow) is
  // allocated here and not in a step (a captured one must not allocate).
  be_.weights_fixed(params_.values(), params_.total_numel());
}

template <typename T>
Model<T>::~Model() {
  be_.weights_fixed(nullptr, 0);
}

template <typename T>
void Model<T>::stage_input(const ModelInput& in) {
  const int V = cfg_.vocab, rows = streams_ * seq_;
  for (int i = 0; i < rows; ++i)
    if (in.inputs[i] < 0 || in.inputs[i] >= V ||
        (in.mask != nullptr && in.mask[i] && (in.targets[i] < 0 || in.targets[i] >= V)))
      throw std::out_of_range("token id out of range [0, model.vocab=" + std::to_string(V) +
                              ") at position " + std::to_string(i));
  if (tp_.active()) {  // this rank's rows of the embedding (other ranks' tokens: -1)
    local_token_ids(vocab_, in.inputs, rows, local_ids_.data());
    inputs_.from_host(local_ids_.data(), size_t(rows));
  } else {
    inputs_.from_host(in.inputs, size_t(rows));
  }
  std::copy(in.doc_start, in.doc_start + streams_, doc_start_.begin());
  for (auto& layer : layers_) layer->stage(doc_start_.data());
}

template <typename T>
int64_t Model<T>::stage_targets(const ModelInput& in) {
  const int rows = streams_ * seq_;  // targets and mask: checked by the callers
  if (tp_.active()) {  // this rank's columns of the targets (others: -1)
    int32_t* local_targets = local_ids_.data() + rows;
    local_token_ids(vocab_, in.targets, rows, local_targets);
    targets_.from_host(local_targets, size_t(rows));
  } else {
    targets_.from_host(in.targets, size_t(rows));
  }
  mask_.from_host(in.mask, size_t(rows));
  int64_t count = 0;
  for (int i = 0; i < rows; ++i) count += in.mask[i] != 0;  // the host's copy
  return count;
}

template <typename T>
const T* Model<T>::forward_logits(const ModelInput& in) {
  stage_input(in);
  return run_forward();
}

template <typename T>
const T* Model<T>::run_forward() {
  const int D = cfg_.d_model, V = cfg_.vocab, rows = streams_ * seq_;
  have_forward_ = true;
  // The weights are fixed from here through this forward's backward (kernels/backend.h).
  be_.weights_fixed(params_.values(), params_.total_numel());
  const StepContext<T> ctx{be_, streams_, seq_, doc_start_.data()};
  if (tp_.active())  // inputs_ holds this rank's local ids
    vocab_parallel_embedding_forward(be_, tp_, inputs_.data(), rows, params_[embed_].value, D,
                                     resid_[0].data());
  else
    be_.embedding_forward(inputs_.data(), rows, params_[embed_].value, D, resid_[0].data());
  for (size_t l = 0; l < layers_.size(); ++l)
    layers_[l]->forward(ctx, resid_[l].data(), resid_[l + 1].data());
  // final_h is read only by the LM head's two products (the logits here, dE in backward).
  be_.rmsnorm_forward_for_products(resid_.back().data(), params_[final_norm_].value, rows, D, final_h_.data(),
                                   final_rstd_.data());
  // logits = RMSNorm_final(x_L)·Eᵀ/√V (tied embedding, model.md §1); this rank's vocabulary.
  const T inv_sqrt_v = T(1) / std::sqrt(T(V));
  const int VL = vocab_.size();
  be_.gemm(kernels::Trans::N, kernels::Trans::T, rows, VL, D, inv_sqrt_v, final_h_.data(), D,
           params_[embed_].value, D, T(0), logits_.data(), VL);
  return logits_.data();
}

template <typename T>
LossSums Model<T>::forward(const ModelInput& in, T grad_scale) {
  if (in.targets == nullptr || in.mask == nullptr)
    throw std::invalid_argument("Model::forward needs targets and mask (forward_logits does not)");
  stage_input(in);
  LossSums sums;
  sums.count = stage_targets(in);
  run_forward();
  if (tp_.active()) {
    const int rows = streams_ * seq_;
    sums.nats = xent_.forward_backward(be_, tp_, logits_.data(), targets_.data(), mask_.data(),
                                       rows, vocab_.size(), grad_scale, logits_.data(),
                                       row_loss_.data());
  } else {
    stage_loss_scale(grad_scale);
    run_loss();
    sums.nats = step_nats();
  }
  return sums;
}

template <typename T>
void Model<T>::run_loss() {
  const int V = cfg_.vocab, rows = streams_ * seq_;
  be_.softmax_xent_forward_backward_deferred(logits_.data(), targets_.data(), mask_.data(), rows,
                                             V, loss_scale_.data(), logits_.data(),
                                             row_loss_.data(), loss_result_.data());
}

template <typename T>
int64_t Model<T>::stage_step(const ModelInput& in) {
  if (tp_.active())
    throw std::logic_error("Model::stage_step: not under tensor parallelism (its loss is summed "
                           "on the host between kernels); use forward()");
  if (in.targets == nullptr || in.mask == nullptr)
    throw std::invalid_argument("Model::stage_step needs targets and mask");
  stage_input(in);
  return stage_targets(in);
}

template <typename T>
void Model<T>::stage_loss_scale(T grad_scale) {
  loss_scale_.from_host(&grad_scale, 1);
}

template <typename T>
void Model<T>::device_work() {
  if (tp_.active()) throw std::logic_error("Model::device_work: not under tensor parallelism");
  run_forward();
  run_loss();
  backward();
}

template <typename T>
void Model<T>::device_step(T grad_scale) {
  stage_loss_scale(grad_scale);
  device_work();
}

template <typename T>
double Model<T>::step_nats() {
  double result[2] = {0, -1};
  memory().to_host(result, loss_result_.data(), sizeof result);
  if (result[1] >= 0) {  // the loss kernel skipped a row whose target is not a token
    const int64_t row = int64_t(result[1]);
    int32_t target = 0;
    memory().to_host(&target, targets_.data() + row, sizeof target);
    throw std::runtime_error(kernels::bad_target_message(be_.name(), target, row, cfg_.vocab));
  }
  return result[0];
}

template <typename T>
void Model<T>::backward() {
  if (!have_forward_) throw std::logic_error("Model::backward without forward");
  if (ablation_ != CarryAblation::kNone)
    throw std::logic_error("Model::backward with a carry ablation set (evaluation only)");
  const int D = cfg_.d_model, V = cfg_.vocab, rows = streams_ * seq_;
  const int64_t nd = int64_t(rows) * D;
  const StepContext<T> ctx{be_, streams_, seq_, doc_start_.data()};
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
  auto& fn = params_[final_norm_];  // d_resid_a written (no zero fill)
  be_.rmsnorm_backward_residual(resid_.back().data(), fn.value, final_rstd_.data(), dh, nullptr, false, rows, D,
                                d_resid_a_.data(), fn.grad);
  for (size_t l = layers_.size(); l-- > 0;) {  // each layer writes its dx (core/layer.h)
    layers_[l]->backward(ctx, d_resid_a_.data(), d_resid_b_.data(), scratch_);
    std::swap(d_resid_a_, d_resid_b_);
    if (hook_) hook_(int(l));
  }
  if (tp_.active())
    vocab_parallel_embedding_backward(be_, inputs_.data(), rows, d_resid_a_.data(), D,
                                      embed.grad);
  else
    be_.embedding_backward(inputs_.data(), rows, d_resid_a_.data(), D, embed.grad);
  if (hook_) hook_(-1);
}

template <typename T>
std::vector<TensorRef<T>> Model<T>::carried_state() {
  std::vector<TensorRef<T>> all;
  for (auto& layer : layers_)
    for (auto& ref : layer->carried_state()) all.push_back(ref);
  return all;
}

namespace {

template <typename T>
size_t numel_of(const TensorRef<T>& ref) {
  int64_t n = 1;
  for (auto s : ref.shape) n *= s;
  return size_t(n);
}

}  // namespace

template <typename T>
std::vector<std::vector<T>> Model<T>::snapshot_carried_state() {
  std::vector<std::vector<T>> out;
  for (const auto& ref : carried_state())
    out.push_back(kernels::copy_to_host(memory(), static_cast<const T*>(ref.data), numel_of(ref)));
  return out;
}

template <typename T>
void Model<T>::restore_carried_state(const std::vector<std::vector<T>>& snapshot) {
  auto refs = carried_state();
  if (refs.size() != snapshot.size())
    throw std::logic_error("restore_carried_state: snapshot of another model");
  for (size_t i = 0; i < refs.size(); ++i) {
    if (snapshot[i].size() != numel_of(refs[i]))
      throw std::logic_error("restore_carried_state: " + refs[i].name + " has " +
                             std::to_string(numel_of(refs[i])) + " elements, the snapshot " +
                             std::to_string(snapshot[i].size()));
    memory().from_host(refs[i].data, snapshot[i].data(), snapshot[i].size() * sizeof(T));
  }
}

template <typename T>
void Model<T>::set_carry_ablation(CarryAblation a) {
  ablation_ = a;
  for (auto& layer : layers_) layer->set_carry_ablation(a);
}

template <typename T>
bool Model<T>::carry_ablation_applies(CarryAblation a) const {
  for (int i = 0; i < cfg_.layers; ++i) {
    if (a == CarryAblation::kSegment && cfg_.is_bst_layer(i) && cfg_.ssm_carry) return true;
    if (a != CarryAblation::kNone && cfg_.is_recurrent_layer(i) && !cfg_.is_bst_layer(i))
      return true;
  }
  return false;
}

template <typename T>
std::vector<LayerDiagnostics> Model<T>::new_layer_diagnostics() const {
  std::vector<LayerDiagnostics> out;
  for (size_t l = 0; l < layers_.size(); ++l)
    if (layers_[l]->has_diagnostics()) {
      out.emplace_back();
      out.back().layer = out.back().source = int(l);
    }
  return out;
}

template <typename T>
void Model<T>::accumulate_diagnostics(const uint8_t* mask, std::vector<LayerDiagnostics>& stats) {
  if (!have_forward_) throw std::logic_error("Model::accumulate_diagnostics without forward");
  for (auto& s : stats)
    layers_.at(size_t(s.source))
        ->accumulate_diagnostics(be_, mask, scratch_.d_model.data(), scratch_.d_norm.data(), s);
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
  act += scratch_.elems() + int64_t(d_resid_a_.size() + d_resid_b_.size());
  r.activations = act * elem + xent_.bytes() + inputs_.bytes() + targets_.bytes() + mask_.bytes() +
                  loss_scale_.bytes() + loss_result_.bytes();
  for (const auto& layer : layers_) {
    r.activations += layer->activation_bytes();
    r.backward_scratch += layer->backward_scratch_bytes();
  }
  r.backward_scratch += int64_t(doc_start_.size());
  auto* self = const_cast<Model<T>*>(this);
  for (const auto& ref : self->carried_state()) r.carried_state += int64_t(numel_of(ref)) * elem;
  return r;
}

template class Model<float>;
template class Model<double>;

}  // namespace brt::core
