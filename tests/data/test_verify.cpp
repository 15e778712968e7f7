// Verified reading (docs/data-format.md "Verification"): a damaged, truncated or
// foreign shard is reported naming the shard file and the document, by opening (sizes, .meta
// against manifest, index and tokenizer.model) or by reading (checksums, token ids); and
// prepare's reruns: a changed tokenizer setting or corpus refused, --retrain, stale shards
// removed.
#include <gtest/gtest.h>
#include <mpi.h>

#include <functional>
#include <set>
#include <sstream>

#include "data/dataset.h"
#include "data/prepare.h"
#include "data/streams.h"
#include "data/tokenizer_record.h"
#include "data_test_util.h"

namespace brt::data {
namespace {

namespace fs = std::filesystem;
using testing::read_whole;
using testing::TempDir;
using testing::write_file;

std::string words(int count, int seed) {
  std::string text;
  for (int w = 0; w < count; ++w) {
    // Letters, not digits: SentencePiece splits digits, which would leave little to merge.
    for (int n = (w * 7 + seed) % 409 + 26; n > 0; n /= 26) text += static_cast<char>('a' + n % 26);
    text += w % 13 == 12 ? '\n' : ' ';
  }
  return text;
}

void write_corpus(const fs::path& corpus) {
  for (int i = 0; i < 5; ++i)
    write_file(corpus / "train" / ("doc" + std::to_string(i) + ".txt"), words(300 + 50 * i, i));
  for (int i = 0; i < 2; ++i)
    write_file(corpus / "validation" / ("held" + std::to_string(i) + ".txt"), words(200, 9 + i));
}

PrepareOptions small_options(const fs::path& root) {
  PrepareOptions options;
  options.corpus_dir = root / "corpus";
  options.output_dir = root / "out";
  options.tokenizer.vocab_size = 300;
  options.shard_target_bytes = 2500;  // a few documents per shard, several shards
  options.show_progress = false;
  return options;
}

// A prepared copy per test, made from one prepared once per process.
class Verify : public ::testing::Test {
 protected:
  static const fs::path& pristine() {
    static const TempDir dir("verify-pristine");  // test-only cache
    static const bool prepared = [] {
      write_corpus(dir.path() / "corpus");
      prepare_corpus(small_options(dir.path()), MPI_COMM_SELF);
      return true;
    }();
    (void)prepared;
    return dir.path();
  }
  void SetUp() override { fs::copy(pristine() / "out", data(), fs::copy_options::recursive); }
  fs::path data() const { return dir_.path() / "out"; }
  fs::path bin(int shard) const { return shard_tokens_path(data(), Split::train, shard); }
  std::shared_ptr<const TokenDataset> open() const { return TokenDataset::open(data(), Split::train); }
  // Calls `f` and returns the message of the std::runtime_error it must throw.
  static std::string error_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const std::runtime_error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
  }
  // Rewrites byte `at` of the file with `change(old byte)`.
  static void patch(const fs::path& file, size_t at, const std::function<char(char)>& change) {
    std::string bytes = read_whole(file);
    ASSERT_LT(at, bytes.size());
    bytes[at] = change(bytes[at]);
    write_file(file, bytes);
  }
  TempDir dir_{"verify"};
};

TEST_F(Verify, EveryDocumentOfCleanDataVerifies) {
  const auto dataset = open();
  ASSERT_GT(dataset->num_documents(), 3);
  for (int64_t i = 0; i < dataset->num_documents(); ++i) EXPECT_NO_THROW(dataset->tokens(i));
  EXPECT_EQ(dataset->bos_id(), 1);
}

TEST_F(Verify, AFlippedLowBitNamesTheShardAndTheDocumentWhenItIsRead) {
  const auto clean = open();
  const DocumentRecord& d = clean->document(1);
  patch(bin(d.shard), static_cast<size_t>((d.token_offset + d.tokens / 2) * 2), [](char c) { return char(c ^ 1); });
  const auto dataset = open();  // sizes and metas still agree: opening cannot tell
  const std::string message = error_of([&] { dataset->tokens(1); });
  EXPECT_NE(message.find(bin(d.shard).string() + " is damaged"), std::string::npos) << message;
  EXPECT_NE(message.find("document " + std::to_string(d.doc_id) + " (" + d.source + ")"), std::string::npos) << message;
  EXPECT_NE(message.find("checksum"), std::string::npos) << message;
  // Per document: the other documents of the shard still verify.
  for (int64_t i = 0; i < dataset->num_documents(); ++i) {
    if (i != 1) {
      EXPECT_NO_THROW(dataset->tokens(i)) << i;
    }
  }
}

TEST_F(Verify, StreamsStopAtADamagedDocumentUnlessVerificationIsOff) {
  const auto clean = open();
  const DocumentRecord& d = clean->document(2);
  patch(bin(d.shard), static_cast<size_t>(d.token_offset * 2 + 3), [](char c) { return char(c ^ 2); });
  StreamOptions o;
  o.streams_per_rank = 2;
  o.seq_len = 16;
  o.single_pass = true;
  o.shuffle = false;
  o.prefetch = false;
  const auto read_all = [&](bool verify) {
    o.verify = verify;
    StreamSet set(open(), o);
    Batch batch;
    while (set.next(batch)) {
    }
  };
  EXPECT_NE(error_of([&] { read_all(true); }).find("document " + std::to_string(d.doc_id)), std::string::npos);
  EXPECT_NO_THROW(read_all(false));
}

TEST_F(Verify, AStreamResumedMidDocumentHashesTheSkippedPrefix) {
  const auto clean = open();
  const DocumentRecord& d = clean->document(0);  // the first a lone unshuffled stream reads
  ASSERT_GT(d.tokens, 64);
  patch(bin(d.shard), static_cast<size_t>(d.token_offset * 2), [](char c) { return char(c ^ 1); });
  StreamOptions o;
  o.seq_len = 16;
  o.shuffle = false;
  o.prefetch = false;
  StreamCursor cursor;
  cursor.seed = o.seed;
  cursor.num_documents = clean->num_documents();
  cursor.global_streams = 1;
  cursor.positions = {{0, 48}};  // past the damaged token
  StreamSet set(open(), o, &cursor);
  Batch batch;
  const std::string message = error_of([&] {
    for (int step = 0; step < 1000; ++step) set.next(batch);
  });
  EXPECT_NE(message.find("document " + std::to_string(d.doc_id)), std::string::npos) << message;
}

TEST_F(Verify, ATruncatedShardIsNamedAtOpenWithItsFirstLostDocument) {
  const std::string bytes = read_whole(bin(1));
  write_file(bin(1), bytes.substr(0, bytes.size() - 10));
  const std::string message = error_of([&] { open(); });
  EXPECT_EQ(message.find(bin(1).string() + " is truncated: " + std::to_string(bytes.size() - 10) + " bytes"), 0u)
      << message;
  EXPECT_NE(message.find("and the documents after it lie past its end"), std::string::npos) << message;
  EXPECT_EQ(message.find("index.tsv"), std::string::npos) << message;
}

TEST_F(Verify, AnOutOfRangeTokenNamesTheShardDocumentAndPosition) {
  const auto clean = open();
  const DocumentRecord& d = clean->document(3);
  const auto at = static_cast<size_t>((d.token_offset + 5) * 2);
  patch(bin(d.shard), at, [](char) { return char(0xFF); });
  patch(bin(d.shard), at + 1, [](char) { return char(0xFF); });
  const std::string message = error_of([&] { open()->tokens(3); });
  const std::string want = "document " + std::to_string(d.doc_id) + " (" + d.source + ") has token id 65535 at position 5";
  EXPECT_NE(message.find(want), std::string::npos) << message;
  EXPECT_NE(message.find(bin(d.shard).string()), std::string::npos) << message;
  EXPECT_NE(message.find("tokenizer.model"), std::string::npos) << message;
}

TEST_F(Verify, ManifestMetasIndexAndTokenizerModelAreCrossChecked) {
  const fs::path meta = shard_meta_path(data(), Split::train, 0);
  const std::string meta_text = read_whole(meta), index_text = read_whole(index_path(data()));
  const std::string hash = open()->tokenizer_hash();
  // A .meta of another tokenizer.
  std::string other = meta_text;
  other.replace(other.find(hash), hash.size(), "0123456789abcdef");
  write_file(meta, other);
  std::string message = error_of([&] { open(); });
  EXPECT_EQ(message.find(meta.string() + ": made with tokenizer 0123456789abcdef, but " +
                         manifest_path(data()).string()), 0u) << message;
  write_file(meta, meta_text);
  // An index row that disagrees with its .meta: document 0's offset.
  const auto row_start = index_text.find('\n') + 1, row_end = index_text.find('\n', row_start);
  std::vector<std::string> fields;
  std::istringstream row(index_text.substr(row_start, row_end - row_start));
  for (std::string field; std::getline(row, field, '\t');) fields.push_back(field);
  ASSERT_EQ(fields.size(), 8u);
  fields[3] = "7";
  std::string joined;
  for (const auto& field : fields) joined += (joined.empty() ? "" : "\t") + field;
  std::string index = index_text;
  index.replace(row_start, row_end - row_start, joined);
  write_file(index_path(data()), index);
  message = error_of([&] { open(); });
  EXPECT_NE(message.find(" and " + meta.string() + " disagree about document 0"), std::string::npos) << message;
  // A malformed index row names its line and document.
  index = index_text;
  index.replace(index.find("\ttrain\t"), 7, "\ttrian\t");
  write_file(index_path(data()), index);
  message = error_of([&] { open(); });
  EXPECT_NE(message.find("index.tsv line 2"), std::string::npos) << message;
  EXPECT_NE(message.find("the row of document 0"), std::string::npos) << message;
  write_file(index_path(data()), index_text);
  // Another tokenizer.model.
  TokenizerTrainOptions options;
  options.vocab_size = 340;
  Tokenizer::train({words(400, 3)}, options).save(tokenizer_path(data()));
  message = error_of([&] { open(); });
  EXPECT_EQ(message.find(tokenizer_path(data()).string() + " is tokenizer "), 0u) << message;
  EXPECT_NE(message.find(hash), std::string::npos) << message;
}

TEST_F(Verify, MetasWithoutPerDocumentChecksumsAskForARerun) {
  const fs::path meta = shard_meta_path(data(), Split::train, 0);
  std::string text = read_whole(meta);
  // Drop the checksum field of every doc row (the format before per-document checksums).
  std::string old;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("doc\t", 0) == 0) {
      const auto last = line.rfind('\t'), before = line.rfind('\t', last - 1);
      line.erase(before, last - before);
    }
    old += line + "\n";
  }
  write_file(meta, old);
  const std::string message = error_of([&] { open(); });
  EXPECT_NE(message.find("no per-document checksums (written by an older brt-dist prepare)"), std::string::npos)
      << message;
  // prepare redoes exactly that shard (the copy's plan names the pristine corpus).
  PrepareOptions options = small_options(pristine());
  options.output_dir = data();
  const PrepareResult rerun = prepare_corpus(options, MPI_COMM_SELF);
  EXPECT_EQ(rerun.shards_written, 1);
  EXPECT_NO_THROW(open());
}

// ---- prepare reruns

std::set<std::string> shard_files(const fs::path& out) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(out / "shards")) names.insert(entry.path().filename().string());
  return names;
}

TEST(PrepareRerun, AChangedVocabIsRefusedRetrainReplacesItAndStaleShardsGo) {
  TempDir dir("rerun-vocab");
  write_corpus(dir.path() / "corpus");
  PrepareOptions options = small_options(dir.path());
  const PrepareResult first = prepare_corpus(options, MPI_COMM_SELF);
  EXPECT_TRUE(first.tokenizer_trained);
  const PrepareResult same = prepare_corpus(options, MPI_COMM_SELF);
  EXPECT_EQ(same.shards_written, 0);
  EXPECT_EQ(same.shards_reused, first.shards_total);

  const std::string manifest = read_whole(manifest_path(options.output_dir));
  const std::string model = read_whole(tokenizer_path(options.output_dir));
  options.tokenizer.vocab_size = 340;
  try {
    prepare_corpus(options, MPI_COMM_SELF);
    ADD_FAILURE() << "a changed --vocab was accepted";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("changed: --vocab 300 -> 340"), std::string::npos) << message;
    EXPECT_NE(message.find("--retrain"), std::string::npos) << message;
  }
  EXPECT_EQ(read_whole(manifest_path(options.output_dir)), manifest);
  EXPECT_EQ(read_whole(tokenizer_path(options.output_dir)), model);

  options.retrain = true;
  options.shard_target_bytes = 1 << 20;  // one shard per split: the others become stale
  const PrepareResult retrained = prepare_corpus(options, MPI_COMM_SELF);
  EXPECT_TRUE(retrained.tokenizer_trained);
  EXPECT_NE(retrained.tokenizer_hash, first.tokenizer_hash);
  EXPECT_EQ(retrained.shards_written, retrained.shards_total);
  EXPECT_EQ(retrained.shards_total, 2);
  EXPECT_EQ(retrained.stale_files_removed, 2 * (first.shards_total - 2));
  EXPECT_EQ(shard_files(options.output_dir),
            (std::set<std::string>{"train-00000.bin", "train-00000.meta", "validation-00000.bin",
                                   "validation-00000.meta"}));
  EXPECT_EQ(read_tokenizer_record(options.output_dir)->vocab, 340);
  EXPECT_NO_THROW(TokenDataset::open(options.output_dir, Split::train, retrained.tokenizer_hash));
  options.retrain = false;
  EXPECT_EQ(prepare_corpus(options, MPI_COMM_SELF).shards_written, 0);  // the new settings are recorded
}

TEST(PrepareRerun, AChangedCorpusIsRefusedAndAGivenTokenizerKeepsTheOldOne) {
  TempDir dir("rerun-corpus");
  write_corpus(dir.path() / "corpus");
  PrepareOptions options = small_options(dir.path());
  const PrepareResult first = prepare_corpus(options, MPI_COMM_SELF);
  write_file(dir.path() / "corpus/train/new.txt", words(100, 5));
  try {
    prepare_corpus(options, MPI_COMM_SELF);
    ADD_FAILURE() << "a changed corpus was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("changed: corpus 5 documents"), std::string::npos) << e.what();
  }
  options.tokenizer_model = tokenizer_path(options.output_dir);
  const PrepareResult kept = prepare_corpus(options, MPI_COMM_SELF);
  EXPECT_EQ(kept.tokenizer_hash, first.tokenizer_hash);
  EXPECT_EQ(kept.documents, first.documents + 1);
  // A rerun must ask for what the directory holds: without --tokenizer it is refused.
  options.tokenizer_model.clear();
  try {
    prepare_corpus(options, MPI_COMM_SELF);
    ADD_FAILURE() << "a given tokenizer was silently taken for a trained one";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("changed: source given -> trained"), std::string::npos) << e.what();
  }
}

TEST(PrepareRerun, AnEditedHeldOutDocumentRedoesItsShardAndAnUnrecordedTokenizerIsRefused) {
  TempDir dir("rerun-edit");
  write_corpus(dir.path() / "corpus");
  const PrepareOptions options = small_options(dir.path());
  const PrepareResult first = prepare_corpus(options, MPI_COMM_SELF);
  write_file(dir.path() / "corpus/validation/held1.txt", words(220, 4));  // not in the tokenizer's corpus
  const PrepareResult edited = prepare_corpus(options, MPI_COMM_SELF);
  EXPECT_EQ(edited.shards_written, 1);
  EXPECT_EQ(edited.shards_reused, first.shards_total - 1);
  fs::remove(tokenizer_record_path(options.output_dir));
  try {
    prepare_corpus(options, MPI_COMM_SELF);
    ADD_FAILURE() << "a tokenizer without a record was reused";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("has no record of how it was made"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace brt::data
