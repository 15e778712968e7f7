#include "checkpoint/retention.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "checkpoint/directory.h"
#include "checkpoint/tools.h"
#include "checkpoint/types.h"

namespace brt::checkpoint {
namespace fs = std::filesystem;

std::string GoodCheckpoints::key(const fs::path& file) {
  std::error_code ec;
  const fs::path absolute = fs::absolute(file, ec);
  return (ec ? file : absolute).lexically_normal().string();
}

void GoodCheckpoints::mark(const fs::path& file) {
  std::lock_guard<std::mutex> lock(mutex_);
  files_.insert(key(file));
}

void GoodCheckpoints::forget(const fs::path& file) {
  std::lock_guard<std::mutex> lock(mutex_);
  files_.erase(key(file));
  provisional_.erase(key(file));
}

bool GoodCheckpoints::contains(const fs::path& file) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return files_.count(key(file)) != 0;
}

void GoodCheckpoints::mark_provisional(const fs::path& file) {
  std::lock_guard<std::mutex> lock(mutex_);
  provisional_.insert(key(file));
}

void GoodCheckpoints::confirm(const fs::path& file) {
  std::lock_guard<std::mutex> lock(mutex_);
  provisional_.erase(key(file));
}

bool GoodCheckpoints::provisional(const fs::path& file) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return provisional_.count(key(file)) != 0;
}

fs::path set_aside(const fs::path& file, const std::string& suffix) {
  fs::path target = file.string() + suffix;
  std::error_code ec;
  for (int n = 2; fs::exists(target, ec); ++n) target = file.string() + suffix + "." + std::to_string(n);
  if (std::rename(file.c_str(), target.c_str()) != 0) {
    throw CheckpointError("cannot rename " + std::string(suffix == kDamagedSuffix ? "damaged " : "") + "checkpoint " +
                          file.string() + " to " + target.string() + ": " + std::strerror(errno));
  }
  return target;
}

fs::path set_aside_damaged(const fs::path& file) {
  return set_aside(file, kDamagedSuffix);
}

std::vector<fs::path> list_set_aside(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && (name.find(std::string(".h5") + kDamagedSuffix) != std::string::npos ||
                                         name.find(std::string(".h5") + kUnconfirmedSuffix) != std::string::npos))
      out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

PruneReport prune_checkpoints(const fs::path& dir, int keep_last, GoodCheckpoints& good) {
  PruneReport report;
  if (keep_last <= 0) return report;
  int kept = 0;
  for (const CheckpointEntry& entry : list_checkpoints(dir)) {
    if (kept >= keep_last) {
      std::error_code ec;
      if (!fs::remove(entry.path, ec) || ec) {
        report.warnings.push_back("could not delete old checkpoint " + entry.path.string() + ": " +
                                  (ec ? ec.message() : std::string("already gone")));
      } else {
        good.forget(entry.path);
        report.deleted.push_back(entry.path);
      }
      continue;
    }
    if (good.provisional(entry.path)) continue;  // not yet known to hold weights worth keeping
    if (!good.contains(entry.path)) {
      const VerifyReport check = verify(entry.path);
      if (!check.ok) {
        try {
          report.set_aside.push_back(set_aside_damaged(entry.path));
          report.warnings.push_back("damaged checkpoint " + entry.path.string() + " set aside as " +
                                    report.set_aside.back().string() + " (not counted toward checkpoint.keep)" +
                                    (check.problems.empty() ? "" : ": " + check.problems.front()));
        } catch (const CheckpointError& e) {
          report.warnings.push_back(std::string(e.what()) + " (not counted toward checkpoint.keep)");
        }
        continue;
      }
      good.mark(entry.path);
    }
    ++kept;
  }
  return report;
}

std::string repoint_latest(const fs::path& dir, const GoodCheckpoints& good) {
  std::optional<fs::path> newest_good;
  for (const CheckpointEntry& entry : list_checkpoints(dir)) {
    if (good.contains(entry.path)) {
      newest_good = entry.path;
      break;
    }
  }
  if (!newest_good) return "";
  const auto named = read_latest_pointer(dir);
  if (named && named->filename() == newest_good->filename()) return "";
  try {
    write_latest_pointer(dir, newest_good->filename().string());
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

}  // namespace brt::checkpoint
