// launch/feed/context_chunk.h: the one source of a rank's context-parallel chunks. Each rank's
// batch is exactly its slice [rank·N/C, (rank+1)·N/C) of the whole segment, the other fields
// (document starts, positions) as take_chunk keeps them; the cursor, restoring and merging are
// the segments' source's, so a checkpoint's data position does not depend on C; C = 1 is the
// source itself. Bit-exact: the chunks are copies.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "launch/feed/batch_source.h"
#include "launch/feed/context_chunk.h"

namespace brt::launch {
namespace {

constexpr int kVocab = 50, kStreams = 3, kSeq = 16;

std::unique_ptr<BatchSource> segments() {
  return std::make_unique<SyntheticMarkovSource>(kVocab, kStreams, kSeq, 1234, 6);
}

TEST(ContextChunks, EachRankReadsItsSliceOfEverySegmentAndTheSegmentsCursor) {
  constexpr int kChunks = 4, kLen = kSeq / kChunks;
  std::unique_ptr<BatchSource> whole = segments();
  std::vector<std::unique_ptr<BatchSource>> ranks;
  for (int r = 0; r < kChunks; ++r) ranks.push_back(context_chunks(segments(), r, kChunks));
  data::Batch full, chunk;
  for (int step = 0; step < 5; ++step) {
    whole->next(full);
    for (int r = 0; r < kChunks; ++r) {
      ranks[size_t(r)]->next(chunk);
      ASSERT_EQ(chunk.streams, kStreams);
      ASSERT_EQ(chunk.seq, kLen);
      for (int b = 0; b < kStreams; ++b)
        for (int t = 0; t < kLen; ++t) {
          const size_t from = size_t(b) * kSeq + size_t(r * kLen + t), to = size_t(b) * kLen + size_t(t);
          EXPECT_EQ(chunk.inputs[to], full.inputs[from]);
          EXPECT_EQ(chunk.targets[to], full.targets[from]);
          EXPECT_EQ(chunk.mask[to], full.mask[from]);
        }
      EXPECT_EQ(chunk.doc_start, full.doc_start) << "a chunk knows where its segment began";
      EXPECT_EQ(ranks[size_t(r)]->cursor(), whole->cursor()) << "rank " << r;
    }
  }
  // Restoring a chunked source restores its segments: the next chunk follows the saved cursor.
  const std::vector<int64_t> saved = whole->cursor();
  whole->next(full);
  std::unique_ptr<BatchSource> resumed = context_chunks(segments(), 1, kChunks);
  resumed->restore(saved);
  resumed->next(chunk);
  for (int b = 0; b < kStreams; ++b)
    for (int t = 0; t < kLen; ++t)
      EXPECT_EQ(chunk.inputs[size_t(b) * kLen + size_t(t)], full.inputs[size_t(b) * kSeq + size_t(kLen + t)]);
  EXPECT_EQ(resumed->describe(), whole->describe());
}

TEST(ContextChunks, OneChunkIsTheSourceItselfAndABadChunkIsRefused) {
  std::unique_ptr<BatchSource> source = segments();
  BatchSource* raw = source.get();
  EXPECT_EQ(context_chunks(std::move(source), 0, 1).get(), raw);
  EXPECT_THROW(context_chunks(segments(), 2, 2), std::invalid_argument);
  EXPECT_THROW(context_chunks(segments(), 0, 0), std::invalid_argument);
  data::Batch chunk;
  EXPECT_THROW(context_chunks(segments(), 0, 3)->next(chunk), std::invalid_argument);  // 16 tokens in 3
}

}  // namespace
}  // namespace brt::launch
