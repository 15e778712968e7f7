#include "data/corpus/kjv.h"
#include "data/output_file.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace brt::data {

namespace fs = std::filesystem;

namespace {

// Canonical book order; `bible` prints the books in this order.
constexpr std::array<const char*, 66> kBookNames = {
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
    "1 Samuel", "2 Samuel", "1 Kings", "2 Kings", "1 Chronicles", "2 Chronicles", "Ezra",
    "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon",
    "Isaiah", "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos",
    "Obadiah", "Jonah", "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah",
    "Malachi", "Matthew", "Mark", "Luke", "John", "Acts", "Romans", "1 Corinthians",
    "2 Corinthians", "Galatians", "Ephesians", "Philippians", "Colossians", "1 Thessalonians",
    "2 Thessalonians", "1 Timothy", "2 Timothy", "Titus", "Philemon", "Hebrews", "James",
    "1 Peter", "2 Peter", "1 John", "2 John", "3 John", "Jude", "Revelation"};

std::string file_stem(const KjvBook& book) {
  char prefix[8];
  std::snprintf(prefix, sizeof prefix, "%02d-", book.number);
  std::string stem = prefix;
  for (char c : book.name) stem.push_back(c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return stem;
}

// "Ge1:1 In the beginning ..." -> ("Ge", "1:1 In the beginning ..."); the abbreviation may
// start with a digit ("1Sm").
bool split_reference(const std::string& line, std::string* abbreviation, std::string* rest) {
  size_t i = 0;
  if (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
  const size_t letters = i;
  while (i < line.size() && std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
  if (i == letters || i >= line.size() || !std::isdigit(static_cast<unsigned char>(line[i]))) return false;
  *abbreviation = line.substr(0, i);
  *rest = line.substr(i);
  return rest->find(':') != std::string::npos && rest->find(' ') != std::string::npos;
}

}  // namespace

std::vector<std::string> default_kjv_validation_books() { return {"Ruth", "Ecclesiastes", "Mark", "James"}; }
std::vector<std::string> default_kjv_test_books() { return {"Esther", "Jonah", "Galatians", "1 John"}; }

std::vector<KjvBook> read_kjv_books(const std::string& bible_program) {
  const std::string command = bible_program + " -f Gen1:1-Rev22:21 </dev/null 2>/dev/null";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run '" + command + "'");
  std::string output;
  char buffer[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, got);
  const int status = ::pclose(pipe);
  if (status != 0 || output.empty()) {
    throw std::runtime_error("'" + command + "' failed (is Debian's bible-kjv installed?)");
  }
  const auto validation = default_kjv_validation_books();
  const auto test = default_kjv_test_books();
  std::vector<KjvBook> books;
  std::string current_abbreviation, abbreviation, rest;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    const std::string line = output.substr(start, end - start);
    start = end + 1;
    if (line.empty()) continue;
    if (!split_reference(line, &abbreviation, &rest)) {
      throw std::runtime_error(bible_program + ": unexpected output line '" + line.substr(0, 80) + "'");
    }
    if (books.empty() || abbreviation != current_abbreviation) {
      if (books.size() == kBookNames.size()) throw std::runtime_error(bible_program + ": more than 66 books");
      KjvBook book;
      book.number = static_cast<int>(books.size()) + 1;
      book.name = kBookNames[books.size()];
      book.text = book.name + "\n\n";
      if (std::find(validation.begin(), validation.end(), book.name) != validation.end()) book.split = Split::validation;
      if (std::find(test.begin(), test.end(), book.name) != test.end()) book.split = Split::test;
      books.push_back(std::move(book));
      current_abbreviation = abbreviation;
    }
    books.back().text += rest;
    books.back().text += '\n';
  }
  if (books.size() != kBookNames.size()) {
    throw std::runtime_error(bible_program + ": printed " + std::to_string(books.size()) + " books, expected 66");
  }
  return books;
}

std::vector<KjvBook> write_kjv_corpus(const fs::path& out_dir, const std::string& bible_program) {
  auto books = read_kjv_books(bible_program);
  for (Split split : {Split::train, Split::validation, Split::test}) {
    fs::create_directories(out_dir / std::string(split_name(split)));
  }
  for (const auto& book : books) {
    const fs::path path = out_dir / std::string(split_name(book.split)) / (file_stem(book) + ".txt");
    // A file that already holds the text keeps its time: prepare's plan counts a document
    // whose size or time changed as edited and encodes its shard again.
    if (std::ifstream existing(path, std::ios::binary); existing) {
      const std::string text((std::istreambuf_iterator<char>(existing)), std::istreambuf_iterator<char>());
      if (text == book.text) continue;
    }
    write_file_atomically(path, book.text);  // checked (data/output_file.h)
  }
  return books;
}

}  // namespace brt::data
