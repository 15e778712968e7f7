// Long-range task documents (data/tasks/tasks.h, data/task_eval.h): reproducible for a
// seed (across runs and ranks), distances exact, answer spans that decode to the answer, filler
// that is the corpus's own text, grid cells of exact length and distance with one haystack per
// length, single-pass streams that serve every document once and mark its answer, and scoring.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "data/task_eval.h"
#include "data/tasks/tasks.h"
#include "task_test_util.h"
#include "tests/common/test_seed.h"

namespace brt::data {
namespace {

namespace fs = std::filesystem;

std::vector<int32_t> slice(const std::vector<int32_t>& tokens, TokenSpan span) {
  return {tokens.begin() + span.begin, tokens.begin() + span.end};
}

std::vector<TaskSpec> example_specs(uint64_t seed) {
  std::vector<TaskSpec> specs;
  for (const TaskKind kind : {TaskKind::passkey, TaskKind::needle, TaskKind::facts}) {
    for (const int64_t distance : {int64_t{60}, int64_t{0}, int64_t{1500}}) {
      TaskSpec spec;
      spec.kind = kind;
      spec.distance_tokens = distance;
      spec.prefix_tokens = distance == 0 ? 0 : 37;
      spec.digits = 3 + int(distance % 5);
      spec.facts = distance == 0 ? 1 : 3;
      spec.seed = seed + uint64_t(distance);
      specs.push_back(spec);
    }
  }
  TaskSpec qa2;  // two supporting facts: the second must lie between the first and the question
  qa2.kind = TaskKind::facts;
  qa2.supporting_facts = 2;
  qa2.facts = 4;
  qa2.distance_tokens = 400;
  qa2.prefix_tokens = 5;
  qa2.seed = seed;
  specs.push_back(qa2);
  return specs;
}

TEST(TaskKinds, NamesRoundTrip) {
  for (const TaskKind kind : {TaskKind::passkey, TaskKind::needle, TaskKind::facts}) {
    EXPECT_EQ(parse_task_kind(task_kind_name(kind)), kind);
  }
  EXPECT_THROW(parse_task_kind("babilong"), std::invalid_argument);
}

TEST(Tasks, SameSeedSameDocumentOtherSeedsDiffer) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto generator = testing::task_generator();
  for (const TaskSpec& spec : example_specs(seed)) {
    SCOPED_TRACE(std::string(task_kind_name(spec.kind)) + " distance " + std::to_string(spec.distance_tokens));
    const TaskDocument a = generator->make(spec);
    const TaskDocument b = testing::task_generator()->make(spec);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.answer, b.answer);
    EXPECT_EQ(a.statements, b.statements);
    TaskSpec other = spec;
    other.seed = spec.seed ^ 0x9E3779B97F4A7C15ull;
    EXPECT_NE(generator->make(other).tokens, a.tokens);
  }
  // A fresh generator over the same prepared corpus (another process, another rank) too.
  const auto reopened = TaskGenerator::open(testing::task_corpus().prepared, Split::train);
  for (const TaskSpec& spec : example_specs(seed)) EXPECT_EQ(reopened->make(spec).tokens, generator->make(spec).tokens);
}

TEST(Tasks, DistancesAndSpansAreExactAndTheAnswerDecodes) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto generator = testing::task_generator();
  const Tokenizer& tokenizer = generator->tokenizer();
  for (const TaskSpec& spec : example_specs(seed)) {
    const TaskDocument doc = generator->make(spec);
    SCOPED_TRACE(std::string(task_kind_name(spec.kind)) + ": " + tokenizer.decode(slice(doc.tokens, doc.fact)));
    EXPECT_EQ(doc.distance_tokens, spec.distance_tokens);
    EXPECT_EQ(doc.question.begin - doc.fact.end, spec.distance_tokens);
    EXPECT_EQ(doc.fact.begin, spec.prefix_tokens);
    EXPECT_EQ(doc.answer.begin, doc.question.end);
    EXPECT_EQ(doc.answer.end, int64_t(doc.tokens.size()));
    EXPECT_EQ(int64_t(doc.tokens.size()), spec.prefix_tokens + doc.fact.size() + spec.distance_tokens +
                                              doc.question.size() + doc.answer.size());
    EXPECT_DOUBLE_EQ(doc.distance_windows(64), double(spec.distance_tokens) / 64.0);
    EXPECT_EQ(tokenizer.decode(slice(doc.tokens, doc.answer)), doc.answer_text);
    const std::string question = tokenizer.decode(slice(doc.tokens, doc.question));
    EXPECT_EQ(question.substr(0, 1), "\n");
    EXPECT_NE(question.find('?'), std::string::npos) << question;
    // The answer is stated once before the question: in the fact (qa2: in the second fact).
    const std::string value = doc.answer_text.substr(1);
    int stating = 0;
    for (const TokenSpan& s : doc.statements) {
      const std::string text = tokenizer.decode(slice(doc.tokens, s));
      EXPECT_EQ(text.front(), '\n');
      EXPECT_EQ(text.back(), '\n');
      stating += text.find(" " + value + ".") != std::string::npos ? 1 : 0;
    }
    EXPECT_EQ(stating, 1) << "answer " << value;
    EXPECT_EQ(int64_t(doc.statements.size()), spec.kind == TaskKind::facts ? spec.facts : 1);
    EXPECT_NE(std::find(doc.statements.begin(), doc.statements.end(), doc.fact), doc.statements.end());
    if (spec.kind == TaskKind::passkey) {
      EXPECT_EQ(int(value.size()), spec.digits);
      EXPECT_EQ(value.find_first_not_of("0123456789"), std::string::npos);
    }
    if (spec.kind == TaskKind::facts && spec.supporting_facts == 2) {  // the move lies between fact and question
      int between = 0;
      for (const TokenSpan& s : doc.statements) between += s.begin >= doc.fact.end && s.end <= doc.question.begin;
      EXPECT_GE(between, 1);
    }
    // The question and answer are the ids the tokenizer gives their text in one piece: what
    // the model sees when it reads such a sentence anywhere.
    const std::vector<int32_t> asked(doc.tokens.begin() + doc.question.begin, doc.tokens.end());
    EXPECT_EQ(tokenizer.encode(tokenizer.decode(asked)), asked);
  }
}

TEST(Tasks, FillerIsTheCorpusText) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto generator = testing::task_generator();
  const TokenDataset& corpus = generator->corpus();
  std::set<int64_t> documents_used;
  for (const TaskSpec& spec : example_specs(seed)) {
    const TaskDocument doc = generator->make(spec);
    std::vector<int32_t> from_corpus;
    int64_t offset = 0;
    for (const FillerSlice& s : doc.filler) {
      EXPECT_EQ(s.draw_offset, offset);
      const DocumentRecord* record = corpus.find_document(s.doc_id);
      ASSERT_NE(record, nullptr);
      ASSERT_LE(s.begin + s.tokens, record->tokens);
      const std::vector<int32_t> all = corpus.tokens(record - &corpus.document(0));
      from_corpus.insert(from_corpus.end(), all.begin() + s.begin, all.begin() + s.begin + s.tokens);
      offset += s.tokens;
      documents_used.insert(s.doc_id);
    }
    EXPECT_EQ(filler_tokens(doc), from_corpus);
    int64_t statements = 0;
    for (const TokenSpan& s : doc.statements) statements += s.size();
    EXPECT_EQ(int64_t(from_corpus.size()), doc.question.begin - statements);
  }
  EXPECT_GE(documents_used.size(), 2u);  // seeded choice of document, not always the first
}

TEST(Tasks, SpecsThatCannotBeMetAreRefused) {
  const auto generator = testing::task_generator();
  TaskSpec qa2;
  qa2.kind = TaskKind::facts;
  qa2.supporting_facts = 2;
  qa2.facts = 2;
  qa2.distance_tokens = 3;  // the second fact cannot fit between
  EXPECT_THROW(generator->make(qa2), std::invalid_argument);
  TaskSpec tight;
  tight.kind = TaskKind::needle;
  tight.length_tokens = 10;
  EXPECT_THROW(generator->make(tight), std::invalid_argument);
  TaskSpec digits;
  digits.digits = 19;
  EXPECT_THROW(generator->make(digits), std::invalid_argument);
  EXPECT_THROW(generator->grid_spec(TaskSpec{}, 5, 0.5), std::invalid_argument);
  EXPECT_THROW(generator->grid_spec(TaskSpec{}, 500, 1.5), std::invalid_argument);
}

TEST(TaskGrid, CellsHaveExactLengthAndDistanceAndOneHaystackPerLength) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto generator = testing::task_generator();
  for (const TaskKind kind : {TaskKind::passkey, TaskKind::needle, TaskKind::facts}) {
    TaskGrid grid;
    grid.shape.kind = kind;
    grid.shape.seed = seed;
    grid.shape.supporting_facts = kind == TaskKind::facts ? 2 : 1;
    grid.lengths = {300, 1000};
    grid.depths = {0.0, 0.5, 1.0};
    grid.samples = 3;
    const auto cells = task_grid_cells(*generator, grid);
    const auto samples = task_grid_samples(*generator, grid);
    // The depth is the share of the haystack before the fact, up to what the fixed parts and
    // the least distance (qa2's second fact) take.
    const TaskGenerator::Bounds bounds = generator->bounds(grid.shape);
    const double slack = double(bounds.reserve + bounds.min_distance);
    ASSERT_EQ(cells.size(), 6u);
    ASSERT_EQ(samples.size(), 18u);
    std::map<std::pair<int64_t, int>, std::vector<int32_t>> haystack;  // (length, sample) -> filler
    for (const TaskSample& sample : samples) {
      const TaskCell& cell = cells[sample.cell];
      const TaskDocument doc = generator->make(sample.spec);
      EXPECT_EQ(int64_t(doc.tokens.size()), cell.length);
      EXPECT_EQ(doc.distance_tokens, cell.distance_tokens);
      if (cell.depth == 1.0) {
        EXPECT_EQ(cell.distance_tokens, bounds.min_distance);
      }
      if (cell.depth == 0.0) {
        EXPECT_LE(doc.fact.begin, bounds.reserve);
      }
      EXPECT_NEAR(doc.depth(), cell.depth, slack / double(cell.length) + 0.01);
      const auto key = std::make_pair(cell.length, sample.sample);
      if (!haystack.count(key)) haystack[key] = filler_tokens(doc);
      EXPECT_EQ(filler_tokens(doc), haystack[key]) << "depth " << cell.depth;  // only the fact moves
    }
    EXPECT_NE(haystack[std::make_pair(int64_t{1000}, 0)], haystack[std::make_pair(int64_t{1000}, 1)]);
  }
}

TEST(TaskScoring, TeacherForcedAnswerTokens) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  const double lse = 3.0 + std::log(std::exp(-2.0) + 1.0 + std::exp(-1.0) + 1.0);
  const AnswerTokenScore hit = score_answer_token<float>(logits, 1);
  EXPECT_NEAR(hit.nats, lse - 3.0, 1e-12);
  EXPECT_TRUE(hit.argmax);
  EXPECT_FALSE(score_answer_token<float>(logits, 3).argmax);  // a tie goes to the first
  EXPECT_FALSE(score_answer_token<float>(logits, 2).argmax);
  AnswerScore doc;
  doc.add(hit);
  EXPECT_TRUE(doc.exact_match());
  doc.add(score_answer_token<float>(logits, 2));
  EXPECT_FALSE(doc.exact_match());  // every answer token must be the argmax
  EXPECT_NEAR(doc.mean_nats(), (2 * lse - 5.0) / 2, 1e-12);

  const std::vector<TaskCell> cells = {{256, 0.0, 200}, {256, 1.0, 0}};
  std::vector<TaskSample> samples(4);
  samples[0].cell = samples[1].cell = 0;
  samples[2].cell = samples[3].cell = 1;
  std::vector<AnswerScore> scores(4);
  scores[0].add({0.5, true});
  scores[1].add({1.5, false});
  scores[2].add({0.25, true});
  scores[3].add({0.75, true});
  const auto results = task_cell_results(cells, samples, scores, 64);
  EXPECT_EQ(results[0].n, 2);
  EXPECT_DOUBLE_EQ(results[0].accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(results[0].answer_nats(), 1.0);
  EXPECT_DOUBLE_EQ(results[0].distance_windows, 200.0 / 64);
  EXPECT_DOUBLE_EQ(results[1].accuracy(), 1.0);
  EXPECT_DOUBLE_EQ(results[1].answer_nats(), 0.5);
}

// Every rank's share of a grid through TaskDocumentStreams: doc index -> (targets, answer
// token indices in order) as served.
struct Served {
  std::vector<int32_t> targets;
  std::vector<int64_t> answer_indices;
  int starts = 0;
};

std::map<int64_t, Served> serve(const std::vector<TaskSpec>& specs, int B, int N, int rank, int ranks) {
  StreamOptions options;
  options.streams_per_rank = B;
  options.seq_len = N;
  options.data_rank = rank;
  options.data_size = ranks;
  options.bos_id = testing::task_generator()->corpus().bos_id();
  TaskDocumentStreams streams(testing::task_generator(), specs, options);
  std::map<int64_t, Served> served;
  Batch batch;
  int steps = 0;
  while (streams.next(batch)) {
    EXPECT_LT(++steps, 10000);
    for (int s = 0; s < B; ++s) {
      if (batch.doc_id[s] < 0) continue;
      EXPECT_EQ(batch.task[s], 1);
      Served& doc = served[batch.doc_id[s]];
      doc.starts += batch.doc_start[s];
      for (int t = 0; t < N; ++t) {
        const size_t row = size_t(s) * N + t;
        if (!batch.mask[row]) continue;
        doc.targets.push_back(batch.targets[row]);
        const int64_t answer = streams.answer_token(batch, row);
        if (answer >= 0) {
          doc.answer_indices.push_back(answer);
          EXPECT_EQ(batch.targets[row], streams.document(s).tokens[size_t(streams.document(s).answer.begin + answer)]);
        }
      }
    }
  }
  return served;
}

TEST(MpiTaskStreams, EveryDocumentOnceWithItsAnswerMarkedOnEveryLayout) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto generator = testing::task_generator();
  TaskGrid grid;
  grid.shape.kind = TaskKind::needle;
  grid.shape.seed = seed;
  grid.lengths = {150, 700};
  grid.depths = {0.25, 0.75};
  grid.samples = 3;
  std::vector<TaskSpec> specs;
  for (const auto& sample : task_grid_samples(*generator, grid)) specs.push_back(sample.spec);
  // One process holding all streams against this rank's share of the same global streams.
  const auto all = serve(specs, 4, 64, 0, 1);
  const auto mine = serve(specs, 4 / ranks, 64, rank, ranks);
  ASSERT_EQ(all.size(), specs.size());
  for (const auto& [index, doc] : all) {
    const TaskDocument expected = generator->make(specs[size_t(index)]);
    EXPECT_EQ(doc.targets, expected.tokens);  // BOS first, so every token is a target once
    EXPECT_EQ(doc.starts, 1);
    std::vector<int64_t> in_order(size_t(expected.answer.size()));
    std::iota(in_order.begin(), in_order.end(), 0);
    EXPECT_EQ(doc.answer_indices, in_order);
  }
  for (const auto& [index, doc] : mine) EXPECT_EQ(doc.targets, all.at(index).targets);
  // Under mpirun every rank builds the same documents from its own generator: compare hashes.
  uint64_t hash = kFnvOffsetBasis;
  for (const TaskSpec& spec : specs) {
    const auto tokens = generator->make(spec).tokens;
    hash = fnv1a64(tokens.data(), tokens.size() * sizeof(int32_t), hash);
  }
  std::vector<uint64_t> hashes(static_cast<size_t>(ranks));
  MPI_Allgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (const uint64_t h : hashes) EXPECT_EQ(h, hash);
  int64_t served_here = int64_t(mine.size()), served_total = 0;
  MPI_Allreduce(&served_here, &served_total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(served_total, int64_t(specs.size()));
}

TEST(Books, TaskFillerIsTheBooksOwnText) {
  const fs::path books = testing::shared_books_dir();
  if (books.empty() || !fs::exists(books)) GTEST_SKIP() << "book corpus not found (set BRT_SHARED_DIR)";
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  testing::TempDir dir("task-books");
  PrepareOptions options;  // the books are read where they are, never copied
  for (const char* name : {"11-alices-adventures-in-wonderland.txt", "84-frankenstein.txt"}) {
    options.files.push_back({Split::train, books / name});
  }
  options.output_dir = dir.path() / "out";
  options.tokenizer.vocab_size = 1024;
  options.tokenizer.max_sentences = 20000;
  options.show_progress = false;
  prepare_corpus(options, MPI_COMM_SELF);
  const auto generator = TaskGenerator::open(options.output_dir, Split::train);
  std::map<int64_t, std::string> text;  // doc id -> the book's normalised text
  const TokenDataset& corpus = generator->corpus();
  for (int64_t i = 0; i < corpus.num_documents(); ++i) {
    text[corpus.document(i).doc_id] = *load_document(corpus.document(i).source, BadDocumentPolicy::fail);
  }
  for (const TaskKind kind : {TaskKind::passkey, TaskKind::needle, TaskKind::facts}) {
    TaskSpec spec;
    spec.kind = kind;
    spec.distance_tokens = 2000;
    spec.prefix_tokens = 300;
    spec.seed = seed;
    const TaskDocument doc = generator->make(spec);
    for (const FillerSlice& s : doc.filler) {
      const auto tokens = filler_tokens(doc);
      const std::vector<int32_t> piece(tokens.begin() + s.draw_offset, tokens.begin() + s.draw_offset + s.tokens);
      const std::string decoded = generator->tokenizer().decode(piece);
      EXPECT_NE(text.at(s.doc_id).find(decoded.substr(0, 200)), std::string::npos) << decoded.substr(0, 200);
    }
    const std::string answer = generator->tokenizer().decode(slice(doc.tokens, doc.answer));
    EXPECT_EQ(answer, doc.answer_text);
    std::printf("%s, distance %lld tokens: ...%s\n", std::string(task_kind_name(kind)).c_str(),
                (long long)doc.distance_tokens,
                generator->tokenizer().decode(std::vector<int32_t>(doc.tokens.end() - 40, doc.tokens.end())).c_str());
  }
}

}  // namespace
}  // namespace brt::data
