#include "launch/train/checkpoint/checkpoint_trust.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "parallel/communicator.h"

namespace brt::launch {

namespace fs = std::filesystem;
namespace ck = brt::checkpoint;

namespace {

// Steps skipped before `file`'s step, from its step guard (0 in files from before the guard).
int64_t skipped_before(const fs::path& file) {
  ck::CheckpointReader reader(file);
  const std::string path = ck::join_path(ck::kDataGroup, "guard_counters");
  if (!reader.has(path)) return 0;
  const std::vector<int64_t> counters = reader.read_whole<int64_t>(path);
  return counters.size() > 1 ? counters[1] : 0;  // StepGuard::counters(): consecutive, total, ...
}

bool same_directory(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::weakly_canonical(a.empty() ? fs::path(".") : a, ec) == fs::weakly_canonical(b.empty() ? fs::path(".") : b, ec);
}

// The checkpoints older than the start (`step`, `skipped`) in `dir`, newest first, until the
// first confirmed one: "P\t<step>\t<applied>\t<path>" per provisional one, then
// "C\t<step>\t<applied>\t<path>". Everything older than a confirmed checkpoint is confirmed
// too (the steps applied since can only grow going back).
std::string read_lineage(const fs::path& dir, int64_t step, int64_t skipped, int confirm_steps) {
  std::string out;
  for (const ck::CheckpointEntry& entry : ck::list_checkpoints(dir)) {
    if (entry.step >= step) continue;
    int64_t before = 0;
    try {
      before = skipped_before(entry.path);
    } catch (const ck::CheckpointError&) {
      continue;  // damaged: pruning verifies it before counting it, and sets it aside
    }
    const int64_t skips = skipped - before;
    if (skips < 0 || skips > step - entry.step) continue;  // not this run's past
    const int64_t applied = step - entry.step - skips;
    const bool confirmed = applied >= confirm_steps;
    out += std::string(confirmed ? "C" : "P") + "\t" + std::to_string(entry.step) + "\t" + std::to_string(applied) +
           "\t" + entry.path.string() + "\n";
    if (confirmed) break;
  }
  return out;
}

}  // namespace

CheckpointTrust::CheckpointTrust(fs::path dir, int confirm_steps, ck::GoodCheckpoints& good, bool file_system)
    : dir_(std::move(dir)), confirm_steps_(std::max(1, confirm_steps)), good_(good), file_system_(file_system) {}

void CheckpointTrust::start(const fs::path& file, int64_t step, int64_t skipped, parallel::Communicator* world) {
  provisional_.clear();
  confirmed_.reset();
  std::string lineage;
  if ((world == nullptr || world->rank() == 0) && same_directory(file.parent_path(), dir_))
    lineage = read_lineage(dir_, step, skipped, confirm_steps_);
  if (world != nullptr && world->size() > 1) parallel::broadcast_string(*world, lineage, 0);
  std::istringstream lines(lineage);
  std::string kind, path;
  int64_t at = 0, applied = 0;
  while (std::getline(lines, kind, '\t') && lines >> at >> applied && lines.ignore(1) && std::getline(lines, path)) {
    if (kind == "C") {
      confirmed_ = path;
    } else {
      provisional_.insert(provisional_.begin(), {path, at, int(applied), true});  // oldest first
      good_.mark_provisional(path);
    }
  }
  provisional_.push_back({file, step, 0, true});
  good_.mark_provisional(file);
}

void CheckpointTrust::saving(const fs::path& file) {
  provisional_.push_back({file, 0, 0, false});
  good_.mark_provisional(file);
}

std::vector<int64_t> CheckpointTrust::saved(const fs::path& file, int64_t step, bool committed) {
  const auto it = std::find_if(provisional_.rbegin(), provisional_.rend(),
                               [&](const Provisional& p) { return p.path == file && !p.committed; });
  if (it == provisional_.rend()) return {};
  if (!committed) {
    provisional_.erase(std::next(it).base());
    good_.forget(file);
    return {};
  }
  it->committed = true;
  it->step = step;
  return confirm_ready();
}

std::vector<int64_t> CheckpointTrust::step_applied() {
  for (Provisional& p : provisional_) ++p.applied;
  return confirm_ready();
}

std::vector<int64_t> CheckpointTrust::confirm_ready() {
  std::vector<int64_t> confirmed;
  for (auto it = provisional_.begin(); it != provisional_.end();) {
    if (!it->committed || it->applied < confirm_steps_) {
      ++it;
      continue;
    }
    good_.confirm(it->path);
    confirmed_ = it->path;  // oldest first: the last one confirmed is the newest
    confirmed.push_back(it->step);
    it = provisional_.erase(it);
  }
  return confirmed;
}

std::vector<std::string> CheckpointTrust::give_up() {
  std::vector<std::string> notes;
  bool moved = false;
  for (auto it = provisional_.rbegin(); it != provisional_.rend(); ++it) {  // newest first
    if (file_system_ && it->committed && same_directory(it->path.parent_path(), dir_)) {
      try {
        const fs::path aside = ck::set_aside(it->path, ck::kUnconfirmedSuffix);
        notes.push_back("set aside unconfirmed checkpoint " + it->path.string() + " as " + aside.string());
        moved = true;
      } catch (const ck::CheckpointError& e) {
        notes.push_back(std::string(e.what()) + " (it stays unconfirmed: not counted toward checkpoint.keep)");
      }
    }
    good_.forget(it->path);
  }
  provisional_.clear();
  if (!moved) return notes;
  // `latest` names a checkpoint a run may start from: the newest confirmed one, else the
  // newest one left, else nothing (no pointer at all rather than one to a file set aside).
  const auto left = ck::list_checkpoints(dir_);
  const std::optional<fs::path> target = confirmed_ ? confirmed_ : left.empty() ? std::nullopt
                                                                                 : std::optional<fs::path>(left.front().path);
  const auto named = ck::read_latest_pointer(dir_);
  std::error_code ec;
  if (!target && named) fs::remove(dir_ / ck::kLatestPointerName, ec);
  if (target && (!named || named->filename() != target->filename())) {
    try {
      ck::write_latest_pointer(dir_, target->filename().string());
    } catch (const ck::CheckpointError& e) {
      notes.push_back(e.what());
    }
  }
  return notes;
}

}  // namespace brt::launch
