#include "launch/run/context_parallel_refusal.h"

#include "core/sharding/context_parallel.h"
#include "parallel/layout.h"

namespace brt::launch {

namespace {

// What `work` cannot split, whatever the model ("" when it splits like training).
std::string work_problem(CpWork work, int cp) {
  const std::string key = " (train.cp = " + std::to_string(cp) + ")";
  switch (work) {
    case CpWork::kTrain:
    case CpWork::kEval:
      return {};
    case CpWork::kTaskEval:
      return "eval --task scores one answer per document, each a stream of its own: run it without --cp" + key +
             "; plain eval runs under context parallelism";
    case CpWork::kMqarEval:
      return "eval --task mqar: run it without --cp" + key;
    case CpWork::kGenerate:
      return "generate decodes one block per segment (model.seq_len = model.window), so there is no segment "
             "to split: run it without --cp" + key;
  }
  return {};
}

}  // namespace

std::string context_parallel_refusal(const RunConfig& cfg, int world_size, CpWork work) {
  const int cp = cfg.train.cp;
  if (cp > 1)
    if (const std::string p = work_problem(work, cp); !p.empty()) return p;
  if (const std::string p = parallel::cp_layout_problem(world_size, cfg.train.tp, cp); !p.empty()) return p;
  if (cp == 1) return {};
  core::ModelConfig model = cfg.model;
  model.resolve();
  return core::context_parallel_problem(model, cp);
}

}  // namespace brt::launch
