// data.tasks.kinds = mqar: the training and held-out streams of MQAR documents (data/tasks/mqar.h).
#include <stdexcept>

#include "data/tasks/mqar.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"

namespace brt::launch {

namespace {

class MqarBatchSource : public BatchSource {
 public:
  MqarBatchSource(const data::MqarVocabulary& vocab, const data::MqarOptions& options, const std::string& split,
                  int streams, int seq, int first_stream, bool answers_only)
      : vocab_(vocab),
        options_(options),
        split_(split),
        answers_only_(answers_only),
        streams_(vocab, training_documents(options), streams, seq, first_stream, answers_only) {}

  void next(data::Batch& batch) override { streams_.next(batch); }
  std::vector<int64_t> cursor() const override { return streams_.cursor(); }
  void restore(const std::vector<int64_t>& cursor) override { streams_.restore(cursor); }
  // "MQAR documents (train): 4-16 pairs, gap 8-64 tokens, prefix 0 tokens; keys 4-29 (26), ...;
  // loss on the answers (chance 1/26)"
  std::string describe() const override {
    auto span = [](int64_t lo, int64_t hi) { return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi); };
    return "MQAR documents (" + split_ + "): " + span(options_.min_pairs, options_.max_pairs) + " pairs, gap " +
           span(options_.min_gap, options_.max_gap) + " tokens, prefix " + span(options_.min_prefix, options_.max_prefix) +
           " tokens; " + vocab_.describe() + "; loss on " + (answers_only_ ? "the answers" : "every token") +
           " (an answer by chance: 1/" + std::to_string(vocab_.values) + ")";
  }

 private:
  static data::MqarDocumentAt training_documents(const data::MqarOptions& o) {
    return [o](int64_t stream, int64_t k) -> std::optional<data::MqarSource> {
      return data::MqarSource{k, data::mqar_training_spec(o, stream, k)};
    };
  }

  data::MqarVocabulary vocab_;
  data::MqarOptions options_;
  std::string split_;
  bool answers_only_;
  data::MqarStreams streams_;
};

}  // namespace

std::unique_ptr<BatchSource> make_mqar_source(const RunConfig& cfg, const std::string& split, int first_stream,
                                              int streams) {
  const DataConfig& d = cfg.data;
  data::MqarOptions o;
  o.min_pairs = d.tasks_min_pairs;
  o.max_pairs = d.tasks_max_pairs;
  o.min_gap = d.tasks_min_distance;
  o.max_gap = d.tasks_max_distance;
  o.min_prefix = d.tasks_min_prefix;
  o.max_prefix = d.tasks_max_prefix;
  o.seed = uint64_t(d.tasks_seed != 0 ? d.tasks_seed : cfg.train.seed);
  o.purpose = split == "train" ? 0x747261696eull : split == "validation" ? 0x76616c6964ull : 0x74657374ull;
  try {
    const data::MqarVocabulary vocab = data::MqarVocabulary::of(cfg.model.vocab);
    data::check_mqar_options(o, vocab);
    return std::make_unique<MqarBatchSource>(vocab, o, split, streams, cfg.model.seq_len, first_stream,
                                             d.tasks_loss == "answers");
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("data.tasks (mqar): ") + e.what());
  }
}

}  // namespace brt::launch
