// Retention that keeps good runs (docs/checkpoint-format.md §1): only checkpoints known to be
// good count toward checkpoint.keep, a damaged file is renamed aside (never counted, chosen or
// pruned), and `latest` always names a good file. A damaged checkpoint with a high step can
// therefore never push the newest good one (or the save just made) out of the directory.
#pragma once

#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace brt::checkpoint {

// The checkpoints of a run this process knows to be good: committed by it (the writer computed
// their checksums from memory) or fully verified. Saves and resume share one per run, so a file
// is verified at most once. Thread-safe (a background writer may prune).
//
// A file may also be provisional (docs/reliability.md, divergence-safe checkpoints): intact, but
// not yet shown to hold weights training can go on from. A provisional file is neither counted
// toward keep_last nor deleted by pruning, so saves made while a run diverges can never push
// the checkpoints from before it out. The trainer marks its saves provisional before they
// commit and confirms them once training has gone on from them (launch/train/checkpoint/checkpoint_trust.h).
class GoodCheckpoints {
 public:
  void mark(const std::filesystem::path& file);
  void forget(const std::filesystem::path& file);  // drops it from both sets
  bool contains(const std::filesystem::path& file) const;
  void mark_provisional(const std::filesystem::path& file);
  void confirm(const std::filesystem::path& file);  // no longer provisional
  bool provisional(const std::filesystem::path& file) const;

 private:
  static std::string key(const std::filesystem::path& file);
  mutable std::mutex mutex_;
  std::set<std::string> files_, provisional_;
};

inline constexpr const char* kDamagedSuffix = ".damaged";
// A checkpoint the step guard gave up on before training had gone on from it (it may hold
// diverged weights): set aside like a damaged one, never counted, chosen or pruned.
inline constexpr const char* kUnconfirmedSuffix = ".unconfirmed";

// Renames FILE to FILE.damaged (FILE.damaged.2, ... if taken). Returns the new path; throws
// CheckpointError naming both paths if the rename fails.
std::filesystem::path set_aside_damaged(const std::filesystem::path& file);
// The same with another suffix (kUnconfirmedSuffix).
std::filesystem::path set_aside(const std::filesystem::path& file, const std::string& suffix);
// Files set aside in `dir` (ckpt-*.h5.damaged*, ckpt-*.h5.unconfirmed*), sorted.
std::vector<std::filesystem::path> list_set_aside(const std::filesystem::path& dir);

struct PruneReport {
  std::vector<std::filesystem::path> deleted;    // good checkpoints beyond the newest keep_last
  std::vector<std::filesystem::path> set_aside;  // damaged ones found while counting, renamed
  std::vector<std::string> warnings;             // one per file that could not be deleted/renamed
};
// Keeps the newest keep_last good checkpoints of `dir` (keep_last <= 0: keeps all). Walks the
// committed checkpoints newest first; a provisional one is skipped (kept, not counted); one not
// in `good` is fully verified (this process alone) before it counts; a damaged one is set aside
// instead. Files past the kept ones are deleted without being read. Never throws.
PruneReport prune_checkpoints(const std::filesystem::path& dir, int keep_last, GoodCheckpoints& good);

// Makes `latest` name the newest checkpoint of `dir` that is in `good`, if it names anything
// else (a missing, damaged or older file). Returns a warning, or "" when all is well.
std::string repoint_latest(const std::filesystem::path& dir, const GoodCheckpoints& good);

}  // namespace brt::checkpoint
