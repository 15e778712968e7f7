// Helper process for the checkpoint tests (never linked into brt-dist):
//   ckpt_test_writer slow DIR STEP       writes 40 x 1 MiB tensors with pauses, printing
//                                        "started" after the first, so a test can SIGKILL it
//                                        mid-save
//   ckpt_test_writer big DIR STEP NUMEL  writes one NUMEL-element tensor; on SaveError prints the
//                                        message to stderr and exits 3 (disk-full test)
//   ckpt_test_writer fixture DIR         the checkpoint h5py_check.py reads (values documented
//                                        there)
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace ck = brt::checkpoint;

namespace {

int write_slow(const std::string& dir, int64_t step) {
  ck::CheckpointWriter writer(dir, step);
  const std::vector<float> values(1 << 18, 1.25f);
  for (int k = 0; k < 40; ++k) {
    writer.write_whole<float>("/model/block." + std::to_string(k), {512, 512}, values);
    if (k == 0) {
      std::printf("started\n");
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
  }
  writer.commit();
  std::printf("committed\n");
  return 0;
}

int write_big(const std::string& dir, int64_t step, int64_t numel) {
  try {
    ck::CheckpointWriter writer(dir, step);
    const std::vector<float> values(static_cast<size_t>(numel), 0.5f);
    writer.write_whole<float>("/model/big", {numel}, values);
    writer.commit();
  } catch (const ck::SaveError& e) {
    std::cerr << e.what() << "\n";
    return 3;
  }
  return 0;
}

// Values are simple functions of the flat index i so the Python side can recompute them:
//   /model/embed            [64, 16]    float32  i * 0.25 - 100
//   /model/layers.0.attn.wq [16, 32]    float32  (i % 7) - 3
//   /model/big              [1100, 1000] float32 (i % 1000) * 0.5   (2 checksum chunks)
//   /optim/adamw.m/embed    [64, 16]    float32  -i
//   /state/stream0.kv       [2, 3, 4]   float32  i + 0.5
//   /data/cursor            [3, 2]      int64    i * 1000
int write_fixture(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  auto fill = [](int64_t n, auto f) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = f(i);
    return v;
  };
  ck::CheckpointWriter writer(dir, 42);
  ck::Metadata meta;
  meta.step = 42;
  meta.tokens_seen = 42 * 512;
  meta.config_toml = "[model]\nd_model = 16\n";
  meta.tokenizer_hash = "fixture-tokenizer";
  meta.layout = ck::Layout{1, 1, 1};
  writer.set_metadata(meta);
  writer.write_whole<float>("/model/embed", {64, 16}, fill(64 * 16, [](int64_t i) { return i * 0.25f - 100.0f; }));
  writer.write_whole<float>("/model/layers.0.attn.wq", {16, 32},
                            fill(16 * 32, [](int64_t i) { return float(i % 7) - 3.0f; }));
  writer.write_whole<float>("/model/big", {1100, 1000}, fill(1100 * 1000, [](int64_t i) { return (i % 1000) * 0.5f; }));
  writer.write_whole<float>("/optim/adamw.m/embed", {64, 16}, fill(64 * 16, [](int64_t i) { return -float(i); }));
  writer.write_whole<float>("/state/stream0.kv", {2, 3, 4}, fill(24, [](int64_t i) { return i + 0.5f; }));
  const std::vector<int64_t> cursor = {0, 1000, 2000, 3000, 4000, 5000};
  writer.write_whole<int64_t>("/data/cursor", {3, 2}, cursor);
  const ck::SaveResult result = writer.commit();
  std::printf("wrote %s\n", result.path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ck::silence_hdf5_diagnostics();
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    if (mode == "slow" && argc == 4) return write_slow(argv[2], std::stoll(argv[3]));
    if (mode == "big" && argc == 5) return write_big(argv[2], std::stoll(argv[3]), std::stoll(argv[4]));
    if (mode == "fixture" && argc == 3) return write_fixture(argv[2]);
  } catch (const std::exception& e) {
    std::cerr << "ckpt_test_writer: " << e.what() << "\n";
    return 2;
  }
  std::cerr << "usage: ckpt_test_writer slow DIR STEP | big DIR STEP NUMEL | fixture DIR\n";
  return 64;
}
