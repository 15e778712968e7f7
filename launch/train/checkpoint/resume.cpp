#include "launch/train/checkpoint/resume.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <stdexcept>

#include "parallel/communicator.h"

namespace brt::launch {

namespace fs = std::filesystem;
namespace ck = brt::checkpoint;

namespace {

std::string names(const std::vector<fs::path>& files) {
  std::string out;
  for (size_t k = 0; k < files.size(); ++k) out += (k ? ", " : "") + files[k].filename().string();
  return out;
}

// Every damaged checkpoint set aside, for a fresh start the user allowed.
void set_aside_all(const ck::LatestGood& found, const fs::path& dir, ResumePlan& plan) {
  for (const auto& file : found.damaged)
    plan.notes.push_back("checkpoint.allow_fresh_start: set aside damaged " + file.string() + " as " +
                         ck::set_aside_damaged(file).string());
  if (!found.damaged.empty() || !ck::list_set_aside(dir).empty())
    plan.notes.push_back("checkpoint.allow_fresh_start: every checkpoint in " + dir.string() +
                         " is damaged; starting from step 0");
}

// No good checkpoint in `dir`: damaged ones (or ones set aside earlier) make it an error.
void refuse_if_all_damaged(const CheckpointConfig& cfg, const ck::LatestGood& found, const fs::path& dir,
                           ResumePlan& plan) {
  const auto aside = ck::list_set_aside(dir);
  if (found.damaged.empty() && aside.empty()) return;
  if (cfg.allow_fresh_start) return set_aside_all(found, dir, plan);
  // Checkpoints the step guard set aside unconfirmed (launch/train/checkpoint/checkpoint_trust.h) are no start
  // either: they may hold diverged weights. A fresh start over them would lose the run silently.
  const bool unconfirmed_only = found.damaged.empty() && std::all_of(aside.begin(), aside.end(), [](const fs::path& f) {
    return f.filename().string().find(ck::kUnconfirmedSuffix) != std::string::npos;
  });
  if (unconfirmed_only)
    throw std::runtime_error("no checkpoint in " + dir.string() + " is confirmed: the step guard set aside " +
                             names(aside) + " (training did not go on from them; they may hold diverged weights)."
                             "\nNothing was changed. Resume one deliberately (--resume FILE), or set "
                             "checkpoint.allow_fresh_start=true to start from step 0.");
  std::string message = "every checkpoint in " + dir.string() + " is damaged";
  if (!found.damaged.empty()) message += " (" + names(found.damaged) + ")";
  if (!aside.empty()) message += (found.damaged.empty() ? " (" : "; earlier set aside: ") + names(aside) + (found.damaged.empty() ? ")" : "");
  for (const auto& w : found.warnings) message += "\n  " + w;
  throw std::runtime_error(message +
                           "\nNothing was changed. Restore a good checkpoint, or set "
                           "checkpoint.allow_fresh_start=true to set them aside and start from step 0.");
}

// Step of a verified checkpoint file (its metadata; the name may be anything).
int64_t step_of(const fs::path& file) {
  ck::CheckpointReader reader(file);
  return reader.metadata().step;
}

// The newest good checkpoint of `dir` into the plan (true), or none: then an error if they are
// all damaged (refuse_if_all_damaged), false if there are none at all.
bool newest_good_into_plan(const CheckpointConfig& cfg, const fs::path& dir, ck::GoodCheckpoints& good,
                           const ck::PhaseCallback& on_phase, ResumePlan& plan, int64_t& start_step) {
  if (on_phase) on_phase("verifying the checkpoints of " + dir.string());
  const ck::LatestGood found = ck::find_latest_good(dir, MPI_COMM_SELF, &good);
  plan.notes.insert(plan.notes.end(), found.warnings.begin(), found.warnings.end());
  if (found.path) {
    plan.from = found.path;
    start_step = found.step;
    return true;
  }
  refuse_if_all_damaged(cfg, found, dir, plan);
  return false;
}

void decide(const CheckpointConfig& cfg, ck::GoodCheckpoints& good, const ck::PhaseCallback& on_phase,
            ResumePlan& plan) {
  const fs::path dir = cfg.dir;
  std::error_code ec;
  int64_t start_step = 0;
  if (!cfg.resume_from.empty()) {
    const fs::path source = cfg.resume_from;
    if (fs::is_regular_file(source, ec)) {
      if (on_phase) on_phase("verifying " + source.string());
      const ck::VerifyReport report = ck::verify(source);
      if (!report.ok) {
        std::string message = "--resume " + source.string() + ": the checkpoint is damaged";
        for (const auto& p : report.problems) message += "\n  " + p;
        throw std::runtime_error(message + "\nResume from another checkpoint (--resume DIR picks the newest good one).");
      }
      good.mark(source);
      plan.from = source;
      start_step = step_of(source);
    } else if (fs::is_directory(source, ec)) {
      if (!newest_good_into_plan(cfg, source, good, on_phase, plan, start_step) && !cfg.allow_fresh_start)
        throw std::runtime_error("--resume " + source.string() + ": the directory holds no checkpoint to resume "
                                 "from (to start a new run that checkpoints there, set checkpoint.dir=" +
                                 source.string() + " instead)");
    } else {
      throw std::runtime_error("--resume " + source.string() + ": no such file or directory (to start a new run "
                               "that checkpoints there, set checkpoint.dir=" + source.string() + " instead)");
    }
  } else if (!dir.empty() && cfg.resume && fs::is_directory(dir, ec)) {
    newest_good_into_plan(cfg, dir, good, on_phase, plan, start_step);
  }
  if (dir.empty() || !fs::is_directory(dir, ec)) return;

  // Checkpoints in the save directory that are not this run's past.
  const bool same_dir = plan.from && fs::weakly_canonical(plan.from->parent_path(), ec) == fs::weakly_canonical(dir, ec);
  std::vector<fs::path> foreign;
  for (const auto& entry : ck::list_checkpoints(dir))
    if (!same_dir || entry.step > start_step) foreign.push_back(entry.path);
  if (foreign.empty()) return;
  const std::string what =
      !plan.from ? "a fresh start would overwrite and prune checkpoints already in " + dir.string() + " (" +
                       names(foreign) + ")"
      : same_dir ? "checkpoints newer than " + plan.from->filename().string() + " are in " + dir.string() + " (" +
                       names(foreign) + "); later resumes would choose them over this run's saves"
                 : "checkpoint.dir " + dir.string() + " already holds checkpoints of another run (" + names(foreign) + ")";
  if (!cfg.overwrite)
    throw std::runtime_error(what + ". Nothing was changed. Resume the run that wrote them (--resume " + dir.string() +
                             "), choose another checkpoint.dir, or set checkpoint.overwrite=true to delete them.");
  for (const auto& file : foreign) {
    fs::remove(file, ec);
    if (ec) throw std::runtime_error("checkpoint.overwrite: cannot delete " + file.string() + ": " + ec.message());
    good.forget(file);
  }
  plan.notes.push_back("checkpoint.overwrite: " + what + "; deleted them");
  if (auto w = ck::repoint_latest(dir, good); !w.empty()) plan.notes.push_back(w);
}

}  // namespace

ResumePlan plan_resume(const CheckpointConfig& cfg, parallel::Communicator* world, ck::GoodCheckpoints& good,
                       const ck::PhaseCallback& on_phase) {
  ResumePlan plan;
  std::string error;
  const bool decider = world == nullptr || world->rank() == 0;
  if (decider) {
    try {
      decide(cfg, good, on_phase, plan);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  if (world != nullptr && world->size() > 1) {
    // "E<message>" or "P<path>\n<note>\n<note>..." from world rank 0.
    std::string packed(1, error.empty() ? 'P' : 'E');
    packed += error.empty() ? (plan.from ? plan.from->string() : std::string()) : error;
    if (error.empty())
      for (const auto& n : plan.notes) packed.append("\n").append(n);
    if (on_phase) on_phase("waiting for world rank 0 to choose the checkpoint");
    parallel::broadcast_string(*world, packed, 0);
    if (packed[0] == 'E') {
      error = packed.substr(1);
    } else if (!decider) {
      const size_t end = packed.find('\n');
      const std::string from = packed.substr(1, end == std::string::npos ? std::string::npos : end - 1);
      if (!from.empty()) {
        plan.from = from;
        good.mark(from);
      }
    }
  }
  if (!error.empty()) throw std::runtime_error(error);
  return plan;
}

}  // namespace brt::launch
