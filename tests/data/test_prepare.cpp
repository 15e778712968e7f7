// prepare: shards and index against the source files (bytes, words, tokens decode back),
// bad-document policy, restart, tokenizer training and hash checks. The Mpi* tests are
// collective and also run under mpirun -np 2 (ctest: data_mpi_np2).
#include <gtest/gtest.h>
#include <mpi.h>

#include <sstream>

#include "data/dataset.h"
#include "data/prepare.h"
#include "data_test_util.h"

namespace brt::data {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_file;

PrepareOptions kjv_options(const fs::path& out, const fs::path& model) {
  PrepareOptions options;
  options.corpus_dir = testing::kjv_corpus_dir();
  options.output_dir = out;
  options.tokenizer_model = model;
  options.shard_target_bytes = 300'000;  // several shards per split, so ranks share the work
  options.show_progress = false;
  return options;
}

// Rank 0 makes a directory and tells the others its name.
fs::path shared_temp_path(const TempDir* dir, MPI_Comm comm) {
  std::string name = dir ? dir->path().string() : std::string();
  int length = static_cast<int>(name.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, comm);
  name.resize(static_cast<size_t>(length));
  MPI_Bcast(name.data(), length, MPI_CHAR, 0, comm);
  return name;
}

TEST(MpiPrepare, RanksProduceTheSameShardsAsOneProcessAndRerunsSkipThem) {
  if (testing::kjv_corpus_dir().empty()) GTEST_SKIP() << "the `bible` program (bible-kjv) is not installed";
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::unique_ptr<TempDir> dir = rank == 0 ? std::make_unique<TempDir>("mpi-prepare") : nullptr;
  if (rank == 0) testing::kjv_tokenizer().save(dir->path() / "given.model");
  const fs::path root = shared_temp_path(dir.get(), MPI_COMM_WORLD);

  const auto options = kjv_options(root / "ranks", root / "given.model");
  const PrepareResult first = prepare_corpus(options, MPI_COMM_WORLD);
  EXPECT_EQ(first.shards_written, first.shards_total);
  EXPECT_GT(first.shards_total, 4);
  EXPECT_EQ(first.documents, 66);
  if (rank == 0) {
    const PrepareResult single = prepare_corpus(kjv_options(root / "single", root / "given.model"), MPI_COMM_SELF);
    EXPECT_EQ(single.tokenizer_hash, first.tokenizer_hash);
    int compared = 0;
    for (const auto& entry : fs::recursive_directory_iterator(root / "single")) {
      if (!entry.is_regular_file()) continue;
      const fs::path relative = fs::relative(entry.path(), root / "single");
      EXPECT_EQ(testing::read_whole(entry.path()), testing::read_whole(root / "ranks" / relative)) << relative;
      ++compared;
    }
    EXPECT_EQ(compared, 2 * first.shards_total + 4);  // .bin + .meta per shard, index, manifest, model, record
  }
  const PrepareResult again = prepare_corpus(options, MPI_COMM_WORLD);
  EXPECT_EQ(again.shards_written, 0);
  EXPECT_EQ(again.shards_reused, first.shards_total);
  EXPECT_EQ(again.manifest.tokenizer_hash, first.manifest.tokenizer_hash);
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0 removes the directory only after everyone is done
}

TEST(Prepare, IndexMatchesSourcesAndTokensDecodeBack) {
  if (testing::kjv_corpus_dir().empty()) GTEST_SKIP() << "the `bible` program (bible-kjv) is not installed";
  TempDir dir("prepare");
  const Tokenizer tokenizer = testing::kjv_tokenizer();
  tokenizer.save(dir.path() / "given.model");
  const PrepareResult result = prepare_corpus(kjv_options(dir.path() / "out", dir.path() / "given.model"), MPI_COMM_SELF);
  EXPECT_EQ(result.manifest.totals[0].documents + result.manifest.totals[1].documents +
                result.manifest.totals[2].documents, 66);
  EXPECT_EQ(result.manifest.totals[static_cast<int>(Split::validation)].documents, 4);
  int64_t documents = 0;
  for (Split split : {Split::train, Split::validation, Split::test}) {
    const auto dataset = TokenDataset::open(dir.path() / "out", split, tokenizer.hash());
    for (int64_t i = 0; i < dataset->num_documents(); ++i, ++documents) {
      const DocumentRecord& d = dataset->document(i);
      const std::string source = testing::read_whole(d.source);  // KJV files: ASCII, no BOM/CR
      EXPECT_EQ(d.bytes, static_cast<int64_t>(source.size())) << d.source;
      std::istringstream words(source);
      int64_t reference_words = 0;
      for (std::string w; words >> w;) ++reference_words;
      EXPECT_EQ(d.words, reference_words) << d.source;
      EXPECT_EQ(tokenizer.decode(dataset->tokens(i)), source) << d.source;
      EXPECT_EQ(dataset->find_document(d.doc_id), &d);
    }
  }
  EXPECT_EQ(documents, 66);
  EXPECT_EQ(TokenDataset::open(dir.path() / "out", Split::test)->find_document(0), nullptr);  // Genesis: train
  EXPECT_THROW(TokenDataset::open(dir.path() / "out", Split::train, "0123456789abcdef"), std::runtime_error);
}

TEST(Prepare, TrainsATokenizerSkipsBadDocumentsAndRedoesDamagedShards) {
  TempDir dir("bad-docs");
  const fs::path corpus = dir.path() / "corpus";
  std::string words;
  for (int i = 0; i < 400; ++i) words += "word" + std::to_string(i % 37) + (i % 9 == 0 ? "\n" : " ");
  for (int i = 0; i < 6; ++i) write_file(corpus / "train" / ("doc" + std::to_string(i) + ".txt"), words + std::to_string(i));
  write_file(corpus / "train/bad.txt", "broken \xC3(\n");
  write_file(corpus / "validation/empty.txt", "");
  write_file(corpus / "validation/ok.txt", "\xEF\xBB\xBFheld out\r\ntext\r\n");

  PrepareOptions options;
  options.corpus_dir = corpus;
  options.output_dir = dir.path() / "out";
  options.tokenizer.vocab_size = 300;
  options.shard_target_bytes = 3000;
  options.show_progress = false;
  try {
    prepare_corpus(options, MPI_COMM_SELF);
    ADD_FAILURE() << "the invalid document did not fail prepare";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("bad.txt"), std::string::npos) << error.what();
  }
  options.bad_documents = BadDocumentPolicy::skip_with_warning;
  const PrepareResult result = prepare_corpus(options, MPI_COMM_SELF);
  EXPECT_EQ(result.documents, 7);
  EXPECT_EQ(result.skipped_documents, 2);
  const Tokenizer tokenizer = Tokenizer::load(tokenizer_path(options.output_dir));
  EXPECT_EQ(tokenizer.hash(), result.tokenizer_hash);
  const auto validation = TokenDataset::open(options.output_dir, Split::validation, tokenizer.hash());
  ASSERT_EQ(validation->num_documents(), 1);
  EXPECT_EQ(tokenizer.decode(validation->tokens(0)), "held out\ntext\n");
  EXPECT_EQ(validation->document(0).bytes, 14);
  EXPECT_EQ(validation->document(0).words, 3);

  // Damage one shard: a rerun redoes exactly that one.
  const fs::path shard = shard_tokens_path(options.output_dir, Split::train, 1);
  write_file(shard, testing::read_whole(shard) + "x");
  const PrepareResult rerun = prepare_corpus(options, MPI_COMM_SELF);
  EXPECT_EQ(rerun.shards_written, 1);
  EXPECT_EQ(rerun.shards_reused, result.shards_total - 1);
  EXPECT_FALSE(rerun.tokenizer_trained);
}

TEST(Books, WordAndByteCountsMatchPythonReference) {
  const fs::path books = testing::shared_books_dir();
  if (books.empty() || !fs::exists(books)) GTEST_SKIP() << "book corpus not found (set BRT_SHARED_DIR)";
  // From Python: b = bytes without BOM, CRLF -> LF; words = len(b.decode().split()).
  const std::vector<std::tuple<const char*, int64_t, int64_t>> expected = {
      {"11-alices-adventures-in-wonderland.txt", 169856, 29465}, {"1184-count-of-monte-cristo.txt", 2705981, 460974},
      {"120-treasure-island.txt", 388706, 71616},                {"1260-jane-eyre.txt", 1049267, 188455},
      {"1342-pride-and-prejudice.txt", 711295, 124592},          {"135-les-miserables.txt", 3256668, 568728},
      {"1400-great-expectations.txt", 1029194, 187425},          {"158-emma.txt", 910809, 160458},
      {"1661-adventures-of-sherlock-holmes.txt", 581888, 107537}, {"2600-war-and-peace.txt", 3293484, 566309},
      {"2701-moby-dick.txt", 1253865, 215829},                   {"345-dracula.txt", 867184, 164428},
      {"514-little-women.txt", 1032411, 189080},                 {"84-frankenstein.txt", 442946, 78097},
      {"98-a-tale-of-two-cities.txt", 788060, 138883},           {"996-don-quixote.txt", 2307844, 428923}};
  for (const auto& [name, bytes, words] : expected) {
    const auto text = load_document(books / name, BadDocumentPolicy::fail);
    ASSERT_TRUE(text.has_value());
    const TextStats stats = count_text(*text);
    EXPECT_EQ(stats.bytes, bytes) << name;
    EXPECT_EQ(stats.words, words) << name;
  }
  if (testing::kjv_corpus_dir().empty()) return;
  const Tokenizer tokenizer = testing::kjv_tokenizer();  // trained on the KJV: a foreign text
  for (const char* name : {"11-alices-adventures-in-wonderland.txt", "84-frankenstein.txt"}) {
    const std::string text = *load_document(books / name, BadDocumentPolicy::fail);
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text)), text) << name;
  }
}

}  // namespace
}  // namespace brt::data
