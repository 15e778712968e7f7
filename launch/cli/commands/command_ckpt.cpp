// `brt-dist ckpt inspect|verify|diff`.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "launch/cli/cli.h"
#include "launch/cli/commands/commands.h"
#include "runtime/numerics.h"

namespace brt::launch {

namespace {

// ||x - y|| / ||y|| over two float tensors' bytes (||x - y|| when y is zero), in double.
template <typename F>
double relative_difference(const std::vector<uint8_t>& x, const std::vector<uint8_t>& y) {
  const size_t n = x.size() / sizeof(F);
  double diff = 0, ref = 0;
  for (size_t i = 0; i < n; ++i) {
    F a, b;
    std::memcpy(&a, x.data() + i * sizeof(F), sizeof(F));
    std::memcpy(&b, y.data() + i * sizeof(F), sizeof(F));
    diff += (double(a) - double(b)) * (double(a) - double(b));
    ref += double(b) * double(b);
  }
  return ref == 0 ? std::sqrt(diff) : std::sqrt(diff / ref);
}

// Compares every tensor of two checkpoints bit for bit; prints each difference. With rtol >= 0
// (a checkpoint re-saved under another parallel layout, whose fp32 sums ran in another order),
// float tensors within relative difference rtol count as equal and every tensor's status is
// printed: "identical", "close (rel ...)" or "differs (rel ...)"; integer tensors stay exact.
int diff_checkpoints(const std::string& a_path, const std::string& b_path, double rtol) {
  checkpoint::CheckpointReader a(a_path), b(b_path);
  // Checkpoints trained on other numerics differ in the last bits for that reason alone.
  if (const std::string change = runtime::numerics_record_change(a.metadata().numerics, b.metadata().numerics,
                                                                 a_path, "in " + b_path);
      !change.empty())
    std::printf("numerics differ: %s (the runs' results differ in the last bits for this reason alone)\n",
                change.c_str());
  int differences = 0, identical = 0, close = 0;
  for (const auto& info : a.tensors()) {
    if (!b.has(info.path)) {
      std::printf("only in %s: %s\n", a_path.c_str(), info.path.c_str());
      ++differences;
      continue;
    }
    const auto& other = b.info(info.path);
    if (other.shape != info.shape || other.dtype != info.dtype) {
      std::printf("%s: shape/type %s vs %s\n", info.path.c_str(),
                  checkpoint::shape_string(info.shape).c_str(),
                  checkpoint::shape_string(other.shape).c_str());
      ++differences;
      continue;
    }
    const size_t bytes = size_t(checkpoint::shape_numel(info.shape)) * checkpoint::dtype_size(info.dtype);
    std::vector<uint8_t> x(bytes), y(bytes);
    auto read = [&](checkpoint::CheckpointReader& r, std::vector<uint8_t>& buf) {
      const auto slice = checkpoint::Slice::whole(info.shape);
      switch (info.dtype) {
        case checkpoint::DType::kF32: r.read<float>(info.path, slice, {reinterpret_cast<float*>(buf.data()), buf.size() / 4}); break;
        case checkpoint::DType::kF64: r.read<double>(info.path, slice, {reinterpret_cast<double*>(buf.data()), buf.size() / 8}); break;
        case checkpoint::DType::kI64: r.read<int64_t>(info.path, slice, {reinterpret_cast<int64_t*>(buf.data()), buf.size() / 8}); break;
        case checkpoint::DType::kU64: r.read<uint64_t>(info.path, slice, {reinterpret_cast<uint64_t*>(buf.data()), buf.size() / 8}); break;
      }
    };
    read(a, x);
    read(b, y);
    if (x == y) {
      ++identical;
      if (rtol >= 0) std::printf("identical: %s\n", info.path.c_str());
      continue;
    }
    const bool is_float = info.dtype == checkpoint::DType::kF32 || info.dtype == checkpoint::DType::kF64;
    if (rtol < 0 || !is_float) {
      std::printf("differs: %s\n", info.path.c_str());
      ++differences;
      continue;
    }
    // The S4D carry's float32 elements hold float64 bytes: compared as the doubles they are.
    const bool as_float = info.dtype == checkpoint::DType::kF32 && !checkpoint::holds_float64_bytes(info.path);
    const double rel = as_float ? relative_difference<float>(x, y) : relative_difference<double>(x, y);
    std::printf("%s: %s (rel %.3g)\n", rel <= rtol ? "close" : "differs", info.path.c_str(), rel);
    ++(rel <= rtol ? close : differences);
  }
  for (const auto& info : b.tensors())
    if (!a.has(info.path)) {
      std::printf("only in %s: %s\n", b_path.c_str(), info.path.c_str());
      ++differences;
    }
  if (rtol >= 0)
    std::printf("%d identical, %d within rtol %g, ", identical, close, rtol);
  std::printf("%d of %zu tensors differ\n", differences, a.tensors().size());
  return differences == 0 ? 0 : 1;
}

// One file's verification: its problems and one summary line; true when it is intact.
bool verify_file(const std::filesystem::path& file) {
  const checkpoint::VerifyReport r = checkpoint::verify(file);
  for (const auto& p : r.problems) std::printf("DAMAGED: %s\n", p.c_str());
  std::printf("%s: %s (%lld datasets, %lld chunks, %lld bytes checked)\n", file.c_str(), r.ok ? "OK" : "DAMAGED",
              (long long)r.datasets, (long long)r.chunks, (long long)r.bytes);
  return r.ok;
}

// `ckpt verify DIR`: every committed checkpoint of a checkpoint.dir, newest first (a half-written
// ckpt-*.h5.tmp is named, not verified: it is no checkpoint). Exit 1 if any is damaged or there is
// none to verify.
int verify_directory(const std::filesystem::path& dir) {
  const std::vector<checkpoint::CheckpointEntry> entries = checkpoint::list_checkpoints(dir);
  for (const auto& partial : checkpoint::list_partial_checkpoints(dir))
    std::printf("not a checkpoint (a save that never finished): %s\n", partial.c_str());
  if (entries.empty()) {
    std::printf("%s: no checkpoint (ckpt-NNNNNNNN.h5) to verify\n", dir.c_str());
    return 1;
  }
  int damaged = 0;
  for (const auto& e : entries) damaged += verify_file(e.path) ? 0 : 1;
  std::printf("%s: %zu checkpoint(s), %s\n", dir.c_str(), entries.size(),
              damaged == 0 ? "all OK" : (std::to_string(damaged) + " DAMAGED").c_str());
  return damaged == 0 ? 0 : 1;
}

}  // namespace

int command_ckpt(int argc, char** argv) {
  const std::string usage = "usage: brt-dist ckpt inspect FILE | verify FILE|DIR | diff FILE_A FILE_B [--rtol R]";
  if (argc < 4) throw UsageError(usage);
  const std::string verb = argv[2], file = argv[3];
  if ((verb == "inspect" || verb == "verify") && argc != 4)
    throw UsageError("command line: unexpected argument '" + std::string(argv[4]) + "' (" + usage + ")");
  if (verb == "inspect") {
    // The numerics record as one line per group of ranks (runtime/numerics.h), not raw JSON.
    const auto show = [](const std::string& name, const std::string& value) -> std::string {
      if (name != "numerics") return "";
      const std::string lines = runtime::numerics_record_lines(value, "    ");
      return lines.empty() ? "" : "  numerics (the ranks that trained it):\n" + lines;
    };
    return checkpoint::inspect(file, std::cout, true, show) ? 0 : 1;
  }
  if (verb == "verify") {
    std::error_code ec;
    if (std::filesystem::is_directory(file, ec)) return verify_directory(file);
    return verify_file(file) ? 0 : 1;
  }
  if (verb == "diff" && argc == 5) return diff_checkpoints(file, argv[4], -1.0);
  if (verb == "diff" && argc == 7 && std::string(argv[5]) == "--rtol")
    return diff_checkpoints(file, argv[4], parse_double_flag("rtol", argv[6], Range::at_least(0)));
  if (verb == "diff") throw UsageError(usage);
  throw UsageError("unknown verb '" + verb + "' (inspect, verify, diff; " + usage + ")");
}

}  // namespace brt::launch
