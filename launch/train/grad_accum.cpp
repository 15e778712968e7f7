#include "launch/train/grad_accum.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace brt::launch {

namespace {

template <typename T>
size_t numel_of(const core::TensorRef<T>& ref) {
  int64_t n = 1;
  for (auto s : ref.shape) n *= s;
  return size_t(n);
}

}  // namespace

template <typename T>
StreamGroupState<T>::StreamGroupState(core::Model<T>& model, int groups) : model_(model), groups_(groups) {
  if (groups < 1) throw std::invalid_argument("train.grad_accum: must be >= 1 (got " + std::to_string(groups) + ")");
  if (groups == 1) return;
  for (const auto& ref : model_.carried_state()) {
    // Every carried tensor is per stream along dim 0 (model.md §8), which is what lets the
    // groups' copies stack into one [groups·B, ...] tensor.
    if (ref.shape.empty() || ref.shape[0] != model_.streams())
      throw std::logic_error("gradient accumulation: carried state " + ref.name + " is not [B, ...]");
    banks_.emplace_back(model_.memory(), numel_of(ref) * size_t(groups), "carried state of the stream groups");
  }
  for (int g = 0; g < groups_; ++g) store(g);
}

template <typename T>
void StreamGroupState<T>::copy_group(int g, bool into_model) {
  const auto refs = model_.carried_state();
  for (size_t i = 0; i < refs.size(); ++i) {
    const size_t n = numel_of(refs[i]);
    T* group = banks_[i].data() + size_t(g) * n;
    if (into_model) model_.memory().copy(refs[i].data, group, n * sizeof(T));
    else model_.memory().copy(group, refs[i].data, n * sizeof(T));
  }
}

template <typename T>
void StreamGroupState<T>::load(int g) {
  if (groups_ > 1) copy_group(g, true);
}

template <typename T>
void StreamGroupState<T>::store(int g) {
  if (groups_ > 1) copy_group(g, false);
}

template <typename T>
std::vector<core::TensorRef<T>> StreamGroupState<T>::carried_state() {
  std::vector<core::TensorRef<T>> refs = model_.carried_state();
  if (groups_ == 1) return refs;
  for (size_t i = 0; i < refs.size(); ++i) {
    refs[i].shape[0] *= groups_;
    refs[i].data = banks_[i].data();
  }
  return refs;
}

template <typename T>
int64_t StreamGroupState<T>::bytes() const {
  int64_t n = 0;
  for (const auto& b : banks_) n += b.bytes();
  return n;
}

void take_stream_group(const data::Batch& whole, int g, int streams, data::Batch& out) {
  if (streams < 1 || (g + 1) * streams > whole.streams)
    throw std::logic_error("take_stream_group: group " + std::to_string(g) + " of " + std::to_string(streams) +
                           " streams is outside a batch of " + std::to_string(whole.streams));
  if (out.streams != streams || out.seq != whole.seq) out.resize(streams, whole.seq);
  const size_t first = size_t(g) * size_t(streams), n = size_t(streams);
  const size_t tokens = size_t(whole.seq);
  auto rows = [&](const auto& from, auto& to) {
    std::copy_n(from.begin() + std::ptrdiff_t(first * tokens), n * tokens, to.begin());
  };
  auto per_stream = [&](const auto& from, auto& to) {
    std::copy_n(from.begin() + std::ptrdiff_t(first), n, to.begin());
  };
  rows(whole.inputs, out.inputs);
  rows(whole.targets, out.targets);
  rows(whole.mask, out.mask);
  rows(whole.position, out.position);
  per_stream(whole.doc_start, out.doc_start);
  per_stream(whole.doc_id, out.doc_id);
  per_stream(whole.task, out.task);
}

template class StreamGroupState<float>;
template class StreamGroupState<double>;

}  // namespace brt::launch
