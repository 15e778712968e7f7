#include "data/tasks/tasks.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "data/tasks/task_random.h"

namespace brt::data {

namespace {

// Random purposes: the content, the filler and the other statements' places draw from
// separate sequences, so one seed gives the same content and the same haystack at every depth
// of an eval grid (only where the statements sit changes).
constexpr uint64_t kContentDraws = 1, kFillerDraws = 2, kPlacementDraws = 3;

// Content tables. Small closed sets, so that a model that has not read the fact can only guess
// (chance = 1 / the table's size) and every value is a few tokens of plain English.
constexpr const char* kNames[] = {"Mary", "John", "Sandra", "Daniel", "Julie", "Fred",
                                  "Bill", "Emily", "Oliver", "Grace", "Henry", "Lucy"};
constexpr const char* kPlaces[] = {"kitchen", "garden", "hallway", "bathroom", "bedroom", "office",
                                   "cellar", "attic", "library", "garage", "pantry", "stable"};
constexpr const char* kObjects[] = {"apple", "football", "milk", "lantern", "violin",
                                    "umbrella", "basket", "candle", "compass", "pillow"};
constexpr const char* kMoveVerbs[] = {"moved to", "went to", "journeyed to", "travelled to"};
constexpr const char* kPickVerbs[] = {"picked up", "grabbed", "got", "took"};
constexpr const char* kDishes[] = {"the onion soup", "the plum pudding", "the apple pie", "the fish stew",
                                   "the lemon cake", "the roast goose", "the pea soup", "the meat pie",
                                   "the rice pudding", "the bread sauce", "the mutton broth", "the ginger bread"};
constexpr const char* kIngredients[] = {"saffron", "nutmeg", "cinnamon", "ginger", "rosemary", "vanilla",
                                        "cardamom", "thyme", "honey", "lemon", "clove", "fennel",
                                        "sage", "mint", "paprika", "anise"};

template <size_t N>
int64_t table_size(const char* const (&)[N]) {
  return static_cast<int64_t>(N);
}

// The sentences of one document, before encoding.
struct TaskContent {
  std::string fact;                    // at the depth
  std::vector<std::string> between;    // must come after the fact (qa2's second supporting fact)
  std::vector<std::string> anywhere;   // the other statements (facts' distractors)
  std::string question;                // ends where the answer begins
  std::string answer;                  // " 71432", " saffron", " kitchen"
};

TaskContent passkey_content(const std::string& number) {
  return {"The pass key is " + number + ". Remember it. " + number + " is the pass key.", {}, {},
          "What is the pass key? The pass key is", " " + number};
}

TaskContent needle_content(const std::string& dish, const std::string& ingredient) {
  return {"The secret ingredient for " + dish + " is " + ingredient + ".", {}, {},
          "What is the secret ingredient for " + dish + "? The secret ingredient for " + dish + " is",
          " " + ingredient};
}

std::string moved(const std::string& name, const std::string& verb, const std::string& place) {
  return name + " " + verb + " the " + place + ".";
}

// qa1: where is the person; qa2: where is the object the person picked up (then took along).
TaskContent qa1_content(const std::string& name, const std::string& verb, const std::string& place) {
  return {moved(name, verb, place), {}, {}, "Where is " + name + "? " + name + " is in the", " " + place};
}

TaskContent qa2_content(const std::string& name, const std::string& pick, const std::string& object,
                        const std::string& verb, const std::string& place) {
  return {name + " " + pick + " the " + object + ".", {moved(name, verb, place)}, {},
          "Where is the " + object + "? The " + object + " is in the", " " + place};
}

// `count` distinct indices into a table of `n`, in a seeded order.
std::vector<int64_t> distinct(int64_t count, int64_t n, TaskRandom& rng) {
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), 0);
  for (int64_t i = 0; i < count; ++i) std::swap(all[static_cast<size_t>(i)], all[static_cast<size_t>(i + rng.below(n - i))]);
  all.resize(static_cast<size_t>(count));
  return all;
}

TaskContent facts_content(const TaskSpec& spec, TaskRandom& rng) {
  const auto names = distinct(spec.facts, table_size(kNames), rng);
  const auto places = distinct(spec.facts, table_size(kPlaces), rng);
  const auto verb = [&] { return std::string(kMoveVerbs[rng.below(table_size(kMoveVerbs))]); };
  TaskContent c;
  if (spec.supporting_facts == 1) {
    c = qa1_content(kNames[names[0]], verb(), kPlaces[places[0]]);
  } else {
    const std::string pick = kPickVerbs[rng.below(table_size(kPickVerbs))];
    c = qa2_content(kNames[names[0]], pick, kObjects[rng.below(table_size(kObjects))], verb(), kPlaces[places[0]]);
  }
  // Distractors: other people in other places, so that the answer is never ambiguous.
  for (int i = spec.supporting_facts; i < spec.facts; ++i) {
    c.anywhere.push_back(moved(kNames[names[static_cast<size_t>(i)]], verb(), kPlaces[places[static_cast<size_t>(i)]]));
  }
  return c;
}

TaskContent draw_content(const TaskSpec& spec, TaskRandom& rng) {
  switch (spec.kind) {
    case TaskKind::passkey: {
      std::string number(1, static_cast<char>('1' + rng.below(9)));  // k digits: no leading zero
      for (int i = 1; i < spec.digits; ++i) number += static_cast<char>('0' + rng.below(10));
      return passkey_content(number);
    }
    case TaskKind::needle:
      return needle_content(kDishes[rng.below(table_size(kDishes))], kIngredients[rng.below(table_size(kIngredients))]);
    case TaskKind::facts:
      return facts_content(spec, rng);
  }
  throw std::logic_error("draw_content: unknown task kind");
}

std::string statement_text(const std::string& sentence) { return "\n" + sentence + "\n"; }
std::string question_text(const std::string& question) { return "\n" + question; }

// The part of the document before or after the fact: filler with statements at seeded places.
struct Region {
  int64_t capacity = 0;  // tokens in all
  std::vector<std::vector<int32_t>> statements;
  int64_t statement_tokens() const {
    int64_t n = 0;
    for (const auto& s : statements) n += static_cast<int64_t>(s.size());
    return n;
  }
  int64_t free() const { return capacity - statement_tokens(); }
};

// Appends the region: its filler (the next free() tokens of `filler` from `*read`) with the
// statements in a seeded order at seeded places; records the statements' spans.
void emit_region(Region& region, const std::vector<int32_t>& filler, int64_t* read, TaskRandom& rng,
                 TaskDocument& doc) {
  auto& statements = region.statements;
  for (size_t i = statements.size(); i > 1; --i) std::swap(statements[i - 1], statements[static_cast<size_t>(rng.below(static_cast<int64_t>(i)))]);
  const int64_t free = region.free();
  std::vector<int64_t> cuts;
  for (size_t i = 0; i < statements.size(); ++i) cuts.push_back(rng.below(free + 1));
  std::sort(cuts.begin(), cuts.end());
  int64_t done = 0;
  const auto copy_filler = [&](int64_t n) {
    doc.tokens.insert(doc.tokens.end(), filler.begin() + *read, filler.begin() + *read + n);
    *read += n;
    done += n;
  };
  for (size_t i = 0; i < statements.size(); ++i) {
    copy_filler(cuts[i] - done);
    const auto begin = static_cast<int64_t>(doc.tokens.size());
    doc.tokens.insert(doc.tokens.end(), statements[i].begin(), statements[i].end());
    doc.statements.push_back({begin, static_cast<int64_t>(doc.tokens.size())});
  }
  copy_filler(free - done);
}

}  // namespace

std::string_view task_kind_name(TaskKind kind) {
  switch (kind) {
    case TaskKind::passkey: return "passkey";
    case TaskKind::needle: return "needle";
    case TaskKind::facts: return "facts";
  }
  return "?";
}

TaskKind parse_task_kind(std::string_view name) {
  for (const TaskKind kind : {TaskKind::passkey, TaskKind::needle, TaskKind::facts}) {
    if (name == task_kind_name(kind)) return kind;
  }
  throw std::invalid_argument("task kind '" + std::string(name) + "': expected passkey, needle or facts");
}

double TaskDocument::depth() const {
  const int64_t haystack = static_cast<int64_t>(tokens.size()) - fact.size() - question.size() - answer.size();
  return haystack > 0 ? double(fact.begin) / double(haystack) : 0.0;
}

std::vector<int32_t> filler_tokens(const TaskDocument& doc) {
  std::vector<int32_t> out;
  size_t next_statement = 0;
  for (int64_t i = 0; i < doc.question.begin; ++i) {
    while (next_statement < doc.statements.size() && doc.statements[next_statement].end <= i) ++next_statement;
    if (next_statement < doc.statements.size() && doc.statements[next_statement].contains(i)) continue;
    out.push_back(doc.tokens[static_cast<size_t>(i)]);
  }
  return out;
}

TaskGenerator::TaskGenerator(std::shared_ptr<const TokenDataset> filler, std::shared_ptr<const Tokenizer> tokenizer)
    : filler_(std::move(filler)), tokenizer_(std::move(tokenizer)) {
  check_tokenizer_hash(filler_->tokenizer_hash(), tokenizer_->hash(), "task filler corpus");
  for (int64_t i = 0; i < filler_->num_documents(); ++i) {
    if (filler_->document(i).tokens > 0) eligible_.push_back(i);
  }
  if (eligible_.empty()) {
    throw std::invalid_argument("tasks: split " + std::string(split_name(filler_->split())) +
                                " has no document to draw filler text from");
  }
  verified_ = std::make_unique<std::atomic<uint8_t>[]>(static_cast<size_t>(filler_->num_documents()));
}

std::shared_ptr<const TaskGenerator> TaskGenerator::open(const std::filesystem::path& prepared_dir, Split split) {
  auto dataset = TokenDataset::open(prepared_dir, split);
  auto tokenizer = std::make_shared<const Tokenizer>(Tokenizer::load(tokenizer_path(prepared_dir)));
  return std::make_shared<const TaskGenerator>(std::move(dataset), std::move(tokenizer));
}

std::string TaskGenerator::identity() const {
  const SplitTotals totals = filler_->totals();
  return "tokenizer " + tokenizer_->hash() + ", split " + std::string(split_name(filler_->split())) + ", " +
         std::to_string(filler_->num_documents()) + " documents, " + std::to_string(totals.tokens) + " tokens";
}

void TaskGenerator::check_spec(const TaskSpec& spec) const {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("task spec: " + what); };
  if (spec.distance_tokens < 0) fail("distance_tokens must be >= 0");
  if (spec.prefix_tokens < 0 || spec.length_tokens < 0) fail("prefix_tokens and length_tokens must be >= 0");
  if (spec.kind == TaskKind::passkey && (spec.digits < 1 || spec.digits > 18)) {
    fail("digits " + std::to_string(spec.digits) + " outside 1..18");
  }
  if (spec.kind == TaskKind::facts) {
    if (spec.supporting_facts != 1 && spec.supporting_facts != 2) fail("supporting_facts must be 1 or 2");
    if (spec.facts < spec.supporting_facts || spec.facts > 4) {
      fail("facts " + std::to_string(spec.facts) + " outside " + std::to_string(spec.supporting_facts) + "..4");
    }
  }
}

int64_t TaskGenerator::encoded_size(const std::string& text) const {
  return static_cast<int64_t>(tokenizer_->encode(text).size());
}

TaskDocument TaskGenerator::make(const TaskSpec& spec) const {
  check_spec(spec);
  TaskRandom content_rng(spec.seed, kContentDraws), placement_rng(spec.seed, kPlacementDraws);
  const TaskContent content = draw_content(spec, content_rng);
  const std::vector<int32_t> fact = tokenizer_->encode(statement_text(content.fact));
  const std::vector<int32_t> question = tokenizer_->encode(question_text(content.question));
  const std::vector<int32_t> answer = tokenizer_->encode(content.answer);

  Region before, after;
  for (const auto& s : content.between) after.statements.push_back(tokenizer_->encode(statement_text(s)));
  after.capacity = spec.distance_tokens;
  if (after.free() < 0) {
    throw std::invalid_argument("task spec: distance_tokens " + std::to_string(spec.distance_tokens) + " is shorter than the " +
                                std::to_string(after.statement_tokens()) + " tokens of the statements that must lie "
                                "between the fact and the question");
  }
  const auto fixed = static_cast<int64_t>(fact.size() + question.size() + answer.size());
  before.capacity = spec.length_tokens > 0 ? spec.length_tokens - fixed - spec.distance_tokens : spec.prefix_tokens;
  if (before.capacity < 0) {
    throw std::invalid_argument("task spec: length_tokens " + std::to_string(spec.length_tokens) + " leaves no room for "
                                "the fact, question and answer (" + std::to_string(fixed) + " tokens) and distance " +
                                std::to_string(spec.distance_tokens));
  }
  for (const auto& s : content.anywhere) {
    std::vector<int32_t> tokens = tokenizer_->encode(statement_text(s));
    Region* first = placement_rng.below(2) == 0 ? &before : &after;
    Region* second = first == &before ? &after : &before;
    const auto size = static_cast<int64_t>(tokens.size());
    Region* chosen = first->free() >= size ? first : second->free() >= size ? second : nullptr;
    if (chosen == nullptr) {
      throw std::invalid_argument("task spec: the document is too short for the " + std::to_string(content.anywhere.size()) +
                                  " other statements (a longer length_tokens, prefix_tokens or distance_tokens)");
    }
    chosen->statements.push_back(std::move(tokens));
  }

  TaskDocument doc;
  doc.spec = spec;
  std::vector<int32_t> filler;
  draw_filler(before.free() + after.free(), spec.seed, filler, doc.filler);
  doc.tokens.reserve(static_cast<size_t>(before.capacity + after.capacity + fixed));
  int64_t read = 0;
  emit_region(before, filler, &read, placement_rng, doc);
  doc.fact = {static_cast<int64_t>(doc.tokens.size()), static_cast<int64_t>(doc.tokens.size() + fact.size())};
  doc.tokens.insert(doc.tokens.end(), fact.begin(), fact.end());
  // The fact goes in its place among the statements (they are kept in document order).
  doc.statements.push_back(doc.fact);
  emit_region(after, filler, &read, placement_rng, doc);
  doc.question = {static_cast<int64_t>(doc.tokens.size()), static_cast<int64_t>(doc.tokens.size() + question.size())};
  doc.tokens.insert(doc.tokens.end(), question.begin(), question.end());
  doc.answer = {doc.question.end, static_cast<int64_t>(doc.tokens.size() + answer.size())};
  doc.tokens.insert(doc.tokens.end(), answer.begin(), answer.end());
  doc.distance_tokens = doc.question.begin - doc.fact.end;
  doc.answer_text = content.answer;
  return doc;
}

void TaskGenerator::copy_checked(int64_t local_doc, int64_t begin, int64_t count, int32_t* out) const {
  auto& verified = verified_[static_cast<size_t>(local_doc)];
  if (verified.load(std::memory_order_acquire) == 0) {
    // The whole document once, with its ids and checksum (TokenDataset::tokens verifies and
    // throws naming the shard and document); two threads may both do it, harmlessly.
    const std::vector<int32_t> all = filler_->tokens(local_doc);
    verified.store(1, std::memory_order_release);
    std::copy_n(all.begin() + begin, count, out);
    return;
  }
  filler_->copy_tokens(local_doc, begin, count, out);
}

void TaskGenerator::draw_filler(int64_t count, uint64_t seed, std::vector<int32_t>& out,
                                std::vector<FillerSlice>& slices) const {
  TaskRandom rng(seed, kFillerDraws);
  const auto documents = static_cast<int64_t>(eligible_.size());
  int64_t drawn = 0;
  while (drawn < count) {
    const int64_t local = eligible_[static_cast<size_t>(rng.below(documents))];
    const int64_t length = filler_->document(local).tokens;
    const int64_t take = std::min(count - drawn, length);
    const int64_t begin = rng.below(length - take + 1);
    out.resize(static_cast<size_t>(drawn + take));
    copy_checked(local, begin, take, out.data() + drawn);
    slices.push_back({filler_->document(local).doc_id, begin, take, drawn});
    drawn += take;
  }
}

int64_t TaskGenerator::reserve_tokens(const TaskSpec& shape) const {
  check_spec(shape);
  int64_t most = 0;
  const auto consider = [&](const TaskContent& c) {
    most = std::max(most, encoded_size(statement_text(c.fact)) + encoded_size(question_text(c.question)) +
                              encoded_size(c.answer));
  };
  switch (shape.kind) {
    case TaskKind::passkey: {
      // Each of the number's three occurrences takes at most a piece per digit and one for the
      // space before it (a digit is at least one piece; merges only lower the count), so the
      // templates without the number plus 3 (k + 1) bound every number, whatever the tokenizer.
      consider(passkey_content(""));
      most += 3 * (int64_t{shape.digits} + 1);
      break;
    }
    case TaskKind::needle:
      for (const char* dish : kDishes)
        for (const char* ingredient : kIngredients) consider(needle_content(dish, ingredient));
      break;
    case TaskKind::facts:
      if (shape.supporting_facts == 1) {
        for (const char* name : kNames)
          for (const char* verb : kMoveVerbs)
            for (const char* place : kPlaces) consider(qa1_content(name, verb, place));
      } else {
        // The answer (a place) and the fact and question (person, verb, object) are encoded
        // apart, so their counts add up: the largest of each.
        int64_t answer = 0;
        for (const char* place : kPlaces) answer = std::max(answer, encoded_size(std::string(" ") + place));
        for (const char* name : kNames)
          for (const char* pick : kPickVerbs)
            for (const char* object : kObjects) {
              const TaskContent c = qa2_content(name, pick, object, "", "");
              most = std::max(most, encoded_size(statement_text(c.fact)) + encoded_size(question_text(c.question)) + answer);
            }
      }
      break;
  }
  return most;
}

int64_t TaskGenerator::min_distance_tokens(const TaskSpec& shape) const {
  check_spec(shape);
  if (shape.kind != TaskKind::facts || shape.supporting_facts < 2) return 0;
  int64_t most = 0;
  for (const char* name : kNames)
    for (const char* verb : kMoveVerbs)
      for (const char* place : kPlaces) most = std::max(most, encoded_size(statement_text(moved(name, verb, place))));
  return most;
}

TaskSpec TaskGenerator::grid_spec(const TaskSpec& shape, const Bounds& bounds, int64_t length, double depth) {
  if (!(depth >= 0.0 && depth <= 1.0)) throw std::invalid_argument("task depth " + std::to_string(depth) + " outside [0, 1]");
  if (length - bounds.reserve < bounds.min_distance || length <= bounds.reserve) {
    throw std::invalid_argument("task length " + std::to_string(length) + " is too short: the fact, question and answer of " +
                                std::string(task_kind_name(shape.kind)) + " take up to " + std::to_string(bounds.reserve) +
                                " tokens" +
                                (bounds.min_distance > 0 ? " and " + std::to_string(bounds.min_distance) + " must lie between them" : ""));
  }
  TaskSpec spec = shape;
  spec.length_tokens = length;
  spec.prefix_tokens = 0;
  spec.distance_tokens =
      std::max(bounds.min_distance, static_cast<int64_t>(std::llround((1.0 - depth) * double(length - bounds.reserve))));
  return spec;
}

}  // namespace brt::data
