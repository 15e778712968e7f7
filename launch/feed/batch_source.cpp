#include "launch/feed/batch_source.h"

#include <stdexcept>

#include "core/philox.h"

namespace brt::launch {

namespace {
constexpr int kSuccessors = 4;      // likely next tokens per token
constexpr double kLikelyMass = 0.9;  // probability of picking one of them
}  // namespace

SyntheticMarkovSource::SyntheticMarkovSource(int vocab, int streams, int seq, uint64_t seed,
                                             int first_stream)
    : vocab_(vocab), streams_(streams), seq_(seq), first_stream_(first_stream), seed_(seed) {
  if (vocab < 2) throw std::invalid_argument("synthetic data needs model.vocab >= 2");
  doc_number_.assign(streams, 0);
  offset_.assign(streams, 0);
  docs_.resize(streams);
  for (int s = 0; s < streams; ++s) load_document(s);
}

int32_t SyntheticMarkovSource::successor(int32_t token, uint64_t hi, uint64_t lo) const {
  const core::CounterRng table(seed_, 0x7461626c65ull);  // the chain: same for every stream
  const core::CounterRng draw(seed_, 0x64726177ull);
  const auto w = draw.draw(hi, lo);
  const double u = core::uniform_open01(w[0], w[1]);
  if (u < kLikelyMass) {
    const int which = int(w[2] % kSuccessors);
    return int32_t(table.draw(uint64_t(token), uint64_t(which))[0] % uint32_t(vocab_));
  }
  return int32_t(w[3] % uint32_t(vocab_));
}

void SyntheticMarkovSource::load_document(int s) {
  const uint64_t global = uint64_t(first_stream_ + s);
  const uint64_t doc = uint64_t(doc_number_[s]);
  const core::CounterRng meta(seed_, 0x6d657461ull);
  const auto w = meta.draw(global, doc);
  const int64_t length = 2 * int64_t(seq_) + int64_t(w[0] % uint32_t(4 * seq_ + 1));
  auto& tokens = docs_[s];
  tokens.resize(size_t(length));
  tokens[0] = int32_t(w[1] % uint32_t(vocab_));
  for (int64_t i = 1; i < length; ++i)
    tokens[size_t(i)] = successor(tokens[size_t(i - 1)], (global << 32) ^ doc, uint64_t(i));
}

void SyntheticMarkovSource::next(data::Batch& batch) {
  if (batch.streams != streams_ || batch.seq != seq_) batch.resize(streams_, seq_);
  for (int s = 0; s < streams_; ++s) {
    if (offset_[s] + 1 >= int64_t(docs_[s].size())) {  // document exhausted: next one
      ++doc_number_[s];
      offset_[s] = 0;
      load_document(s);
    }
    const auto& doc = docs_[s];
    const int64_t off = offset_[s], len = int64_t(doc.size());
    batch.doc_start[s] = off == 0;
    batch.doc_id[s] = doc_number_[s];
    for (int i = 0; i < seq_; ++i) {
      const size_t r = size_t(s) * seq_ + i;
      const int64_t p = off + i;
      batch.inputs[r] = p < len ? doc[size_t(p)] : 0;
      const bool has_target = p + 1 < len;
      batch.targets[r] = has_target ? doc[size_t(p + 1)] : 0;
      batch.mask[r] = has_target;
      batch.position[r] = p;
    }
    offset_[s] += seq_;
  }
}

std::string SyntheticMarkovSource::describe() const {
  return "synthetic Markov documents (vocab " + std::to_string(vocab_) + ", seed " +
         std::to_string(seed_) + ")";
}

std::vector<int64_t> SyntheticMarkovSource::cursor() const {
  std::vector<int64_t> c;
  for (int s = 0; s < streams_; ++s) c.push_back(doc_number_[s]), c.push_back(offset_[s]);
  return c;
}

void SyntheticMarkovSource::restore(const std::vector<int64_t>& c) {
  if (c.size() != size_t(2 * streams_))
    throw std::invalid_argument("synthetic data cursor has " + std::to_string(c.size()) +
                                " entries, expected " + std::to_string(2 * streams_));
  for (int s = 0; s < streams_; ++s) {
    doc_number_[s] = c[2 * s];
    offset_[s] = c[2 * s + 1];
    load_document(s);
  }
}

std::vector<int64_t> BatchSource::merge_cursors(const std::vector<std::vector<int64_t>>& per_rank) const {
  std::vector<int64_t> global;
  for (const auto& c : per_rank) {
    if (c.size() != per_rank.front().size())
      throw std::invalid_argument("data cursors of the data-parallel ranks differ in size (" +
                                  std::to_string(c.size()) + " vs " + std::to_string(per_rank.front().size()) +
                                  "): train.batch must be the same on every rank");
    global.insert(global.end(), c.begin(), c.end());
  }
  return global;
}

void BatchSource::restore_global(const std::vector<int64_t>& global, int data_rank, int data_size) {
  const size_t mine = cursor().size();
  if (global.size() != mine * size_t(data_size))
    throw std::invalid_argument("data cursor of " + std::to_string(global.size()) + " entries does not hold " +
                                std::to_string(data_size) + " ranks x " + std::to_string(mine) +
                                " (the global stream count train.batch x ranks must equal the saving run's)");
  restore(std::vector<int64_t>(global.begin() + std::ptrdiff_t(mine) * data_rank,
                               global.begin() + std::ptrdiff_t(mine) * (data_rank + 1)));
}

}  // namespace brt::launch
