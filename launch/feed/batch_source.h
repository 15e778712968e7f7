// Where training and evaluation batches come from: prepared token shards (data/) or a
// synthetic stream for smoke runs and tests. The trainer sees only this interface.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"

namespace brt::launch {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills the next [B, N] batch of this rank's streams (model.md §8).
  virtual void next(data::Batch& batch) = 0;
  virtual std::string describe() const = 0;
  // The loader's position as a flat array (for checkpoints), and its restoration.
  virtual std::vector<int64_t> cursor() const = 0;
  virtual void restore(const std::vector<int64_t>& cursor) = 0;
  // Data parallelism (model.md §8; launch/train/checkpoint/training_checkpoint.cpp): the cursor of all global
  // streams from every DP rank's cursor() in rank order, and this rank's restoration from
  // such a global cursor (any DP size with the same global stream count). The defaults treat
  // cursor() as equal per-stream records, so the global cursor is their concatenation.
  virtual std::vector<int64_t> merge_cursors(const std::vector<std::vector<int64_t>>& per_rank) const;
  virtual void restore_global(const std::vector<int64_t>& global, int data_rank, int data_size);
  // Hash of the tokenizer that made the tokens ("" for synthetic data).
  virtual std::string tokenizer_hash() const { return ""; }
};

// Documents drawn from a fixed random first-order Markov chain over `vocab` tokens (each token
// has a few likely successors), lengths in [2N, 6N]. Fully determined by (seed, stream,
// document number), so two runs with one seed see identical data and a cursor is just
// (document number, offset) per stream. The achievable loss is well below ln(vocab).
class SyntheticMarkovSource : public BatchSource {
 public:
  SyntheticMarkovSource(int vocab, int streams, int seq, uint64_t seed, int first_stream = 0);
  void next(data::Batch& batch) override;
  std::string describe() const override;
  std::vector<int64_t> cursor() const override;
  void restore(const std::vector<int64_t>& cursor) override;

 private:
  void load_document(int stream);
  int32_t successor(int32_t token, uint64_t counter_hi, uint64_t counter_lo) const;

  int vocab_, streams_, seq_, first_stream_;
  uint64_t seed_;
  std::vector<int64_t> doc_number_, offset_;
  std::vector<std::vector<int32_t>> docs_;
};

struct RunConfig;
// MQAR documents (data/tasks/mqar.h) for data.tasks.kinds = mqar: this rank's `streams` streams from
// global stream `first_stream` on; the training split's documents and each held-out split's are
// drawn under their own purpose, so evaluation never sees a training document. The cursor is
// (documents begun, offset) per stream, so a resume, on any layout with the same global
// streams, continues exactly.
std::unique_ptr<BatchSource> make_mqar_source(const RunConfig& cfg, const std::string& split, int first_stream,
                                              int streams);
// Streams over prepared token shards (data/) for `split`; this rank's streams. `tasks`: the
// training streams, which mix in data.tasks' task documents when data.tasks.rate > 0
// (data/tasks/task_mixture.h); the cursor then records the mixture, so a resume under another is refused.
// `streams`: this rank's streams; 0 = train.batch (gradient accumulation's training source holds
// train.batch x train.grad_accum, launch/train/grad_accum.h).
std::unique_ptr<BatchSource> make_shard_source(const RunConfig& cfg, const std::string& split,
                                               int data_rank = 0, int data_size = 1, bool tasks = false,
                                               int streams = 0);

}  // namespace brt::launch
