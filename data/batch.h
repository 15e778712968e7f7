// One training or evaluation step's input for the B streams of a rank (model.md §8).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace brt::data {

struct Batch {
  int streams = 0;  // B
  int seq = 0;      // N
  // [B, N]: inputs are tokens [i*N, (i+1)*N) of the stream's current document, targets are
  // tokens [i*N+1, (i+1)*N+1). Padded positions past the document's end have target 0 and
  // mask 0 (masked out of loss and metrics).
  std::vector<int32_t> inputs;
  std::vector<int32_t> targets;
  std::vector<uint8_t> mask;
  // [B]: 1 when this segment is the first of a document: carried caches reset to zeros and
  // recurrent state to its learned initial value (model.md §8).
  std::vector<uint8_t> doc_start;
  // [B]: which document each stream is reading (for per-document metrics); -1 if none, and
  // for task documents (data/tasks/task_mixture.h), which `task` marks.
  std::vector<int64_t> doc_id;
  std::vector<uint8_t> task;  // [B]: 1 when the stream reads a task document
  // [B, N]: position of each input token within its document (for eval position buckets).
  std::vector<int64_t> position;

  void resize(int b, int n) {
    streams = b;
    seq = n;
    inputs.assign(static_cast<size_t>(b) * n, 0);
    targets.assign(static_cast<size_t>(b) * n, 0);
    mask.assign(static_cast<size_t>(b) * n, 0);
    doc_start.assign(b, 0);
    doc_id.assign(b, -1);
    task.assign(b, 0);
    position.assign(static_cast<size_t>(b) * n, 0);
  }
};

}  // namespace brt::data
