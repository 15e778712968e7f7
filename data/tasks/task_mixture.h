// Task documents mixed into the training streams (`data.tasks`): a chosen
// share of every stream's documents are passkey / needle / facts documents (data/tasks/tasks.h)
// at distances drawn from a chosen range, read segment by segment with the carried state like
// any book.
//
// Seekable schedule: global stream g's documents are numbered by slot k = corpus documents +
// task documents it has taken; slot k is a task when a hash of (seed, g, k) falls below the
// rate, and the t-th task document of stream g is made from a hash of (seed, g, t). So the
// cursor only has to count a stream's task documents besides its corpus documents
// (StreamPosition::tasks_taken) to resume exactly, on any layout with the same global
// streams, and the corpus documents keep their order: stream g still reads Q[g], Q[g + G], ...
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/tasks/tasks.h"

namespace brt::data {

struct TaskMixtureOptions {
  double rate = 0.0;  // the share of each stream's documents that are tasks, [0, 1]
  std::vector<TaskKind> kinds = {TaskKind::passkey, TaskKind::needle, TaskKind::facts};  // drawn uniformly
  // Tokens between the fact and the question, and before the fact: drawn uniformly (inclusive).
  int64_t min_distance = 64, max_distance = 1024;
  int64_t min_prefix = 0, max_prefix = 256;
  int digits = 5;              // passkey
  int facts = 3;               // facts: statements in all
  int supporting_facts = 0;    // facts: 1 (qa1), 2 (qa2), 0: either, drawn per document
  uint64_t seed = 0;
};

class TaskMixture {
 public:
  // std::invalid_argument naming the option that is out of range.
  TaskMixture(std::shared_ptr<const TaskGenerator> generator, TaskMixtureOptions options);

  // Whether slot `slot` of global stream `stream` is a task document.
  bool is_task(int64_t stream, int64_t slot) const;
  // The spec of global stream `stream`'s task-th task document, and the document.
  TaskSpec spec(int64_t stream, int64_t task) const;
  TaskDocument document(int64_t stream, int64_t task) const { return generator_->make(spec(stream, task)); }
  // Non-zero hash of the options and the generator's identity: a stream cursor records it, so
  // resuming under another mixture (or another filler corpus) is refused, not silently changed.
  uint64_t fingerprint() const { return fingerprint_; }
  const TaskMixtureOptions& options() const { return options_; }
  const TaskGenerator& generator() const { return *generator_; }
  // One line for logs: "tasks: 5% of documents, passkey/needle/facts, distance 64-1024 tokens".
  std::string describe() const;

 private:
  std::shared_ptr<const TaskGenerator> generator_;
  TaskMixtureOptions options_;
  uint64_t fingerprint_ = 0;
  // facts: the least distance that holds every statement that may have to go there (qa2's
  // second fact, the distractors); a drawn distance below it is raised to it.
  int64_t facts_min_distance_ = 0;
};

}  // namespace brt::data
