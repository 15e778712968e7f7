// Tokenizer: exact text -> ids -> text round trip on the whole default corpus and on awkward
// files (BOM, CRLF, non-ASCII, literal U+2581, runs of spaces, control characters), hashes.
#include <gtest/gtest.h>

#include "data/corpus/corpus.h"
#include "data/tokenizer.h"
#include "data_test_util.h"

namespace brt::data {
namespace {

using testing::TempDir;
using testing::write_file;

class TokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing::kjv_corpus_dir().empty()) GTEST_SKIP() << "the `bible` program (bible-kjv) is not installed";
  }
};

TEST_F(TokenizerTest, RoundTripIsExactOnTheWholeKjvCorpus) {
  const Tokenizer tokenizer = testing::kjv_tokenizer();
  const auto files = list_pg19_corpus(testing::kjv_corpus_dir());
  ASSERT_EQ(files.size(), 66u);
  int64_t bytes = 0, tokens = 0;
  for (const auto& file : files) {
    const std::string text = *load_document(file.path, BadDocumentPolicy::fail);
    const auto ids = tokenizer.encode(text);
    ASSERT_EQ(tokenizer.decode(ids), text) << file.path;
    // The word-cached encoder gives SentencePiece's own (line by line) ids.
    ASSERT_EQ(ids, tokenizer.encode_reference(text)) << file.path;
    for (int32_t id : ids) ASSERT_NE(id, tokenizer.unk_id()) << file.path;
    bytes += static_cast<int64_t>(text.size());
    tokens += static_cast<int64_t>(ids.size());
  }
  // A 1024-piece BPE should compress English well beyond one byte per token.
  EXPECT_GT(static_cast<double>(bytes) / static_cast<double>(tokens), 2.5);
}

TEST_F(TokenizerTest, RoundTripIsExactOnAwkwardFiles) {
  const Tokenizer tokenizer = testing::kjv_tokenizer();
  TempDir dir("awkward");
  const std::vector<std::pair<std::string, std::string>> cases = {
      // (raw file bytes, text expected after loading)
      {"\xEF\xBB\xBFIn the beginning\r\nGod created\r\n", "In the beginning\nGod created\n"},
      {"Caf\xC3\xA9 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x98\x80 \xD0\x9F\xD1\x80\xD0\xB8",
       "Caf\xC3\xA9 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x98\x80 \xD0\x9F\xD1\x80\xD0\xB8"},
      {"  leading\n\n\n    indented\t\ttabs   trailing   \n", "  leading\n\n\n    indented\t\ttabs   trailing   \n"},
      {"literal \xE2\x96\x81 marker\xE2\x96\x81\xE2\x96\x81x", "literal \xE2\x96\x81 marker\xE2\x96\x81\xE2\x96\x81x"},
      {"ctrl \x01\x7f bell\x07 lone\rcr 1234567890", "ctrl \x01\x7f bell\x07 lone\rcr 1234567890"},
      {"\n", "\n"},
      {" ", " "},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto path = dir.path() / ("case" + std::to_string(i) + ".txt");
    write_file(path, cases[i].first);
    const auto text = load_document(path, BadDocumentPolicy::fail);
    ASSERT_TRUE(text.has_value());
    EXPECT_EQ(*text, cases[i].second) << "case " << i;
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(*text)), *text) << "case " << i;
    EXPECT_EQ(tokenizer.encode(*text), tokenizer.encode_reference(*text)) << "case " << i;
  }
  // Digits are split: "1234567890" contributes ten pieces.
  EXPECT_EQ(tokenizer.encode("1234567890").size(), 10u);
  // A longer document: repeated words come from the encoder's word cache.
  std::string big;
  while (big.size() < 200'000) big += "And it came to pass, \xE2\x96\x81 that 42 men\n  went out.   \n";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(big)), big);
  EXPECT_EQ(tokenizer.encode(big), tokenizer.encode_reference(big));
}

TEST_F(TokenizerTest, EmptyAndInvalidDocumentsTakeTheConfiguredPath) {
  TempDir dir("invalid");
  write_file(dir.path() / "empty.txt", "");
  write_file(dir.path() / "latin1.txt", "caf\xE9\n");
  for (const char* name : {"empty.txt", "latin1.txt"}) {
    EXPECT_FALSE(load_document(dir.path() / name, BadDocumentPolicy::skip_with_warning).has_value());
    EXPECT_THROW(load_document(dir.path() / name, BadDocumentPolicy::fail), CorpusError);
  }
  // The empty string itself encodes to nothing and decodes back.
  const Tokenizer tokenizer = testing::kjv_tokenizer();
  EXPECT_TRUE(tokenizer.encode("").empty());
  EXPECT_EQ(tokenizer.decode({}), "");
}

TEST_F(TokenizerTest, HashIdentifiesTheModel) {
  const Tokenizer a = testing::kjv_tokenizer();
  TempDir dir("hash");
  a.save(dir.path() / "copy.model");
  const Tokenizer b = Tokenizer::load(dir.path() / "copy.model");
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.hash().size(), 16u);
  EXPECT_EQ(a.vocab_size(), 1024);
  EXPECT_EQ(a.bos_id(), 1);

  TokenizerTrainOptions options;
  options.vocab_size = 400;
  options.model_type = "unigram";
  const Tokenizer small = Tokenizer::train({"a small corpus with a few words\n", "of text to train on\n"}, options);
  EXPECT_NE(small.hash(), a.hash());
  EXPECT_NO_THROW(check_tokenizer_hash(a.hash(), b.hash(), "shards"));
  EXPECT_THROW(check_tokenizer_hash(a.hash(), small.hash(), "shards"), std::runtime_error);
  const std::string text = "unigram round trip:  two  spaces\nand   more\n\xE2\x96\x81 words words\n";
  EXPECT_EQ(small.decode(small.encode(text)), text);
  EXPECT_EQ(small.encode(text), small.encode_reference(text));
  EXPECT_THROW(Tokenizer::load(dir.path() / "missing.model"), std::runtime_error);
}

// A vocabulary below what the corpus needs says so in brt-dist's terms, with the size that
// works, and never passes on SentencePiece's advice about a flag brt-dist does not have.
TEST(TokenizerTraining, AVocabularyTooSmallNamesTheSizeThatWorks) {
  std::string text;
  for (int c = 33; c < 127; ++c) text += char(c);
  for (int c = 0xC0; c < 0x100; ++c) text += "\xC3" + std::string(1, char(0x80 + (c - 0xC0)));  // U+00C0-U+00FF
  TokenizerTrainOptions options;
  options.vocab_size = 100;
  try {
    Tokenizer::train({text + "\n", text + "\n"}, options);
    FAIL() << "a vocabulary of 100 for 158 distinct characters trained";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("(--vocab / model.vocab = 100) is smaller than this corpus needs"), std::string::npos) << msg;
    EXPECT_NE(msg.find(" or more"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("character_coverage"), std::string::npos) << msg;
  }
  EXPECT_EQ(training_failure_message("Internal: trainer_interface.cc(580) Vocabulary size is smaller than "
                                     "required_chars. 300 vs 323. Increase vocab_size or decrease "
                                     "character_coverage with --character_coverage option.", 300),
            "the tokenizer's vocabulary (--vocab / model.vocab = 300) is smaller than this corpus needs: 323 pieces, "
            "its distinct characters (every one is kept) and the control pieces; use --vocab 323 or more");
  EXPECT_EQ(training_failure_message("Internal: something else", 300), "SentencePiece training failed: Internal: something else");
}

}  // namespace
}  // namespace brt::data
