// Shared helpers for the checkpoint tests: scratch directories, deterministic tensor contents,
// an independent (naive, whole-tensor) checksum reference, and raw-file damage tools.
#pragma once

#include <hdf5.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace brt::checkpoint::testing {

namespace fs = std::filesystem;

// A fresh directory under /tmp, removed with its contents on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    char pattern[] = "/tmp/brt-ckpt-test-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    if (made == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  explicit ScratchDir(fs::path existing) : path_(std::move(existing)) {}
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Deterministic, varied values (both signs, many exponents, exactly representable).
inline uint64_t mix_for_test(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
inline float test_value_f32(uint64_t seed, int64_t flat_index) {
  const uint64_t h = mix_for_test(seed * 1000003ULL + static_cast<uint64_t>(flat_index));
  return static_cast<float>(static_cast<int64_t>(h % 2000001) - 1000000) * 0.0009765625f;
}
inline std::vector<float> test_tensor_f32(uint64_t seed, int64_t numel) {
  std::vector<float> v(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) v[i] = test_value_f32(seed, i);
  return v;
}

// Cuts a slice out of a whole row-major tensor (reference for slice reads/writes).
template <typename T>
std::vector<T> cut(const std::vector<T>& whole, const Shape& shape, const Slice& slice) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(slice.numel()));
  const size_t rank = shape.size();
  std::vector<int64_t> idx(rank, 0);
  for (int64_t n = 0; n < slice.numel(); ++n) {
    int64_t flat = 0;
    for (size_t d = 0; d < rank; ++d) flat = flat * shape[d] + slice.start[d] + idx[d];
    out.push_back(whole[flat]);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < slice.count[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// The documented checksum (docs/checkpoint-format.md §4), written out naively: one loop over
// the whole tensor, no slicing, no chunk grid.
template <typename T>
uint64_t naive_checksum(const std::vector<T>& whole) {
  uint64_t sum = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    uint64_t bits = 0;
    std::memcpy(&bits, &whole[i], sizeof(T));
    uint64_t x = bits + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ULL;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    sum += x;
  }
  return sum;
}

template <typename T>
bool bit_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Byte offset of a contiguous dataset's data in the file (H5Dget_offset).
inline int64_t dataset_data_offset(const fs::path& file, const std::string& dataset) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  return offset == HADDR_UNDEF ? -1 : static_cast<int64_t>(offset);
}

// The whole-tensor checksum stored in `dataset`'s "checksum" attribute.
inline uint64_t stored_checksum(const fs::path& file, const std::string& dataset) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  hid_t a = H5Aopen(d, "checksum", H5P_DEFAULT);
  uint64_t stored = 0;
  H5Aread(a, H5T_NATIVE_UINT64, &stored);
  H5Aclose(a);
  H5Dclose(d);
  H5Fclose(f);
  return stored;
}

inline void flip_byte(const fs::path& file, int64_t offset, unsigned char mask = 0x5A) {
  std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
  io.seekg(offset);
  char byte = 0;
  io.read(&byte, 1);
  byte = static_cast<char>(byte ^ mask);
  io.seekp(offset);
  io.write(&byte, 1);
}

inline std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A small checkpoint: /model/big [1100, 1000] (two checksum chunks: rows 0..1047, 1048..1099),
// /model/small [8], /data/cursor [2]. Returns the big tensor's values.
inline std::vector<float> write_simple(const fs::path& dir, int64_t step, WriterOptions options = {}) {
  CheckpointWriter writer(dir, step, MPI_COMM_SELF, options);
  Metadata meta;
  meta.step = step;
  meta.tokens_seen = step * 10;
  meta.config_toml = "[model]\nd_model = 1000\n";
  meta.tokenizer_hash = "tok-A";
  writer.set_metadata(meta);
  auto big = test_tensor_f32(static_cast<uint64_t>(step), 1100 * 1000);
  writer.write_whole<float>("/model/big", {1100, 1000}, big);
  writer.write_whole<float>("/model/small", {8}, test_tensor_f32(7, 8));
  const std::vector<int64_t> cursor = {step, -step};
  writer.write_whole<int64_t>("/data/cursor", {2}, cursor);
  writer.commit();
  return big;
}

}  // namespace brt::checkpoint::testing
