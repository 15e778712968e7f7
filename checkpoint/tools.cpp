#include "checkpoint/tools.h"

#include <algorithm>

#include "checkpoint/directory.h"
#include "checkpoint/h5util.h"
#include "checkpoint/retention.h"

namespace brt::checkpoint {
namespace fs = std::filesystem;

VerifyReport verify(const fs::path& file, MPI_Comm comm) {
  try {
    CheckpointReader reader(file, comm);
    return reader.verify_all();
  } catch (const CheckpointError& e) {
    VerifyReport report;
    report.ok = false;
    report.problems.push_back(e.what());
    return report;
  }
}

namespace {
void print_root_attributes(const CheckpointReader& reader, std::ostream& out, const AttributeFormatter& show_attr) {
  static const char* const kShown[] = {"format", "format_version", "step", "tokens_seen", "world_size",
                                       "dp", "tp", "tokenizer_hash", "config_toml", "checksum_algorithm",
                                       "checksum_chunk_elems", kTensorManifestAttr, kAttributeChecksumsAttr};
  for (const auto& name : reader.attr_names()) {
    if (std::find(std::begin(kShown), std::end(kShown), name) != std::end(kShown)) continue;
    if (auto s = reader.attr_string(name); s && show_attr) {
      if (const std::string shown = show_attr(name, *s); !shown.empty()) {
        out << shown;
        continue;
      }
    }
    out << "  " << name << ": ";
    if (auto s = reader.attr_string(name)) out << *s;
    else if (auto i = reader.attr_int(name)) out << *i;
    else if (auto d = reader.attr_double(name)) out << *d;
    else out << "(unprintable)";
    out << "\n";
  }
}
}  // namespace

bool inspect(const fs::path& file, std::ostream& out, bool verify_checksums, const AttributeFormatter& show_attr) {
  std::optional<CheckpointReader> reader;
  try {
    reader.emplace(file);
  } catch (const CheckpointError& e) {
    out << "DAMAGED: " << e.what() << "\n";
    return false;
  }
  const Metadata m = reader->metadata();
  out << "checkpoint " << file.string() << "\n"
      << "  format: " << kFormatName << " version " << reader->format_version() << "\n"
      << "  step: " << m.step << "\n"
      << "  tokens_seen: " << m.tokens_seen << "\n"
      << "  written by layout: world_size " << m.layout.world_size << ", dp " << m.layout.dp << ", tp "
      << m.layout.tp << "\n"
      << "  tokenizer_hash: " << m.tokenizer_hash << "\n"
      << "  root attributes: "
      << (reader->attributes_verified() ? "every one matches its checksum"
                                        : "not covered by checksums (format version 1)")
      << "\n";
  print_root_attributes(*reader, out, show_attr);

  VerifyReport report;
  if (verify_checksums) report = reader->verify_all();
  int64_t total_bytes = 0;
  out << "tensors (" << reader->tensors().size() << "):\n";
  for (const TensorInfo& t : reader->tensors()) {
    const int64_t bytes = shape_numel(t.shape) * static_cast<int64_t>(dtype_size(t.dtype));
    total_bytes += bytes;
    std::string status = t.has_checksum ? (verify_checksums ? "ok" : "not verified") : "NO CHECKSUM";
    for (const auto& problem : report.problems) {
      if (problem.find("dataset " + t.path + ":") != std::string::npos) status = "DAMAGED";
    }
    out << "  " << t.path << "  " << dtype_name(t.dtype) << " " << shape_string(t.shape) << "  checksum "
        << status << "\n";
  }
  out << "total tensor bytes: " << total_bytes << "\n";
  out << "config_toml:\n" << m.config_toml << (m.config_toml.empty() || m.config_toml.back() == '\n' ? "" : "\n");
  if (!verify_checksums) return true;
  out << (report.ok ? "verify: OK" : "verify: DAMAGED") << " (" << report.chunks << " chunks)\n";
  for (const auto& problem : report.problems) out << "  " << problem << "\n";
  return report.ok;
}

LatestGood find_latest_good(const fs::path& dir, MPI_Comm comm, GoodCheckpoints* good) {
  const detail::CommInfo info = detail::comm_info(comm);
  LatestGood result;
  // Rank 0 lists, so every rank walks the same candidates even on a lagging shared file system.
  std::string listing;
  if (info.rank == 0) {
    for (const auto& partial : list_partial_checkpoints(dir)) {
      result.warnings.push_back("ignoring half-written checkpoint " + partial.string());
    }
    for (const auto& entry : list_checkpoints(dir)) listing += entry.path.string() + "\n";
  }
  detail::broadcast(info, listing, 0);
  for (size_t begin = 0, end; (end = listing.find('\n', begin)) != std::string::npos; begin = end + 1) {
    const fs::path candidate = listing.substr(begin, end - begin);
    const VerifyReport report = verify(candidate, comm);
    if (report.ok) {
      result.path = candidate;
      result.step = step_of_checkpoint_name(candidate.filename().string()).value_or(0);
      break;
    }
    std::string warning = "skipping damaged checkpoint " + candidate.string();
    for (const auto& problem : report.problems) warning += "\n  " + problem;
    result.warnings.push_back(warning);
    result.damaged.push_back(candidate);
  }
  if (good != nullptr && result.path) {
    good->mark(*result.path);
    if (info.rank == 0) {
      for (const auto& file : result.damaged) {
        try {
          result.set_aside.push_back(set_aside_damaged(file));
          result.warnings.push_back("set aside damaged checkpoint " + file.string() + " as " +
                                    result.set_aside.back().string());
        } catch (const CheckpointError& e) {
          result.warnings.push_back(e.what());
        }
      }
      if (auto w = repoint_latest(dir, *good); !w.empty()) result.warnings.push_back(w);
    }
    detail::barrier(info);
  }
  return result;
}

std::optional<std::string> find_tensor_mismatch(const CheckpointReader& reader,
                                                std::span<const ExpectedTensor> expected) {
  const std::string file = "checkpoint " + reader.path().string();
  for (const ExpectedTensor& want : expected) {
    if (!reader.has(want.path)) {
      return file + " does not match this run's model: tensor " + want.path + " " + shape_string(want.shape) +
             " is missing (different model config?)";
    }
    const TensorInfo& have = reader.info(want.path);
    if (have.shape != want.shape) {
      return file + " does not match this run's model: tensor " + want.path + " has shape " +
             shape_string(have.shape) + " in the checkpoint, the run expects " + shape_string(want.shape) +
             " (different model config?)";
    }
    if (have.dtype != want.dtype) {
      return file + ": tensor " + want.path + " is " + dtype_name(have.dtype) + ", the run expects " +
             dtype_name(want.dtype);
    }
  }
  return std::nullopt;
}

void require_tensors(const CheckpointReader& reader, std::span<const ExpectedTensor> expected) {
  if (auto mismatch = find_tensor_mismatch(reader, expected)) throw MismatchError(*mismatch);
}

void require_attr_equals(const CheckpointReader& reader, const std::string& name,
                         const std::string& expected) {
  const auto have = reader.attr_string(name);
  if (!have) {
    throw MismatchError("checkpoint " + reader.path().string() + " has no attribute '" + name + "'");
  }
  if (*have != expected) {
    throw MismatchError("checkpoint " + reader.path().string() + " was written with " + name + " '" + *have +
                        "', this run has '" + expected + "'");
  }
}

}  // namespace brt::checkpoint
