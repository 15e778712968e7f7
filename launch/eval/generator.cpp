#include "launch/eval/generator.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>

namespace brt::launch {

int32_t sample_token(const float* logits, int vocab_used, const SamplingOptions& opt,
                     double draw) {
  std::vector<int32_t> ids(vocab_used);
  std::iota(ids.begin(), ids.end(), 0);
  if (opt.temperature <= 0)
    return *std::max_element(ids.begin(), ids.end(),
                             [&](int32_t a, int32_t b) { return logits[a] < logits[b]; });
  // Candidates by decreasing logit (ties by id, so the order is deterministic).
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  size_t keep = ids.size();
  if (opt.top_k > 0) keep = std::min(keep, size_t(opt.top_k));
  std::vector<double> p(keep);
  const double top = logits[ids[0]];
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((logits[ids[i]] - top) / opt.temperature);
  if (opt.top_p < 1.0) {  // the smallest prefix whose mass reaches top_p
    double mass = 0;
    size_t n = 0;
    while (n < keep && mass < opt.top_p * sum) mass += p[n++];
    keep = std::max<size_t>(n, 1);
    sum = mass;
  }
  double target = draw * sum;
  for (size_t i = 0; i < keep; ++i) {
    if (target < p[i]) return ids[i];
    target -= p[i];
  }
  return ids[keep - 1];
}

Generator::Generator(core::Model<float>& model)
    : model_(model), window_(model.config().window) {
  if (model.streams() != 1 || model.config().seq_len != window_)
    throw std::invalid_argument("generation needs a model with 1 stream and seq_len == window");
}

const float* Generator::peek_logits() {
  // The block padded with token 0 after its filled part: queries only see earlier positions
  // (model.md §3.2), so the padding cannot change the filled positions' logits.
  std::vector<int32_t> inputs(window_, 0);
  std::copy(block_.begin(), block_.end(), inputs.begin());
  const uint8_t doc_start = first_block_ ? 1 : 0;
  const auto saved = model_.snapshot_carried_state();
  const float* logits = model_.forward_logits({inputs.data(), nullptr, nullptr, &doc_start});
  const float* row = whole_row(logits, int(block_.size()) - 1, peek_row_);
  model_.restore_carried_state(saved);  // the block is not complete yet: do not commit it
  return row;
}

const float* Generator::whole_row(const float* logits, int row, std::vector<float>& buf) const {
  const core::TensorParallel& tp = model_.tensor_parallel();
  const int V = model_.config().vocab;
  if (!tp.active()) {  // the logits are in backend memory (device memory under CUDA)
    buf = kernels::copy_to_host(model_.memory(), logits + size_t(row) * size_t(V), size_t(V));
    return buf.data();
  }
  // The embedding's vocabulary rows are split in rank order, so the gathered row is in order.
  // This rank's columns come to the host first (backend memory), then the host group gathers.
  const int local = V / tp.size();
  const std::vector<float> mine =
      kernels::copy_to_host(model_.memory(), logits + size_t(row) * size_t(local), size_t(local));
  buf.resize(size_t(V));
  tp.group()->all_gather(std::span<const float>(mine), std::span<float>(buf));
  return buf.data();
}

void Generator::push(int32_t token) {
  block_.push_back(token);
  if (int(block_.size()) < window_) return;
  const uint8_t doc_start = first_block_ ? 1 : 0;
  // Run the full block once more and keep its carried state: it becomes context. Its last
  // row's logits predict the token after it.
  const float* logits = model_.forward_logits({block_.data(), nullptr, nullptr, &doc_start});
  committed_logits_ = whole_row(logits, window_ - 1, committed_row_);
  first_block_ = false;
  block_.clear();
}

std::vector<int32_t> Generator::generate(
    const std::vector<int32_t>& prompt, const SamplingOptions& opt, int vocab_used,
    const std::function<void(const std::vector<int32_t>&)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("generate: empty prompt (it needs at least a BOS)");
  if (vocab_used > model_.config().vocab)
    throw std::invalid_argument("the tokenizer's vocabulary (" + std::to_string(vocab_used) +
                                ") is larger than model.vocab (" +
                                std::to_string(model_.config().vocab) + ")");
  for (int32_t id : prompt) push(id);
  std::mt19937_64 rng(opt.seed);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<int32_t> out;
  for (int i = 0; i < opt.max_tokens; ++i) {
    // Right after a block was committed the prediction comes from its last row.
    const float* logits = block_.empty() ? committed_logits_ : peek_logits();
    const int32_t next = sample_token(logits, vocab_used, opt, uniform(rng));
    out.push_back(next);
    push(next);
    if (on_token) on_token(out);
  }
  return out;
}

std::vector<int32_t> generate_text(Generator& generator, const data::Tokenizer& tokenizer,
                                   const std::string& prompt, const SamplingOptions& opt,
                                   const std::function<void(const std::string&)>& on_text) {
  std::vector<int32_t> ids = {int32_t(tokenizer.bos_id())};
  for (int32_t id : tokenizer.encode(prompt)) ids.push_back(id);
  std::string shown;
  auto stream = [&](const std::vector<int32_t>& out) {
    // Print what decodes stably: no replacement character from a partial UTF-8 sequence.
    const std::string text = tokenizer.decode(out);
    if (text.size() > shown.size() && text.compare(0, shown.size(), shown) == 0 &&
        text.find("\xEF\xBF\xBD", shown.size()) == std::string::npos) {
      if (on_text) on_text(text.substr(shown.size()));
      shown = text;
    }
  };
  const std::vector<int32_t> out = generator.generate(ids, opt, tokenizer.vocab_size(), stream);
  const std::string text = tokenizer.decode(out);
  if (on_text && text.size() > shown.size() && text.compare(0, shown.size(), shown) == 0)
    on_text(text.substr(shown.size()));
  return out;
}

}  // namespace brt::launch
