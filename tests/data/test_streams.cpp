// Document streams (model.md §8): every token of every document served exactly once per epoch,
// in order, document starts marked; identical global streams whatever the number of ranks;
// cursors that resume exactly; single-pass evaluation mode.
#include <gtest/gtest.h>
#include <mpi.h>

#include <map>
#include <set>
#include <memory>

#include "data/prepare.h"
#include "data/streams.h"
#include "data_test_util.h"

namespace brt::data {
namespace {

namespace fs = std::filesystem;

// 23 documents of very different lengths (a few tokens to a few thousand), prepared once per
// test process with a small tokenizer trained on them.
struct StreamFixtureData {
  testing::TempDir dir{"streams"};
  std::shared_ptr<const TokenDataset> dataset;
  StreamFixtureData() {
    const int lengths[] = {3, 40, 700, 1, 90, 2500, 15, 15, 16, 17, 400, 5, 1200, 60, 33, 8, 300, 2, 999, 64, 128, 250, 6};
    int index = 0;
    for (int words : lengths) {
      std::string text;
      for (int w = 0; w < words; ++w) {
        text += 'w';
        text += std::to_string((w * 7 + index) % 53);
        text += w % 11 == 10 ? '\n' : ' ';
      }
      char name[32];
      std::snprintf(name, sizeof name, "doc%02d.txt", index++);
      testing::write_file(dir.path() / "corpus/train" / name, text);
    }
    PrepareOptions options;
    options.corpus_dir = dir.path() / "corpus";
    options.output_dir = dir.path() / "out";
    options.tokenizer.vocab_size = 300;
    options.shard_target_bytes = 2000;
    options.show_progress = false;
    prepare_corpus(options, MPI_COMM_SELF);
    dataset = TokenDataset::open(options.output_dir, Split::train);
  }
};

std::shared_ptr<const TokenDataset> stream_dataset() {
  static const auto data = std::make_unique<StreamFixtureData>();  // test-only cache
  return data->dataset;
}

StreamOptions make_options(int B, int N, int rank = 0, int ranks = 1) {
  return testing::test_stream_options(B, N, 42, rank, ranks);
}

// One stream's segment, as served.
struct Segment {
  int64_t doc_id;
  bool doc_start;
  std::vector<int32_t> inputs, targets;
  std::vector<uint8_t> mask;
  std::vector<int64_t> position;
  bool operator==(const Segment&) const = default;
};

Segment segment_of(const Batch& b, int s) {
  const auto row = static_cast<size_t>(s) * static_cast<size_t>(b.seq);
  const auto cut = [&](const auto& v) { return std::vector(v.begin() + row, v.begin() + row + b.seq); };
  return {b.doc_id[s], b.doc_start[s] != 0, cut(b.inputs), cut(b.targets), cut(b.mask), cut(b.position)};
}

// Document tokens as the streams see them (BOS first when added).
std::map<int64_t, std::vector<int32_t>> stream_tokens(const TokenDataset& dataset, const StreamOptions& o) {
  std::map<int64_t, std::vector<int32_t>> out;
  for (int64_t i = 0; i < dataset.num_documents(); ++i) {
    std::vector<int32_t> t = dataset.tokens(i);
    if (o.add_bos) t.insert(t.begin(), o.bos_id);
    if (t.size() >= 2) out[dataset.document(i).doc_id] = t;
  }
  return out;
}

void check_epochs_serve_every_token_once(bool add_bos) {
  const auto dataset = stream_dataset();
  StreamOptions o = make_options(3, 16);
  o.add_bos = add_bos;
  StreamSet set(dataset, o);
  const auto expected = stream_tokens(*dataset, o);
  const auto D = static_cast<int64_t>(expected.size());
  // Per epoch: doc -> the segments served for it, in order.
  std::map<int64_t, std::map<int64_t, std::vector<Segment>>> served;
  Batch batch;
  for (int step = 0; step < 5000; ++step) {
    const StreamCursor before = set.cursor();
    if (before.epoch() >= 2) break;
    ASSERT_TRUE(set.next(batch));
    for (int s = 0; s < o.streams_per_rank; ++s) served[before.stream_epoch(static_cast<size_t>(s))][batch.doc_id[s]].push_back(segment_of(batch, s));
  }
  std::vector<int64_t> first_docs[2];
  for (int64_t epoch : {0, 1}) {
    const auto& docs = served[epoch];
    ASSERT_EQ(static_cast<int64_t>(docs.size()), D) << "epoch " << epoch;
    for (const auto& [doc_id, segments] : docs) {
      const auto& tokens = expected.at(doc_id);
      std::vector<int32_t> targets;
      for (size_t k = 0; k < segments.size(); ++k) {
        const Segment& seg = segments[k];
        EXPECT_EQ(seg.doc_start, k == 0) << doc_id;
        for (int t = 0; t < o.seq_len; ++t) {
          const auto p = static_cast<size_t>(k * o.seq_len + t);
          ASSERT_EQ(seg.position[t], static_cast<int64_t>(p));
          if (p < tokens.size()) {
            EXPECT_EQ(seg.inputs[t], tokens[p]);
          }
          const bool has_target = p + 1 < tokens.size();
          ASSERT_EQ(seg.mask[t], has_target ? 1 : 0) << doc_id << " position " << p;
          if (has_target) {
            targets.push_back(seg.targets[t]);
          } else {
            EXPECT_EQ(seg.targets[t], 0);
          }
        }
      }
      // Every token but the first is a target exactly once, in document order.
      EXPECT_EQ(targets, std::vector<int32_t>(tokens.begin() + 1, tokens.end())) << doc_id;
      EXPECT_EQ(static_cast<int64_t>(segments.size()), segments_for_document(static_cast<int64_t>(tokens.size()) - (add_bos ? 1 : 0), o));
    }
  }
}

TEST(Streams, EveryTokenIsServedOncePerEpochInOrderWithBos) { check_epochs_serve_every_token_once(true); }
TEST(Streams, EveryTokenIsServedOncePerEpochInOrderWithoutBos) { check_epochs_serve_every_token_once(false); }

// Runs every rank's streams of a layout for `steps` and returns the global per-stream sequence.
std::vector<std::vector<Segment>> run_layout(int B, int ranks, int steps, int N = 24) {
  std::vector<std::vector<Segment>> global(static_cast<size_t>(B * ranks));
  for (int r = 0; r < ranks; ++r) {
    StreamSet set(stream_dataset(), make_options(B, N, r, ranks));
    Batch batch;
    for (int step = 0; step < steps; ++step) {
      set.next(batch);
      for (int s = 0; s < B; ++s) global[static_cast<size_t>(r * B + s)].push_back(segment_of(batch, s));
    }
  }
  return global;
}

TEST(Streams, GlobalStreamsAreIdenticalFor1To4Ranks) {
  const auto one = run_layout(4, 1, 150);
  EXPECT_EQ(run_layout(2, 2, 150), one);
  EXPECT_EQ(run_layout(1, 4, 150), one);
  // The shuffle makes different seeds deal different documents first.
  StreamOptions other = make_options(4, 24);
  other.seed = 43;
  StreamSet set(stream_dataset(), other);
  Batch batch;
  set.next(batch);
  std::vector<int64_t> first_docs(batch.doc_id.begin(), batch.doc_id.end());
  std::vector<int64_t> seed42_docs;
  for (const auto& stream : one) seed42_docs.push_back(stream[0].doc_id);
  EXPECT_NE(first_docs, seed42_docs);
}

// More streams than documents (data.share_documents): streams that begin with the same document
// start it at distinct offsets (none reads the tokens another reads at the same step); without
// the option they all start at its beginning, which is what the trainer refuses.
TEST(Streams, SharedDocumentsStartAtDistinctOffsetsWhenAsked) {
  const int B = 3 * 23;  // every document starts three streams
  auto first_positions = [&](bool stagger) {
    StreamOptions o = make_options(B, 8);
    o.stagger_shared_documents = stagger;
    StreamSet set(stream_dataset(), o);
    Batch batch;
    set.next(batch);
    std::map<int64_t, std::set<int64_t>> starts;  // document -> first positions of its streams
    for (int s = 0; s < B; ++s) starts[batch.doc_id[size_t(s)]].insert(batch.position[size_t(s) * 8]);
    return starts;
  };
  int distinct = 0, long_documents = 0;
  for (const auto& [doc, positions] : first_positions(true)) {
    const int64_t tokens = stream_dataset()->document(doc).tokens;
    if (tokens + 1 > 3 * 8 + 1) ++long_documents, distinct += positions.size() == 3;  // room for 3 segments
  }
  EXPECT_GT(long_documents, 10);
  EXPECT_EQ(distinct, long_documents);
  for (const auto& [doc, positions] : first_positions(false)) EXPECT_EQ(positions, std::set<int64_t>{0}) << doc;
}

std::vector<Batch> take(DocumentStreams& streams, int steps) {
  std::vector<Batch> out(static_cast<size_t>(steps));
  for (auto& b : out) streams.next(b);
  return out;
}

void expect_same_batches(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    for (int s = 0; s < a[i].streams; ++s) EXPECT_EQ(segment_of(a[i], s), segment_of(b[i], s)) << "batch " << i << " stream " << s;
  }
}

TEST(Streams, CursorSavedMidEpochResumesExactly) {
  for (bool prefetch : {false, true}) {
    StreamOptions o = make_options(3, 20);
    o.prefetch = prefetch;
    DocumentStreams original(stream_dataset(), o);
    take(original, 37);  // mid-document, mid-epoch
    const std::vector<int64_t> saved = original.cursor().to_vector();
    const auto expected = take(original, 60);
    const StreamCursor restored = StreamCursor::from_vector(saved);
    EXPECT_EQ(restored.to_vector(), saved);
    DocumentStreams resumed(stream_dataset(), o, &restored);
    expect_same_batches(take(resumed, 60), expected);
  }
}

TEST(Streams, GlobalCursorResumesOnAnotherLayout) {
  // Two ranks with B = 2 save; four ranks with B = 1 resume from the assembled cursor.
  StreamCursor global;
  std::vector<std::vector<Segment>> expected(4);
  for (int r = 0; r < 2; ++r) {
    StreamSet set(stream_dataset(), make_options(2, 24, r, 2));
    Batch batch;
    for (int step = 0; step < 41; ++step) set.next(batch);
    const StreamCursor local = set.cursor();
    if (r == 0) global = local;
    else global.positions.insert(global.positions.end(), local.positions.begin(), local.positions.end());
    for (int step = 0; step < 30; ++step) {
      set.next(batch);
      for (int s = 0; s < 2; ++s) expected[static_cast<size_t>(r * 2 + s)].push_back(segment_of(batch, s));
    }
  }
  for (int r = 0; r < 4; ++r) {
    StreamSet set(stream_dataset(), make_options(1, 24, r, 4), &global);
    Batch batch;
    for (int step = 0; step < 30; ++step) {
      set.next(batch);
      EXPECT_EQ(segment_of(batch, 0), expected[static_cast<size_t>(r)][static_cast<size_t>(step)]) << r << " " << step;
    }
  }
  // A cursor for a different number of global streams or seed is refused.
  EXPECT_THROW(StreamSet(stream_dataset(), make_options(3, 24), &global), std::runtime_error);
  StreamOptions other_seed = make_options(4, 24);
  other_seed.seed = 1;
  EXPECT_THROW(StreamSet(stream_dataset(), other_seed, &global), std::runtime_error);
  EXPECT_THROW(StreamCursor::from_vector(std::vector<int64_t>{1, 2, 3}), std::runtime_error);
}

TEST(Streams, SinglePassServesEachDocumentOnceThenGoesIdle) {
  const auto dataset = stream_dataset();
  for (bool prefetch : {false, true}) {
    StreamOptions o = make_options(4, 32);
    o.single_pass = true;
    o.shuffle = false;
    o.prefetch = prefetch;
    DocumentStreams streams(dataset, o);
    std::map<int64_t, int64_t> targets_per_doc;
    int64_t starts = 0;
    Batch batch;
    int steps = 0;
    while (streams.next(batch)) {
      ASSERT_LT(++steps, 10000);
      for (int s = 0; s < o.streams_per_rank; ++s) {
        if (batch.doc_id[s] < 0) {
          for (int t = 0; t < o.seq_len; ++t) ASSERT_EQ(batch.mask[static_cast<size_t>(s * o.seq_len + t)], 0);
          continue;
        }
        starts += batch.doc_start[s];
        for (int t = 0; t < o.seq_len; ++t) targets_per_doc[batch.doc_id[s]] += batch.mask[static_cast<size_t>(s * o.seq_len + t)];
      }
    }
    EXPECT_FALSE(streams.next(batch));  // stays finished
    EXPECT_EQ(starts, dataset->num_documents());
    for (int64_t i = 0; i < dataset->num_documents(); ++i) {
      EXPECT_EQ(targets_per_doc[dataset->document(i).doc_id], dataset->document(i).tokens);  // BOS makes every token a target
    }
  }
}

TEST(MpiStreams, GatheredCursorEqualsTheSingleProcessLayout) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  StreamSet mine(stream_dataset(), make_options(2, 24, rank, ranks));
  StreamSet reference(stream_dataset(), make_options(2 * ranks, 24));
  Batch batch;
  for (int step = 0; step < 23; ++step) mine.next(batch), reference.next(batch);
  EXPECT_EQ(gather_global_cursor(mine.cursor(), MPI_COMM_WORLD), reference.cursor());
}

}  // namespace
}  // namespace brt::data
