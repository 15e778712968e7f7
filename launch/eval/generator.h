// `brt-dist generate`: sample text from a checkpoint, streaming tokens as they come. The model
// runs one block (W tokens) per segment, so its carried caches and recurrent state (model.md §8)
// hold all context before the current block: context is unbounded at constant memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/model.h"
#include "data/tokenizer.h"

namespace brt::launch {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy
  int top_k = 0;             // 0: off
  double top_p = 1.0;        // nucleus; 1: off
  uint64_t seed = 1;
  int max_tokens = 200;
};

// Samples the next token from logits [V] (only the first `vocab_used` entries are eligible:
// ids the tokenizer never produces are excluded). `draw` is a uniform number in [0, 1).
int32_t sample_token(const float* logits, int vocab_used, const SamplingOptions& opt, double draw);

class Generator {
 public:
  // `model` must have one stream and seq_len == window (one block per segment).
  explicit Generator(core::Model<float>& model);
  // Feeds `prompt` (a document's first tokens, BOS included), then samples opt.max_tokens
  // tokens among ids [0, vocab_used); `on_token` sees each one as it is drawn.
  std::vector<int32_t> generate(const std::vector<int32_t>& prompt, const SamplingOptions& opt,
                                int vocab_used,
                                const std::function<void(const std::vector<int32_t>&)>& on_token);

 private:
  // Logits for the last filled position of the current block, without committing the block.
  const float* peek_logits();
  // Appends a token; when the block is full it is run once more and committed (its keys,
  // values and state become the carried context).
  void push(int32_t token);
  // Row `row` of forward_logits' output over the whole vocabulary, copied to the host into
  // `buf`. Under tensor parallelism each rank holds its vocabulary slice (column-parallel
  // output): the row is all-gathered over the TP group, so every rank samples the same token.
  const float* whole_row(const float* logits, int row, std::vector<float>& buf) const;

  core::Model<float>& model_;
  int window_;
  std::vector<int32_t> block_;  // the current block's tokens (< W of them)
  bool first_block_ = true;
  const float* committed_logits_ = nullptr;  // last row of the last committed block
  std::vector<float> peek_row_, committed_row_;  // whole-vocabulary rows, on the host
};

// Text in, text out: BOS + the encoded prompt, then streams each newly decodable piece of the
// continuation to `on_text` (a multi-byte character may need several ids). Returns the ids.
std::vector<int32_t> generate_text(Generator& generator, const data::Tokenizer& tokenizer,
                                   const std::string& prompt, const SamplingOptions& opt,
                                   const std::function<void(const std::string&)>& on_text);

}  // namespace brt::launch
