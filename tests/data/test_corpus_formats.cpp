// The corpus formats besides the PG19 layout (data/corpus/corpus_formats.h): JSONL and JSONL.gz records
// as documents (text from --text-key's field, never the raw JSON), malformed records named by file
// and line and refused or skipped and counted, long texts cut at line ends, a folder of any mix,
// the reader that streams through a file, and the deterministic held-out split.
#include <gtest/gtest.h>
#include <zlib.h>

#include <nlohmann/json.hpp>
#include <set>

#include "data/corpus/corpus_formats.h"
#include "data_test_util.h"

namespace brt::data {
namespace {

namespace fs = std::filesystem;

std::string jsonl(const std::vector<std::string>& texts, const std::string& key = "text") {
  std::string out;
  for (const auto& t : texts) out += nlohmann::json({{key, t}, {"id", out.size()}}).dump() + "\n";
  return out;
}

void write_gzip(const fs::path& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  gzclose(f);
}

std::vector<std::string> read_all(const std::vector<CorpusFile>& docs) {
  DocumentReader reader;
  std::vector<std::string> texts;
  for (const auto& d : docs) texts.push_back(*load_document(d, BadDocumentPolicy::fail, reader));
  return texts;
}

TEST(CorpusFormats, JsonlRecordsAreDocumentsOfTheirTextField) {
  testing::TempDir dir("jsonl");
  const std::vector<std::string> texts = {"first line\nsecond \"quoted\" line\n", "caf\xc3\xa9 \\ backslash", "third"};
  testing::write_file(dir.path() / "c.jsonl", jsonl(texts) + "\n  \n");  // blank lines are no records
  InputListing listing;
  list_input(dir.path() / "c.jsonl", {}, listing);
  ASSERT_EQ(listing.documents.size(), 3u);
  EXPECT_EQ(listing.jsonl_records, 3);
  EXPECT_EQ(read_all(listing.documents), texts);  // decoded: real newlines, no JSON escapes
  EXPECT_EQ(listing.documents[1].name(), (dir.path() / "c.jsonl").string() + ":2");
}

TEST(CorpusFormats, GzipAndAnotherTextKey) {
  testing::TempDir dir("gz");
  const std::vector<std::string> texts = {"alpha", "beta\n", "gamma gamma"};
  write_gzip(dir.path() / "c.jsonl.gz", jsonl(texts, "body"));
  InputOptions options;
  options.text_key = "body";
  InputListing listing;
  list_input(dir.path() / "c.jsonl.gz", options, listing);
  EXPECT_EQ(read_all(listing.documents), texts);
  // Backwards through the file: the reader starts it again (never a wrong record).
  std::vector<CorpusFile> reversed(listing.documents.rbegin(), listing.documents.rend());
  EXPECT_EQ(read_all(reversed), std::vector<std::string>(texts.rbegin(), texts.rend()));
}

TEST(CorpusFormats, MalformedRecordsNamedByFileAndLineRefusedOrSkippedAndCounted) {
  testing::TempDir dir("bad");
  const fs::path file = dir.path() / "c.jsonl";
  testing::write_file(file, jsonl({"good"}) + "{\"text\": \"cut off\n" + "[1, 2]\n" + "{\"title\": \"x\"}\n" +
                                "{\"text\": 5}\n" + "{\"text\": \"\"}\n" + jsonl({"also good"}));
  InputListing refused;
  try {
    list_input(file, {}, refused);
    FAIL() << "a malformed record was accepted";
  } catch (const CorpusError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string() + ":2: not valid JSON"), std::string::npos) << e.what();
  }
  InputOptions skip;
  skip.bad_records = BadDocumentPolicy::skip_with_warning;
  InputListing listing;
  ::testing::internal::CaptureStderr();
  list_input(file, skip, listing);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(listing.malformed_records, 5);
  EXPECT_EQ(read_all(listing.documents), (std::vector<std::string>{"good", "also good"}));
  for (const char* what : {":3: not a JSON object", ":4: no \"text\" field", ":5: \"text\" is not a string",
                           ":6: \"text\" is empty"})
    EXPECT_NE(warnings.find(file.string() + what), std::string::npos) << what << "\n" << warnings;
}

TEST(CorpusFormats, LongTextCutAtLineEndsIntoDocumentsThatRejoin) {
  testing::TempDir dir("cut");
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "line " + std::to_string(i) + " of a long text\n";
  testing::write_file(dir.path() / "long.txt", text);
  InputOptions options;
  options.max_document_bytes = 4096;
  InputListing listing;
  list_input(dir.path() / "long.txt", options, listing);
  ASSERT_GT(listing.documents.size(), 5u);
  EXPECT_EQ(listing.cut_texts, 1);
  std::string joined;
  for (const auto& piece : read_all(listing.documents)) {
    EXPECT_EQ(piece.back(), '\n');  // every cut at a line end
    joined += piece;
  }
  EXPECT_EQ(joined, text);
  InputListing whole;  // no limit: one document
  list_input(dir.path() / "long.txt", {}, whole);
  EXPECT_EQ(whole.documents.size(), 1u);
  EXPECT_TRUE(whole.documents[0].whole_file());
}

TEST(CorpusFormats, FolderOfAnyMixInSortedOrderHiddenSkipped) {
  testing::TempDir dir("mix");
  testing::write_file(dir.path() / "b.txt", "a book\n");
  testing::write_file(dir.path() / "a/records.jsonl", jsonl({"r1", "r2"}));
  testing::write_file(dir.path() / ".hidden/x.txt", "never\n");
  testing::write_file(dir.path() / ".notes.txt", "never\n");
  write_gzip(dir.path() / "c.ndjson.gz", jsonl({"r3"}));
  InputListing listing;
  list_input(dir.path(), {}, listing);
  EXPECT_EQ(listing.files, 3);
  EXPECT_EQ(read_all(listing.documents), (std::vector<std::string>{"r1", "r2", "a book\n", "r3"}));
}

TEST(CorpusFormats, HeldOutSplitIsDeterministicAndIndependentOfOrder) {
  std::vector<CorpusFile> files;
  for (int i = 0; i < 300; ++i) files.push_back({Split::train, "/corpus/doc" + std::to_string(i) + ".txt"});
  std::vector<CorpusFile> reversed(files.rbegin(), files.rend());
  const std::string note = hold_out_documents(files, {0, 0.01});
  EXPECT_NE(note.find("held out 3 of 300 documents for validation and 3 for test"), std::string::npos) << note;
  hold_out_documents(reversed, {0, 0.01});
  std::set<std::string> a, b;
  for (const auto& f : files) if (f.split != Split::train) a.insert(f.name() + std::string(split_name(f.split)));
  for (const auto& f : reversed) if (f.split != Split::train) b.insert(f.name() + std::string(split_name(f.split)));
  EXPECT_EQ(a.size(), 6u);
  EXPECT_EQ(a, b);
  // A corpus with its own validation split keeps it; one document cannot be split.
  EXPECT_EQ(hold_out_documents(files, {0, 0.01}), "");
  std::vector<CorpusFile> one = {{Split::train, "/one.txt"}};
  EXPECT_NE(hold_out_documents(one, {}).find("no held-out split: 1 document"), std::string::npos);
}

}  // namespace
}  // namespace brt::data
