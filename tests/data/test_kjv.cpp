// The default corpus: the 66 books of the KJV from Debian's bible-kjv, with a held-out split.
#include <gtest/gtest.h>

#include <algorithm>

#include "data/corpus/corpus.h"
#include "data/corpus/kjv.h"
#include "data_test_util.h"

namespace brt::data {
namespace {

TEST(Kjv, SixtySixBooksWithAllVersesAndAHeldOutSplit) {
  if (!testing::bible_available()) GTEST_SKIP() << "the `bible` program (bible-kjv) is not installed";
  testing::TempDir dir("kjv-books");
  const auto books = write_kjv_corpus(dir.path());
  ASSERT_EQ(books.size(), 66u);
  EXPECT_EQ(books.front().name, "Genesis");
  EXPECT_EQ(books.back().name, "Revelation");
  EXPECT_TRUE(books.front().text.starts_with("Genesis\n\n1:1 In the beginning God created the heaven and the earth.\n"));
  EXPECT_TRUE(books.back().text.ends_with("22:21 The grace of our Lord Jesus Christ be with you all. Amen.\n"));
  int64_t verses = 0;
  int counts[kNumSplits] = {0, 0, 0};
  for (const auto& book : books) {
    verses += std::count(book.text.begin(), book.text.end(), '\n') - 2;  // minus title and blank line
    ++counts[static_cast<int>(book.split)];
  }
  EXPECT_EQ(verses, 31102);  // the KJV's verse count
  EXPECT_EQ(counts[0], 58);
  EXPECT_EQ(counts[1], 4);
  EXPECT_EQ(counts[2], 4);
  const auto files = list_pg19_corpus(dir.path());
  ASSERT_EQ(files.size(), 66u);
  EXPECT_EQ(files.front().path.filename(), "01-genesis.txt");
  EXPECT_EQ(files[58].path.filename(), "08-ruth.txt");  // first validation book
  EXPECT_THROW(read_kjv_books("/nonexistent/bible"), std::runtime_error);
}

}  // namespace
}  // namespace brt::data
