// Task documents mixed into the training streams (data/tasks/task_mixture.h): the
// rate holds, the corpus documents keep their order, task documents are served whole and
// marked, and a saved cursor resumes bit-exact (mid task document, with and without prefetch,
// on another layout with the same global streams); another mixture's cursor is refused.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <map>

#include "data/streams.h"
#include "data/tasks/task_mixture.h"
#include "task_test_util.h"
#include "tests/common/test_seed.h"

namespace brt::data {
namespace {

std::shared_ptr<const TaskMixture> mixture(double rate, uint64_t seed) {
  TaskMixtureOptions o;
  o.rate = rate;
  o.min_distance = 20;
  o.max_distance = 300;
  o.min_prefix = 0;
  o.max_prefix = 50;
  o.seed = seed;
  return std::make_shared<const TaskMixture>(testing::task_generator(), o);
}

StreamOptions stream_options(int B, int N, std::shared_ptr<const TaskMixture> tasks, int rank = 0, int ranks = 1) {
  StreamOptions o = testing::test_stream_options(B, N, 7, rank, ranks);
  o.bos_id = testing::task_generator()->corpus().bos_id();
  o.tasks = std::move(tasks);
  return o;
}

std::shared_ptr<const TokenDataset> corpus() {
  return std::shared_ptr<const TokenDataset>(testing::task_generator(), &testing::task_generator()->corpus());
}

// One stream's segment as served, every field.
struct Segment {
  std::vector<int32_t> inputs, targets;
  std::vector<uint8_t> mask;
  std::vector<int64_t> position;
  uint8_t doc_start, task;
  int64_t doc_id;
  bool operator==(const Segment&) const = default;
};

Segment segment_of(const Batch& b, int s) {
  const auto row = size_t(s) * size_t(b.seq);
  const auto cut = [&](const auto& v) { return std::vector(v.begin() + row, v.begin() + row + b.seq); };
  return {cut(b.inputs), cut(b.targets), cut(b.mask), cut(b.position), b.doc_start[s], b.task[s], b.doc_id[s]};
}

template <typename Streams>
std::vector<std::vector<Segment>> take(Streams& streams, int B, int steps) {
  std::vector<std::vector<Segment>> out(static_cast<size_t>(B));
  Batch batch;
  for (int i = 0; i < steps; ++i) {
    streams.next(batch);
    for (int s = 0; s < B; ++s) out[size_t(s)].push_back(segment_of(batch, s));
  }
  return out;
}

TEST(TaskMixture, RateHoldsAndSpecsAreSeeded) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto tasks = mixture(0.2, seed);
  int hits = 0;
  const int slots = 20000;
  for (int k = 0; k < slots; ++k) hits += tasks->is_task(k % 7, k / 7);
  EXPECT_NEAR(hits / double(slots), 0.2, 4 * std::sqrt(0.2 * 0.8 / slots));
  std::map<TaskKind, int> kinds;
  const auto same = mixture(0.2, seed);
  for (int t = 0; t < 300; ++t) {
    const TaskSpec spec = tasks->spec(3, t);
    EXPECT_EQ(spec.seed, same->spec(3, t).seed);
    EXPECT_NE(spec.seed, tasks->spec(4, t).seed);
    EXPECT_GE(spec.distance_tokens, 20);
    EXPECT_LE(spec.distance_tokens, 300);
    EXPECT_LE(spec.prefix_tokens, 50);
    ++kinds[spec.kind];
  }
  EXPECT_EQ(kinds.size(), 3u);
  EXPECT_FALSE(mixture(0.0, seed)->is_task(0, 0));
  EXPECT_NE(mixture(0.2, seed)->fingerprint(), mixture(0.3, seed)->fingerprint());
  TaskMixtureOptions bad;
  bad.rate = 1.5;
  EXPECT_THROW(TaskMixture(testing::task_generator(), bad), std::invalid_argument);
  bad.rate = 0.1;
  bad.min_distance = 10;
  bad.max_distance = 5;
  EXPECT_THROW(TaskMixture(testing::task_generator(), bad), std::invalid_argument);
}

TEST(TaskMixture, TasksInterleaveAndTheBooksKeepTheirOrder) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int B = 3, N = 128, steps = 1200;
  const auto tasks = mixture(0.5, seed);
  StreamSet mixed(corpus(), stream_options(B, N, tasks));
  StreamSet plain(corpus(), stream_options(B, N, nullptr));
  const auto with_tasks = take(mixed, B, steps);
  const auto books = take(plain, B, steps);
  int64_t all_task_documents = 0;
  for (int s = 0; s < B; ++s) {
    // The corpus segments of the mixed stream are the plain stream's, in order.
    std::vector<Segment> corpus_part;
    int64_t task_documents = 0;
    std::vector<int32_t> task_targets;
    for (const Segment& seg : with_tasks[size_t(s)]) {
      if (!seg.task) {
        corpus_part.push_back(seg);
        continue;
      }
      EXPECT_EQ(seg.doc_id, -1);
      if (seg.doc_start) {
        if (task_documents > 0) {  // the previous task document was served whole
          EXPECT_EQ(task_targets, tasks->document(s, task_documents - 1).tokens);
        }
        task_targets.clear();
        ++task_documents;
      }
      for (int t = 0; t < N; ++t)
        if (seg.mask[size_t(t)]) task_targets.push_back(seg.targets[size_t(t)]);
    }
    all_task_documents += task_documents;
    ASSERT_LT(corpus_part.size(), books[size_t(s)].size());
    for (size_t i = 0; i < corpus_part.size(); ++i) ASSERT_EQ(corpus_part[i], books[size_t(s)][i]) << "stream " << s << " " << i;
    // The cursor counts the task documents finished: all begun, less one still being read.
    const StreamPosition at = mixed.cursor().positions[size_t(s)];
    EXPECT_EQ(at.tasks_taken, task_documents - (with_tasks[size_t(s)].back().task && at.offset > 0 ? 1 : 0));
  }
  // A stream may spend most of the run in the 55k-token book; all of them together meet many.
  EXPECT_GE(all_task_documents, 6);
}

// Saves after `before` steps at a point where some stream is inside a task document.
TEST(TaskMixture, CursorSavedInsideATaskDocumentResumesBitExact) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int B = 3, N = 32;
  const auto tasks = mixture(0.35, seed);
  for (const bool prefetch : {false, true}) {
    StreamOptions o = stream_options(B, N, tasks);
    o.prefetch = prefetch;
    DocumentStreams original(corpus(), o);
    int before = 0;
    bool inside_task = false;
    while (!inside_task) {
      ASSERT_LT(before, 2000) << "no stream was ever inside a task document";
      take(original, B, 1);
      ++before;
      const StreamCursor c = original.cursor();
      for (int s = 0; s < B; ++s) {
        const StreamPosition& p = c.positions[size_t(s)];
        inside_task |= p.offset > 0 && tasks->is_task(s, p.documents_taken + p.tasks_taken);
      }
    }
    const std::vector<int64_t> saved = original.cursor().to_vector();
    EXPECT_EQ(saved[0], 2);  // the cursor layout with task counts
    const auto expected = take(original, B, 150);
    const StreamCursor restored = StreamCursor::from_vector(saved);
    EXPECT_EQ(restored.to_vector(), saved);
    DocumentStreams resumed(corpus(), o, &restored);
    EXPECT_EQ(take(resumed, B, 150), expected) << "prefetch " << prefetch << ", saved after " << before << " steps";
  }
}

TEST(TaskMixture, GlobalCursorResumesOnAnotherLayout) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto tasks = mixture(0.3, seed);
  // Two ranks with B = 2 save after 57 steps; four ranks with B = 1 resume.
  StreamCursor global;
  std::vector<std::vector<Segment>> expected(4);
  for (int r = 0; r < 2; ++r) {
    StreamSet set(corpus(), stream_options(2, 24, tasks, r, 2));
    take(set, 2, 57);
    const StreamCursor local = set.cursor();
    if (r == 0) global = local;
    else global.positions.insert(global.positions.end(), local.positions.begin(), local.positions.end());
    const auto after = take(set, 2, 80);
    for (int s = 0; s < 2; ++s) expected[size_t(r * 2 + s)] = after[size_t(s)];
  }
  const StreamCursor flat = StreamCursor::from_vector(global.to_vector());
  for (int r = 0; r < 4; ++r) {
    StreamSet set(corpus(), stream_options(1, 24, tasks, r, 4), &flat);
    EXPECT_EQ(take(set, 1, 80)[0], expected[size_t(r)]) << "rank " << r;
  }
}

TEST(TaskMixture, AnotherMixtureOrNoneIsRefusedOnResume) {
  const uint64_t seed = test::test_seed();
  StreamSet with(corpus(), stream_options(2, 24, mixture(0.3, seed)));
  StreamSet without(corpus(), stream_options(2, 24, nullptr));
  take(with, 2, 20);
  take(without, 2, 20);
  const StreamCursor tasks_cursor = with.cursor(), plain_cursor = without.cursor();
  EXPECT_EQ(plain_cursor.to_vector()[0], 1);  // runs without tasks keep the version 1 layout
  EXPECT_THROW(StreamSet(corpus(), stream_options(2, 24, mixture(0.4, seed)), &tasks_cursor), std::runtime_error);
  EXPECT_THROW(StreamSet(corpus(), stream_options(2, 24, nullptr), &tasks_cursor), std::runtime_error);
  EXPECT_THROW(StreamSet(corpus(), stream_options(2, 24, mixture(0.3, seed)), &plain_cursor), std::runtime_error);
  EXPECT_NO_THROW(StreamSet(corpus(), stream_options(2, 24, mixture(0.3, seed)), &tasks_cursor));
  StreamOptions eval = stream_options(2, 24, mixture(0.3, seed));
  eval.single_pass = true;
  EXPECT_THROW(StreamSet(corpus(), eval), std::invalid_argument);
}

TEST(MpiTaskMixture, GatheredCursorEqualsTheSingleProcessLayout) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const uint64_t seed = test::test_seed();
  const auto tasks = mixture(0.5, seed);
  StreamSet mine(corpus(), stream_options(2, 64, tasks, rank, ranks));
  StreamSet reference(corpus(), stream_options(2 * ranks, 64, tasks));
  take(mine, 2, 300);  // long enough for task documents to finish on every seed
  take(reference, 2 * ranks, 300);
  const StreamCursor gathered = gather_global_cursor(mine.cursor(), MPI_COMM_WORLD);
  EXPECT_EQ(gathered, reference.cursor());
  int64_t tasks_taken = 0;
  for (const auto& p : gathered.positions) tasks_taken += p.tasks_taken;
  EXPECT_GT(tasks_taken, 0);
}

}  // namespace
}  // namespace brt::data
