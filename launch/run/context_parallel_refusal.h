// Every refusal of context parallelism (train.cp > 1, --cp) in one place, so a command cannot
// forget one and a user reads the same reason from every command (docs/parallelism.md, "Context
// parallelism"). The commands reach it through make_run_groups (launch/run/run_groups.h),
// naming their work; the training step asks it why a CUDA graph cannot capture a CP step.
#pragma once

#include <string>

#include "launch/config/config.h"

namespace brt::launch {

// What a command runs over its segments.
enum class CpWork {
  kTrain,     // brt-dist train: every segment split into train.cp chunks
  kEval,      // brt-dist eval: the same, scoring each chunk's targets
  kTaskEval,  // eval --task: one document, one stream, one answer scored at its end
  kMqarEval,  // eval --task mqar: the same, for the recall grid
  kGenerate,  // generate: one block per segment, decoded token by token
};

// "" when `cfg` may run `work` on `world_size` ranks; otherwise why not, naming the key, in
// this order: the work (a task eval's streams are one document each; generate decodes one
// block), the ranks (cp divides what TP leaves: parallel::cp_layout_problem), the model (the
// variant and model.seq_len split: core::context_parallel_problem).
std::string context_parallel_refusal(const RunConfig& cfg, int world_size, CpWork work);

// Why a training step of `train` cannot be captured as a CUDA graph because of context
// parallelism ("" when train.cp = 1): the S4D state passing is staged through the host. Inline,
// so the step's graph code links alone (the emulator's graph check builds it by itself).
inline std::string context_parallel_capture_obstacle(const TrainConfig& train) {
  if (train.cp <= 1) return {};
  return "context parallelism stages the S4D state passing through the host inside the step";
}

}  // namespace brt::launch
