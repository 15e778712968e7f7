// MQAR documents and streams (data/tasks/mqar.h): the layout, disjoint id ranges, the answer mask,
// determinism, and streams that resume exactly and go idle in a single pass. Exact contracts
// (integer token ids made by one generator).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "data/tasks/mqar.h"

namespace brt::data {
namespace {

MqarDocumentAt training(const MqarOptions& o) {
  return [o](int64_t g, int64_t k) -> std::optional<MqarSource> { return MqarSource{k, mqar_training_spec(o, g, k)}; };
}

TEST(MqarGenerator, PairsGapQueriesFromDisjointRanges) {
  const MqarVocabulary v = MqarVocabulary::of(64);
  EXPECT_EQ(v.describe(), "keys 4-29 (26), values 30-55 (26), filler 56-63 (8)");
  const MqarSpec spec{8, 20, 5, 42};
  const MqarDocument d = make_mqar_document(v, spec);
  ASSERT_EQ(d.tokens.size(), size_t(5 + 2 * 8 + 20 + 2 * 8));
  EXPECT_EQ(d.pairs_begin, 5);
  EXPECT_EQ(d.gap_begin, 5 + 16);
  EXPECT_EQ(d.queries_begin, 5 + 16 + 20);
  auto is_key = [&](int32_t t) { return t >= v.keys_begin && t < v.keys_begin + v.keys; };
  auto is_value = [&](int32_t t) { return t >= v.values_begin && t < v.values_begin + v.values; };
  auto is_filler = [&](int32_t t) { return t >= v.filler_begin && t < v.filler_begin + v.filler; };
  std::map<int32_t, int32_t> pairs;
  for (int64_t i = 0; i < int64_t(d.tokens.size()); ++i) {
    const int32_t t = d.tokens[size_t(i)];
    const bool filler = i < d.pairs_begin || (i >= d.gap_begin && i < d.queries_begin);
    EXPECT_EQ(is_filler(t), filler) << i;
    if (filler) continue;
    const bool key_slot = ((i - (i < d.gap_begin ? d.pairs_begin : d.queries_begin)) % 2) == 0;
    EXPECT_EQ(is_key(t), key_slot) << i;
    EXPECT_EQ(is_value(t), !key_slot) << i;
    EXPECT_EQ(d.answer[size_t(i)], uint8_t(i >= d.queries_begin && !key_slot)) << i;
    if (i < d.gap_begin && key_slot) {
      EXPECT_TRUE(pairs.emplace(t, d.tokens[size_t(i + 1)]).second) << "repeated key";
    }
  }
  // Every key asked exactly once, answered with its own value.
  std::set<int32_t> asked;
  for (int64_t i = d.queries_begin; i < int64_t(d.tokens.size()); i += 2) {
    const int32_t key = d.tokens[size_t(i)];
    ASSERT_TRUE(pairs.count(key));
    EXPECT_EQ(d.tokens[size_t(i + 1)], pairs[key]);
    asked.insert(key);
  }
  EXPECT_EQ(asked.size(), pairs.size());
}

TEST(MqarGenerator, SeededAndRefusesMorePairsThanKeys) {
  const MqarVocabulary v = MqarVocabulary::of(64);
  EXPECT_EQ(make_mqar_document(v, {4, 3, 0, 7}).tokens, make_mqar_document(v, {4, 3, 0, 7}).tokens);
  EXPECT_NE(make_mqar_document(v, {4, 3, 0, 7}).tokens, make_mqar_document(v, {4, 3, 0, 8}).tokens);
  EXPECT_THROW(make_mqar_document(v, {27, 0, 0, 1}), std::invalid_argument);
  EXPECT_THROW(MqarVocabulary::of(19), std::invalid_argument);
  MqarOptions o;
  o.max_pairs = 30;
  try {
    check_mqar_options(o, v);
    FAIL() << "30 pairs of 26 keys accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("data.tasks.max_pairs"), std::string::npos) << e.what();
  }
}

TEST(MqarGenerator, TrainingSpecsStayInTheirRangesAndSplitsDiffer) {
  MqarOptions o;
  o.min_pairs = 2, o.max_pairs = 5, o.min_gap = 3, o.max_gap = 9, o.seed = 11, o.purpose = 1;
  std::set<int> pairs;
  for (int k = 0; k < 200; ++k) {
    const MqarSpec s = mqar_training_spec(o, k % 3, k);
    EXPECT_GE(s.pairs, 2);
    EXPECT_LE(s.pairs, 5);
    EXPECT_GE(s.gap_tokens, 3);
    EXPECT_LE(s.gap_tokens, 9);
    pairs.insert(s.pairs);
  }
  EXPECT_EQ(pairs.size(), 4u);
  MqarOptions held_out = o;
  held_out.purpose = 2;
  EXPECT_NE(mqar_training_spec(o, 0, 0).seed, mqar_training_spec(held_out, 0, 0).seed);
}

// The answer-only loss: exactly the answers' targets are unmasked, each predicted from its key.
TEST(MqarStreams, AnswersOnlyUnmaskTheAnswerTargets) {
  const MqarVocabulary v = MqarVocabulary::of(64);
  MqarOptions o;
  o.seed = 3;
  MqarStreams answers(v, training(o), 2, 16, 0, true), all(v, training(o), 2, 16, 0, false);
  Batch a, b;
  int64_t answered = 0;
  for (int step = 0; step < 20; ++step) {
    ASSERT_TRUE(answers.next(a));
    ASSERT_TRUE(all.next(b));
    EXPECT_EQ(a.inputs, b.inputs);
    EXPECT_EQ(a.targets, b.targets);
    for (size_t r = 0; r < a.mask.size(); ++r) {
      if (a.mask[r]) {
        ++answered;
        EXPECT_TRUE(b.mask[r]);
        EXPECT_GE(a.inputs[r], v.keys_begin);
        EXPECT_LT(a.inputs[r], v.keys_begin + v.keys);
        EXPECT_GE(a.targets[r], v.values_begin);
        EXPECT_LT(a.targets[r], v.values_begin + v.values);
      }
    }
  }
  EXPECT_GT(answered, 0);
}

TEST(MqarStreams, CursorResumesExactly) {
  const MqarVocabulary v = MqarVocabulary::of(64);
  MqarOptions o;
  o.seed = 5, o.max_gap = 40;
  MqarStreams straight(v, training(o), 3, 16, 6, true);
  Batch batch;
  for (int i = 0; i < 7; ++i) straight.next(batch);
  MqarStreams resumed(v, training(o), 3, 16, 6, true);
  resumed.restore(straight.cursor());
  Batch x, y;
  for (int i = 0; i < 9; ++i) {
    straight.next(x);
    resumed.next(y);
    EXPECT_EQ(x.inputs, y.inputs) << i;
    EXPECT_EQ(x.mask, y.mask) << i;
    EXPECT_EQ(x.doc_start, y.doc_start) << i;
    EXPECT_EQ(x.doc_id, y.doc_id) << i;
  }
}

TEST(MqarStreams, SinglePassReadsEachDocumentOnceThenIdles) {
  const MqarVocabulary v = MqarVocabulary::of(64);
  const std::vector<MqarSpec> specs = {{2, 0, 0, 1}, {3, 5, 0, 2}, {2, 30, 0, 3}};
  const MqarDocumentAt at = [&](int64_t g, int64_t k) -> std::optional<MqarSource> {
    const int64_t j = g + 2 * k;
    if (j >= int64_t(specs.size())) return std::nullopt;
    return MqarSource{j, specs[size_t(j)]};
  };
  MqarStreams streams(v, at, 2, 16, 0, true);
  Batch b;
  std::map<int64_t, int64_t> answers;
  int steps = 0;
  while (streams.next(b)) {
    ++steps;
    for (size_t r = 0; r < b.mask.size(); ++r)
      if (b.mask[r]) ++answers[b.doc_id[r / 16]];
  }
  EXPECT_EQ(answers, (std::map<int64_t, int64_t>{{0, 2}, {1, 3}, {2, 2}}));
  EXPECT_EQ(steps, 4);  // stream 0 reads documents 0 (8 tokens: 1 segment) and 2 (38 tokens: 3)
  EXPECT_FALSE(streams.next(b));
}

}  // namespace
}  // namespace brt::data
