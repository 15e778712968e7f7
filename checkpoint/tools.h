// Whole-checkpoint operations built on the reader: verification, a human-readable summary
// (`brt-dist ckpt inspect|verify`), choosing the checkpoint to resume from, and refusing
// checkpoints that do not fit the run.
#pragma once

#include <mpi.h>

#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/reader.h"
#include "checkpoint/types.h"

namespace brt::checkpoint {

// Opens and fully verifies a checkpoint (collective over comm; the chunks are shared out).
// Never throws for damage: unreadable files, format problems and checksum mismatches all come
// back as problems naming the file and dataset.
VerifyReport verify(const std::filesystem::path& file, MPI_Comm comm = MPI_COMM_SELF);

// Prints format, step, tokens seen, the layout that wrote it, tokenizer hash, the config text,
// other root attributes, and every tensor with dtype, shape and checksum status (verified when
// verify_checksums). Returns false if the file is damaged (also printed).
// `show_attr`, when given, prints a root attribute its own way: it returns the text for
// (name, value), or "" to print it as a plain value.
using AttributeFormatter = std::function<std::string(const std::string& name, const std::string& value)>;
bool inspect(const std::filesystem::path& file, std::ostream& out, bool verify_checksums = true,
             const AttributeFormatter& show_attr = {});

class GoodCheckpoints;  // retention.h

struct LatestGood {
  std::optional<std::filesystem::path> path;  // nullopt: no good checkpoint in the directory
  int64_t step = 0;
  std::vector<std::string> warnings;  // one per damaged checkpoint or half-written *.tmp skipped
  std::vector<std::filesystem::path> damaged;  // committed checkpoints that failed verification
  std::vector<std::filesystem::path> set_aside;  // where they went (when a good one was found)
};
// Walks the committed checkpoints newest first, fully verifying each (collective over comm),
// and returns the newest good one. With `good`, the one found is added to it and, on rank 0 of
// comm, the damaged newer ones are renamed aside (retention.h) and `latest` repointed at it, so
// no later prune or resume counts or chooses them. Without a good checkpoint nothing is renamed:
// the caller decides (an error naming `damaged`, or a fresh start that sets them aside).
LatestGood find_latest_good(const std::filesystem::path& dir, MPI_Comm comm = MPI_COMM_SELF,
                            GoodCheckpoints* good = nullptr);

struct ExpectedTensor {
  std::string path;  // "/model/layers.0.attn.wq"
  Shape shape;
  DType dtype = DType::kF32;
};
// The first difference between what the run expects and the checkpoint (missing tensor, wrong
// shape or dtype), as a message naming the file and tensor; nullopt if all match. Extra tensors
// in the checkpoint are allowed.
std::optional<std::string> find_tensor_mismatch(const CheckpointReader& reader,
                                                std::span<const ExpectedTensor> expected);
// Throws MismatchError with find_tensor_mismatch's message.
void require_tensors(const CheckpointReader& reader, std::span<const ExpectedTensor> expected);
// Throws MismatchError if string attribute `name` (e.g. "tokenizer_hash") is missing or differs.
void require_attr_equals(const CheckpointReader& reader, const std::string& name,
                         const std::string& expected);

}  // namespace brt::checkpoint
