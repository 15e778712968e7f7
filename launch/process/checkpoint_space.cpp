#include "launch/process/checkpoint_space.h"

#include <cstdio>
#include <system_error>

#include "launch/plan/planner.h"

namespace brt::launch {

namespace fs = std::filesystem;

namespace {

std::string megabytes(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", double(bytes) / 1e6);
  return text;
}

}  // namespace

int64_t checkpoint_bytes_on_disk(int64_t data_bytes) { return (int64_t(256) << 10) + data_bytes + data_bytes / 100; }

int64_t predicted_checkpoint_bytes(const RunConfig& cfg) {
  core::ModelConfig model = cfg.model;
  model.resolve();
  const int elem_bytes = cfg.train.precision == "fp64" ? 8 : 4;
  // One process's whole model: a checkpoint does not depend on the layout that wrote it.
  const MemoryPrediction m = predict_rank_memory(model, cfg.optim, cfg.train.batch, 1, false, 0, elem_bytes);
  return checkpoint_bytes_on_disk(m.parameters + m.optimizer + m.carried_state);
}

int64_t free_bytes_at(const fs::path& dir) {
  std::error_code ec;
  fs::path where = fs::absolute(dir, ec);
  if (ec) return -1;
  while (!where.empty() && where != where.parent_path() && !fs::exists(where, ec)) where = where.parent_path();
  const fs::space_info space = fs::space(where, ec);
  return ec ? -1 : int64_t(space.available);
}

std::string checkpoint_space_problem(const fs::path& dir, const std::string& what, int64_t need,
                                     int64_t free_bytes) {
  if (free_bytes < 0 || free_bytes >= need) return "";
  return "not enough disk space for " + what + ": a checkpoint of this run takes about " + megabytes(need) +
         " (written whole beside the checkpoints kept, which are pruned only after it is committed), and the file "
         "system of " + dir.string() + " has " + megabytes(free_bytes) + " free. Free " + megabytes(need - free_bytes) +
         " or more there, lower checkpoint.keep and remove old checkpoints, or set checkpoint.dir on a larger file "
         "system";
}

}  // namespace brt::launch
