// Room for the run's checkpoints (docs/reliability.md "Preflight"): a save writes the new file
// beside the ones it keeps and prunes only after its commit, so the file system of
// checkpoint.dir needs one whole checkpoint free — checked at start against the size predicted
// from the config (the planner's numbers: parameters, optimizer state and carried state of
// train.batch streams, stored whole in fp32, or fp64 for train.precision=fp64), and before each
// save against the size of the file it is about to write. Without the check, a run with the
// default checkpoint.every = 0 trains to its end and then loses everything at ENOSPC.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "launch/config/config.h"

namespace brt::launch {

// HDF5's own structure (headers, B-tree nodes, attributes, the stored config): measured at
// 70 KB for the fault suite's 2-layer model and 170 KB for configs/tiny.toml (blocks in use;
// the files are sparse). Counted generously — 256 KiB plus 1% of the data — since a short
// prediction would let the save fail at ENOSPC after all.
int64_t checkpoint_bytes_on_disk(int64_t data_bytes);

// The bytes one checkpoint of this run takes on disk (an upper estimate).
int64_t predicted_checkpoint_bytes(const RunConfig& cfg);

// Bytes an unprivileged writer may still use on the file system holding `dir` (or, not yet
// created, its nearest existing ancestor); -1 when it cannot be read.
int64_t free_bytes_at(const std::filesystem::path& dir);

// "" when `free_bytes` (-1: unknown, not refused) holds `need`; else the refusal naming the
// file or folder (`what`), both sizes and what to do.
std::string checkpoint_space_problem(const std::filesystem::path& dir, const std::string& what, int64_t need,
                                     int64_t free_bytes);

}  // namespace brt::launch
