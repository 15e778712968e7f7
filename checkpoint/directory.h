// A checkpoint directory: ckpt-<step>.h5 files (committed), ckpt-<step>.h5.tmp (being written or
// left by a crash), and `latest`, a one-line text file naming the newest committed checkpoint.
// docs/checkpoint-format.md §1.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace brt::checkpoint {

inline constexpr const char* kLatestPointerName = "latest";

// "ckpt-00000100.h5" (at least 8 digits, so names also sort by step).
std::string checkpoint_file_name(int64_t step);
// The step in a committed checkpoint's name, or nullopt for anything else (tmp files included).
std::optional<int64_t> step_of_checkpoint_name(const std::string& file_name);

struct CheckpointEntry {
  int64_t step = 0;
  std::filesystem::path path;
};
// Committed checkpoints in `dir`, newest (highest step) first. Missing dir -> empty.
std::vector<CheckpointEntry> list_checkpoints(const std::filesystem::path& dir);
// Leftover ckpt-*.h5.tmp files (half-written saves) in `dir`.
std::vector<std::filesystem::path> list_partial_checkpoints(const std::filesystem::path& dir);
// Removes the half-written files of saves that never finished (ckpt-*.h5.tmp, latest.tmp.*,
// and MPI-IO's ckpt-*.h5.tmp-*.lock) and returns their names. Their writers must be gone: only the holder of the directory's
// lock calls it (launch/preflight/run_lock.h), once, before it saves. Saves themselves only ever remove
// the temporary file they created (no cleanup touches another process's file).
std::vector<std::filesystem::path> remove_abandoned_partials(const std::filesystem::path& dir);

// Which file a path named when it was created (device and inode): a cleanup removes a file
// only while the path still names the one it created, never one a later writer put there.
struct FileIdentity {
  uint64_t device = 0, inode = 0;
  bool known = false;
};
FileIdentity identify_file(const std::filesystem::path& path);
// Whether `path` still names the file `created` describes.
bool is_same_file(const std::filesystem::path& path, const FileIdentity& created);
// Empties `path` (so a full disk gets its space back at once) if it is still the file `created`
// names; anything else is left alone.
void truncate_own_file(const std::filesystem::path& path, const FileIdentity& created);
// Removes `path` if it is still the file `created` names. Returns whether it removed it.
bool remove_own_file(const std::filesystem::path& path, const FileIdentity& created);

// The file `latest` names, or nullopt if there is none. Informational: resume uses
// find_latest_good, which does not trust the pointer.
std::optional<std::filesystem::path> read_latest_pointer(const std::filesystem::path& dir);
// Atomically points `latest` at file_name (write latest.tmp.<pid>, fsync, rename, fsync dir;
// the temporary name is this process's own, so a failure removes only what it wrote).
// Throws SaveError naming the file.
void write_latest_pointer(const std::filesystem::path& dir, const std::string& file_name);

// Durability helpers; throw SaveError with the path and strerror on failure.
void fsync_file(const std::filesystem::path& file);
void fsync_directory(const std::filesystem::path& dir);

}  // namespace brt::checkpoint
