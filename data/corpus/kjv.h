// The default corpus: the King James Bible from Debian's bible-kjv package,
// one document per book (66), written as a PG19-style directory with a held-out split.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "data/corpus/text.h"

namespace brt::data {

struct KjvBook {
  int number = 0;     // 1..66 in canonical order
  std::string name;   // e.g. "Genesis"
  std::string text;   // "<name>\n\n" then one line per verse: "<chapter>:<verse> <text>\n"
  Split split = Split::train;
};

// Books held out by default: 4 for validation, 4 for test (Old and New Testament, prose and
// poetry), the other 58 for training.
std::vector<std::string> default_kjv_validation_books();
std::vector<std::string> default_kjv_test_books();

// Runs `<bible_program> -f Gen1:1-Rev22:21` (every verse, one per line with its reference)
// and splits it into the 66 books. Throws naming the program when it is missing or its output
// is not the expected 66 books.
std::vector<KjvBook> read_kjv_books(const std::string& bible_program = "bible");

// Writes out_dir/{train,validation,test}/NN-<name>.txt and returns the books written.
std::vector<KjvBook> write_kjv_corpus(const std::filesystem::path& out_dir,
                                      const std::string& bible_program = "bible");

}  // namespace brt::data
