// Training and evaluation batches from a prepared corpus (data/, docs/data-format.md).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "data/dataset.h"
#include "data/shard_format.h"
#include "data/streams.h"
#include "data/tasks/task_mixture.h"
#include "data/tokenizer.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"

namespace brt::launch {

namespace {

std::vector<data::TaskKind> task_kinds(const std::string& list) {
  std::vector<data::TaskKind> kinds;
  for (size_t begin = 0; begin <= list.size();) {
    const size_t comma = std::min(list.find(',', begin), list.size());
    kinds.push_back(data::parse_task_kind(list.substr(begin, comma - begin)));
    begin = comma + 1;
  }
  return kinds;
}

// The training streams' task documents (docs/data-format.md, "Task documents"): filler from the
// split the streams read, in the tokenizer that made it. data.tasks.seed 0 takes train.seed.
std::shared_ptr<const data::TaskMixture> make_task_mixture(const RunConfig& cfg,
                                                           std::shared_ptr<const data::TokenDataset> dataset) {
  auto tokenizer = std::make_shared<const data::Tokenizer>(data::Tokenizer::load(data::tokenizer_path(cfg.data.path)));
  auto generator = std::make_shared<const data::TaskGenerator>(std::move(dataset), std::move(tokenizer));
  const DataConfig& d = cfg.data;
  data::TaskMixtureOptions o;
  o.rate = d.tasks_rate;
  o.kinds = task_kinds(d.tasks_kinds);
  o.min_distance = d.tasks_min_distance;
  o.max_distance = d.tasks_max_distance;
  o.min_prefix = d.tasks_min_prefix;
  o.max_prefix = d.tasks_max_prefix;
  o.digits = d.tasks_digits;
  o.facts = d.tasks_facts;
  o.supporting_facts = d.tasks_supporting_facts;
  o.seed = uint64_t(d.tasks_seed != 0 ? d.tasks_seed : cfg.train.seed);
  try {
    return std::make_shared<const data::TaskMixture>(std::move(generator), o);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("data.tasks: ") + e.what());
  }
}

class ShardSource : public BatchSource {
 public:
  ShardSource(const RunConfig& cfg, const std::string& split, int data_rank, int data_size,
              bool single_pass, bool tasks, int streams)
      : split_name_(split), data_rank_(data_rank) {
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
    options_.streams_per_rank = streams > 0 ? streams : cfg.train.batch;
    options_.seq_len = cfg.model.seq_len;
    options_.data_rank = data_rank;
    options_.data_size = data_size;
    options_.seed = uint64_t(cfg.train.seed);
    options_.single_pass = single_pass;
    options_.shuffle = !single_pass;
    options_.bos_id = dataset_->bos_id();  // of the tokenizer.model that opening checked
    if (tasks) refuse_repeated_streams(cfg, split, data_size);
    if (tasks && cfg.data.tasks_rate > 0) options_.tasks = make_task_mixture(cfg, dataset_);
    streams_ = std::make_unique<data::DocumentStreams>(dataset_, options_);
  }

  // Training streams never silently read the same text (data/streams.h): fewer documents than
  // global streams is refused, naming both numbers and the ways out, unless data.share_documents
  // asks for streams at distinct offsets of the same documents (then a warning says so).
  void refuse_repeated_streams(const RunConfig& cfg, const std::string& split, int data_size) {
    const int64_t documents = dataset_->num_documents();
    const int64_t global = int64_t(data_size) * options_.streams_per_rank;
    if (documents >= global) return;
    const std::string counts = "split '" + split + "' of " + cfg.data.path + " has " + std::to_string(documents) +
                               " document" + (documents == 1 ? "" : "s") + " for " + std::to_string(global) +
                               " global streams (" + std::to_string(options_.streams_per_rank) + " per rank x " +
                               std::to_string(data_size) + " data-parallel ranks)";
    if (cfg.data.share_documents) {
      options_.stagger_shared_documents = true;
      if (data_rank_ == 0)
        std::fprintf(stderr, "warning: data: %s: data.share_documents = true, so streams share documents, each "
                     "starting at a distinct offset of its text\n", counts.c_str());
      return;
    }
    throw std::invalid_argument(
        "data.share_documents: " + counts + ": " + std::to_string(global - documents) +
        " streams would read the same text as another, for the compute of " + std::to_string(global) +
        " streams on the data of " + std::to_string(documents) + ". Prepare more documents (brt-dist prepare "
        "--max-document-mb cuts a long text into documents), lower train.batch to " +
        std::to_string(std::max<int64_t>(1, documents / data_size)) + ", or set data.share_documents=true to start the "
        "streams at distinct offsets of the same text");
  }

  void next(data::Batch& batch) override {
    if (!streams_->next(batch) && !options_.single_pass)
      throw std::runtime_error("data: split '" + split_name_ + "' ran out of documents");
  }
  bool next_if_any(data::Batch& batch) { return streams_->next(batch); }
  std::string describe() const override {
    return "shards " + split_name_ + " (" + std::to_string(dataset_->num_documents()) + " documents)" +
           (options_.tasks ? "; " + options_.tasks->describe() : std::string());
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
  int data_rank_ = 0;
  std::shared_ptr<const data::TokenDataset> dataset_;
  data::StreamOptions options_;
  std::unique_ptr<data::DocumentStreams> streams_;
};

}  // namespace

std::unique_ptr<BatchSource> make_shard_source(const RunConfig& cfg, const std::string& split,
                                               int data_rank, int data_size, bool tasks, int streams) {
  return std::make_unique<ShardSource>(cfg, split, data_rank, data_size, false, tasks, streams);
}

}  // namespace brt::launch
