// Training and evaluation batches from a prepared corpus (data/, docs/data-format.md).
#include <memory>
#include <stdexcept>

#include "data/dataset.h"
#include "data/shard_format.h"
#include "data/streams.h"
#include "data/tokenizer.h"
#include "launch/batch_source.h"
#include "launch/config.h"

namespace brt::launch {

namespace {

class ShardSource : public BatchSource {
 public:
  ShardSource(const RunConfig& cfg, const std::string& split, int dp_rank, int dp_size,
              bool single_pass)
      : split_name_(split) {
    if (cfg.data.path.empty())
      throw std::invalid_argument("data.path: empty, but data.source = \"shards\" needs the "
                                  "directory written by `brt-dist prepare`");
    dataset_ = data::TokenDataset::open(cfg.data.path, data::parse_split(split));
    if (dataset_->vocab_size() > cfg.model.vocab)
      throw std::invalid_argument(
          "model.vocab: " + std::to_string(cfg.model.vocab) + " is smaller than the vocabulary (" +
          std::to_string(dataset_->vocab_size()) + ") of the tokenizer that made " + cfg.data.path);
    if (dataset_->num_documents() == 0)
      throw std::invalid_argument("data: split '" + split + "' of " + cfg.data.path +
                                  " has no documents");
    options_.streams_per_rank = cfg.train.batch;
    options_.seq_len = cfg.model.seq_len;
    options_.dp_rank = dp_rank;
    options_.dp_size = dp_size;
    options_.seed = uint64_t(cfg.train.seed);
    options_.single_pass = single_pass;
    options_.shuffle = !single_pass;
    options_.bos_id = dataset_->bos_id();  // of the tokenizer.model that opening checked
    streams_ = std::make_unique<data::DocumentStreams>(dataset_, options_);
  }

  void next(data::Batch& batch) override {
    if (!streams_->next(batch) && !options_.single_pass)
      throw std::runtime_error("data: split '" + split_name_ + "' ran out of documents");
  }
  bool next_if_any(data::Batch& batch) { return streams_->next(batch); }
  std::string describe() const override {
    return "shards " + split_name_ + " (" + std::to_string(dataset_->num_documents()) +
           " documents)";
  }
  std::vector<int64_t> cursor() const override { return streams_->cursor().to_vector(); }
  void restore(const std::vector<int64_t>& flat) override {
    const data::StreamCursor c = data::StreamCursor::from_vector(flat);
    streams_.reset();
    streams_ = std::make_unique<data::DocumentStreams>(dataset_, options_, &c);
  }
  std::string tokenizer_hash() const override { return dataset_->tokenizer_hash(); }
  // Data parallelism: one StreamCursor over all G streams (data/streams.h), which
  // DocumentStreams accepts directly on any rank.
  std::vector<int64_t> merge_cursors(const std::vector<std::vector<int64_t>>& per_rank) const override {
    data::StreamCursor global = data::StreamCursor::from_vector(per_rank.at(0));
    for (size_t r = 1; r < per_rank.size(); ++r) {
      const auto part = data::StreamCursor::from_vector(per_rank[r]);
      global.positions.insert(global.positions.end(), part.positions.begin(), part.positions.end());
    }
    global.first_stream = 0;
    global.global_streams = int64_t(global.positions.size());
    return global.to_vector();
  }
  void restore_global(const std::vector<int64_t>& global, int, int) override { restore(global); }

 private:
  std::string split_name_;
  std::shared_ptr<const data::TokenDataset> dataset_;
  data::StreamOptions options_;
  std::unique_ptr<data::DocumentStreams> streams_;
};

}  // namespace

std::unique_ptr<BatchSource> make_shard_source(const RunConfig& cfg, const std::string& split,
                                               int dp_rank, int dp_size) {
  return std::make_unique<ShardSource>(cfg, split, dp_rank, dp_size, false);
}

}  // namespace brt::launch
