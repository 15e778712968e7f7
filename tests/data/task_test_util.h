// The corpus the task tests draw filler from: a few English-like documents of very different
// lengths (seeded sentences over a small vocabulary), prepared once per test process with a
// tokenizer trained on them. Synthetic so the tests need nothing outside the repository; the
// real-book test (test_tasks.cpp, Books*) uses ../shared/data/books when it is there.
#pragma once

#include <mpi.h>

#include <memory>
#include <random>
#include <string>

#include "data/prepare.h"
#include "data/tasks/tasks.h"
#include "data_test_util.h"

namespace brt::data::testing {

inline std::string english_like_text(int sentences, uint64_t seed) {
  static constexpr const char* kSubjects[] = {"The old man", "A young woman", "The captain", "My brother", "The doctor",
                                              "Her sister", "The stranger", "Our neighbour"};
  static constexpr const char* kVerbs[] = {"walked to", "looked at", "spoke of", "thought about", "returned to",
                                           "waited by", "wrote about", "dreamed of"};
  static constexpr const char* kObjects[] = {"the river", "the house on the hill", "a letter", "the sea", "the garden",
                                             "the old church", "a ship", "the window", "the long road", "the fire"};
  static constexpr const char* kTails[] = {".", ", and nobody said a word.", " in the morning.", " again.",
                                           ", as he had promised.", " before the storm."};
  std::mt19937_64 rng(seed);  // the corpus only has to be the same within one build
  const auto pick = [&](const auto& table) { return std::string(table[rng() % std::size(table)]); };
  std::string text;
  for (int i = 0; i < sentences; ++i) {
    text += pick(kSubjects) + " " + pick(kVerbs) + " " + pick(kObjects) + pick(kTails);
    text += (i % 6 == 5) ? "\n\n" : " ";
  }
  return text;
}

struct TaskCorpus {
  TempDir dir{"tasks"};
  std::filesystem::path prepared;
  std::shared_ptr<const TaskGenerator> generator;
  TaskCorpus() {
    const int sentences[] = {40, 400, 7, 1200, 90, 250, 3000, 15};
    for (size_t i = 0; i < std::size(sentences); ++i) {
      write_file(dir.path() / "corpus/train" / ("book" + std::to_string(i) + ".txt"), english_like_text(sentences[i], i + 1));
    }
    write_file(dir.path() / "corpus/test/held-out.txt", english_like_text(600, 99));
    PrepareOptions options;
    options.corpus_dir = dir.path() / "corpus";
    options.output_dir = prepared = dir.path() / "out";
    options.tokenizer.vocab_size = 400;
    options.shard_target_bytes = 20000;
    options.show_progress = false;
    prepare_corpus(options, MPI_COMM_SELF);
    generator = TaskGenerator::open(prepared, Split::train);
  }
};

inline const TaskCorpus& task_corpus() {
  static const auto corpus = std::make_unique<TaskCorpus>();  // test-only cache, built once per process
  return *corpus;
}

inline std::shared_ptr<const TaskGenerator> task_generator() { return task_corpus().generator; }

}  // namespace brt::data::testing
