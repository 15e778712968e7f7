// The long-range split of `brt-dist eval` (launch/eval/eval_diagnostics.h): each target's distance
// to the previous occurrence of its token in the document, against a brute-force search on
// fresh random documents, and the classes first / ≤ W / ≤ W·L / beyond.
#include <gtest/gtest.h>

#include <random>

#include "launch/eval/eval_diagnostics.h"
#include "tests/common/test_seed.h"

namespace brt::launch {
namespace {

TEST(LongRange, ClassesSplitAtTheWindowAndTheStackReach) {
  const auto classes = long_range_classes(/*window=*/8, /*layers=*/3);
  ASSERT_EQ(classes.size(), 4u);
  EXPECT_EQ(classes[0].name, "first");
  EXPECT_EQ(long_range_class_of(classes, 0), 0u);
  EXPECT_EQ(long_range_class_of(classes, 1), 1u);
  EXPECT_EQ(long_range_class_of(classes, 8), 1u);
  EXPECT_EQ(long_range_class_of(classes, 9), 2u);
  EXPECT_EQ(long_range_class_of(classes, 24), 2u);
  EXPECT_EQ(long_range_class_of(classes, 25), 3u);
  EXPECT_EQ(long_range_class_of(classes, 100000), 3u);
  EXPECT_EQ(classes[3].name, "beyond_wl");
}

TEST(LongRange, DistancesMatchABruteForceSearchAcrossSegmentsAndDocuments) {
  const uint64_t seed = brt::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int streams = 3, vocab = 40;
  RepeatDistances repeats(streams);
  for (int doc = 0; doc < 4; ++doc) {
    std::vector<std::vector<int32_t>> text(streams);
    for (int s = 0; s < streams; ++s) {
      text[s].resize(200 + rng() % 300);
      for (auto& t : text[s]) t = int32_t(rng() % vocab);
      repeats.start_document(s, text[s][0]);
    }
    // Interleaved like the streams of a batch: every stream advances in its own order.
    for (size_t p = 1; p < 500; ++p)
      for (int s = 0; s < streams; ++s) {
        if (p >= text[s].size()) continue;
        int64_t expected = 0;
        for (size_t q = p; q-- > 0;)
          if (text[s][q] == text[s][p]) {
            expected = int64_t(p - q);
            break;
          }
        ASSERT_EQ(repeats.advance(s, text[s][p], int64_t(p)), expected)
            << "document " << doc << " stream " << s << " position " << p;
      }
  }
}

}  // namespace
}  // namespace brt::launch
