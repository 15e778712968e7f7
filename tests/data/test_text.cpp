// Text primitives and corpus reading: UTF-8 validation, BOM/CRLF normalisation, word and byte
// counts (against hand-counted values and an independent ASCII reference), bad-document policy.
#include <gtest/gtest.h>

#include <sstream>

#include "data/corpus/corpus.h"
#include "data/corpus/text.h"
#include "data_test_util.h"

namespace brt::data {
namespace {

using testing::TempDir;
using testing::write_file;

TEST(Text, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8("plain ascii\n"));
  EXPECT_TRUE(is_valid_utf8("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80"));
  size_t offset = 99;
  EXPECT_FALSE(is_valid_utf8("ab\xC3", &offset));  // truncated
  EXPECT_EQ(offset, 2u);
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(is_valid_utf8("x\xFFy", &offset));
  EXPECT_EQ(offset, 1u);
}

TEST(Text, NormalisationStripsBomAndCrlfOnly) {
  EXPECT_EQ(normalise_document_text("\xEF\xBB\xBFline\r\nnext\r\n"), "line\nnext\n");
  EXPECT_EQ(normalise_document_text("lone\rcr\r\r\n  tabs\t\n"), "lone\rcr\r\n  tabs\t\n");
  EXPECT_EQ(normalise_document_text("mid\xEF\xBB\xBF" "bom"), "mid\xEF\xBB\xBF" "bom");
}

TEST(Text, WordCountsFollowPythonSplit) {
  // Hand-counted; U+00A0, U+3000 and U+2028 are whitespace for str.split(), U+200B is not.
  EXPECT_EQ(count_text("").words, 0);
  EXPECT_EQ(count_text("  one\ttwo\n\nthree  ").words, 3);
  EXPECT_EQ(count_text("a\xC2\xA0" "b\xE3\x80\x80" "c\xE2\x80\xA8" "d").words, 4);
  EXPECT_EQ(count_text("zero\xE2\x80\x8Bwidth").words, 1);
  EXPECT_EQ(count_text("x\x1Fy").words, 2);
  EXPECT_EQ(count_text("caf\xC3\xA9").bytes, 5);
}

TEST(Text, WordCountMatchesIstreamOnAscii) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += (i % 7 == 0 ? "  \n" : " ") + std::string(1 + i % 5, 'a' + i % 26);
  std::istringstream in(text);
  int64_t reference = 0;
  for (std::string word; in >> word;) ++reference;
  EXPECT_EQ(count_text(text).words, reference);
}

TEST(Corpus, Pg19LayoutIsListedInCanonicalOrder) {
  TempDir dir("pg19");
  write_file(dir.path() / "test/b.txt", "b");
  write_file(dir.path() / "train/z.txt", "z");
  write_file(dir.path() / "train/a.txt", "a");
  write_file(dir.path() / "train/.hidden", "h");
  write_file(dir.path() / "validation/m.txt", "m");
  const auto files = list_pg19_corpus(dir.path());
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].path.filename(), "a.txt");
  EXPECT_EQ(files[1].path.filename(), "z.txt");
  EXPECT_EQ(files[2].split, Split::validation);
  EXPECT_EQ(files[3].split, Split::test);
  EXPECT_THROW(list_pg19_corpus(dir.path() / "train"), CorpusError);
}

TEST(Corpus, FileListResolvesRelativePaths) {
  TempDir dir("list");
  write_file(dir.path() / "docs/one.txt", "1");
  write_file(dir.path() / "list.txt", "# comment\ndocs/one.txt\r\n\n" + (dir.path() / "abs.txt").string() + "\n");
  const auto files = read_file_list(dir.path() / "list.txt", Split::validation);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].path, dir.path() / "docs/one.txt");
  EXPECT_EQ(files[1].path, dir.path() / "abs.txt");
  EXPECT_EQ(files[0].split, Split::validation);
}

TEST(Corpus, BadDocumentsFollowThePolicy) {
  TempDir dir("bad");
  write_file(dir.path() / "invalid.txt", "good start \xFF\xFE bad");
  write_file(dir.path() / "empty.txt", "\xEF\xBB\xBF");  // only a BOM: empty after normalising
  write_file(dir.path() / "fine.txt", "\xEF\xBB\xBFok\r\n");
  for (const char* name : {"invalid.txt", "empty.txt", "missing.txt"}) {
    const auto path = dir.path() / name;
    EXPECT_EQ(load_document(path, BadDocumentPolicy::skip_with_warning), std::nullopt) << name;
    try {
      load_document(path, BadDocumentPolicy::fail);
      ADD_FAILURE() << "no error for " << name;
    } catch (const CorpusError& error) {
      EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
    }
  }
  EXPECT_EQ(load_document(dir.path() / "fine.txt", BadDocumentPolicy::fail), "ok\n");
  EXPECT_EQ(parse_bad_document_policy("skip"), BadDocumentPolicy::skip_with_warning);
  EXPECT_THROW(parse_bad_document_policy("ignore"), std::runtime_error);
}

TEST(Text, HashIsStable) {
  // FNV-1a 64 reference values.
  EXPECT_EQ(hex64(fnv1a64("", 0)), "cbf29ce484222325");
  EXPECT_EQ(hex64(fnv1a64("a", 1)), "af63dc4c8601ec8c");
}

}  // namespace
}  // namespace brt::data
