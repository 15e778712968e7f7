#include "data/tasks/task_mixture.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "data/tasks/task_random.h"
#include "data/corpus/text.h"

namespace brt::data {

namespace {

// Hash purposes, so that the schedule and the specs never share draws.
constexpr uint64_t kScheduleKey = 0x5C4ED1E, kSpecKey = 0x5BEC, kContentKey = 0xC0DE;

std::string format_double(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

void check_options(const TaskMixtureOptions& o) {
  const auto fail = [](const std::string& what) { throw std::invalid_argument("task mixture: " + what); };
  if (!(o.rate >= 0.0 && o.rate <= 1.0)) fail("rate " + format_double(o.rate) + " outside [0, 1]");
  if (o.kinds.empty()) fail("no task kinds");
  if (o.min_distance < 0 || o.max_distance < o.min_distance) {
    fail("distance range [" + std::to_string(o.min_distance) + ", " + std::to_string(o.max_distance) + "] is empty or negative");
  }
  if (o.min_prefix < 0 || o.max_prefix < o.min_prefix) {
    fail("prefix range [" + std::to_string(o.min_prefix) + ", " + std::to_string(o.max_prefix) + "] is empty or negative");
  }
  if (o.supporting_facts < 0 || o.supporting_facts > 2) fail("supporting_facts must be 0 (either), 1 or 2");
}

std::string kind_list(const std::vector<TaskKind>& kinds, char separator) {
  std::string out;
  for (const TaskKind kind : kinds) {
    if (!out.empty()) out += separator;
    out += task_kind_name(kind);
  }
  return out;
}

}  // namespace

TaskMixture::TaskMixture(std::shared_ptr<const TaskGenerator> generator, TaskMixtureOptions options)
    : generator_(std::move(generator)), options_(std::move(options)) {
  check_options(options_);
  std::string canonical = "rate " + format_double(options_.rate) + "; kinds " + kind_list(options_.kinds, ' ');
  canonical += "; distance " + std::to_string(options_.min_distance) + " " + std::to_string(options_.max_distance) +
               "; prefix " + std::to_string(options_.min_prefix) + " " + std::to_string(options_.max_prefix) +
               "; digits " + std::to_string(options_.digits) + "; facts " + std::to_string(options_.facts) + " " +
               std::to_string(options_.supporting_facts) + "; seed " + std::to_string(options_.seed) + "; " +
               generator_->identity();
  fingerprint_ = std::max<uint64_t>(1, fnv1a64(canonical.data(), canonical.size()));
  for (const TaskKind kind : options_.kinds) {
    TaskSpec shape;
    shape.kind = kind;
    shape.digits = options_.digits;
    shape.facts = options_.facts;
    shape.supporting_facts = options_.supporting_facts == 0 ? 1 : options_.supporting_facts;
    generator_->min_distance_tokens(shape);  // std::invalid_argument naming digits or facts out of range
  }
  // facts: every statement but the fact may have to lie between the fact and the question
  // (the prefix may be 0), and none is longer than "Name travelled to the place." — qa2's
  // second fact, whose longest form min_distance_tokens measures.
  TaskSpec qa2;
  qa2.kind = TaskKind::facts;
  qa2.facts = 2;
  qa2.supporting_facts = 2;
  facts_min_distance_ = int64_t{options_.facts - 1} * generator_->min_distance_tokens(qa2);
}

bool TaskMixture::is_task(int64_t stream, int64_t slot) const {
  if (options_.rate <= 0.0) return false;
  const uint64_t draw = mix_keys({options_.seed, kScheduleKey, static_cast<uint64_t>(stream), static_cast<uint64_t>(slot)});
  return static_cast<double>(draw >> 11) * 0x1.0p-53 < options_.rate;
}

TaskSpec TaskMixture::spec(int64_t stream, int64_t task) const {
  TaskRandom rng(mix_keys({options_.seed, static_cast<uint64_t>(stream), static_cast<uint64_t>(task)}), kSpecKey);
  TaskSpec spec;
  spec.kind = options_.kinds[static_cast<size_t>(rng.below(static_cast<int64_t>(options_.kinds.size())))];
  spec.distance_tokens = rng.between(options_.min_distance, options_.max_distance);
  spec.prefix_tokens = rng.between(options_.min_prefix, options_.max_prefix);
  spec.digits = options_.digits;
  spec.supporting_facts = options_.supporting_facts != 0 ? options_.supporting_facts
                          : options_.facts >= 2          ? static_cast<int>(1 + rng.below(2))
                                                         : 1;
  spec.facts = options_.facts;
  if (spec.kind == TaskKind::facts) spec.distance_tokens = std::max(spec.distance_tokens, facts_min_distance_);
  spec.seed = mix_keys({options_.seed, kContentKey, static_cast<uint64_t>(stream), static_cast<uint64_t>(task)});
  return spec;
}

std::string TaskMixture::describe() const {
  const std::string kinds = kind_list(options_.kinds, '/');
  char line[256];
  std::snprintf(line, sizeof line, "tasks: %.3g%% of documents, %s, distance %lld-%lld tokens, prefix %lld-%lld, seed %llu",
                options_.rate * 100.0, kinds.c_str(), (long long)options_.min_distance, (long long)options_.max_distance,
                (long long)options_.min_prefix, (long long)options_.max_prefix, (unsigned long long)options_.seed);
  return line;
}

}  // namespace brt::data
