// Checkpoint throughput benchmark: saves and loads a checkpoint with the tensor sizes
// of the 150m config (model.md §12: D 1024, H 8, dh 128, F 4096, V 32128, S 512, 12 layers, layer 9
// recurrent `rec:fixed:skip`; 193.36M parameters, model.md §9 names) plus AdamW's two moment
// tensors per parameter (3 x 773 MB = 2.32 GB), on one process, and compares with writing /
// reading the same bytes with plain fwrite+fsync / fread on the same disk in the same run.
//
//   bench_checkpoint [--dir DIR] [--params-only] [--repeat N]
//
// DIR (default ./ckpt-bench-tmp) decides the disk. Loads are cold: the file's pages are dropped
// from the page cache (posix_fadvise DONTNEED after fsync) before reading. To bound memory the
// optimizer-state tensors are written from the same buffer as the parameters (the I/O is what is
// measured; contents do not matter). The checkpoint path includes checksums and verification.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace ck = brt::checkpoint;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Tensor {
  std::string name;
  ck::Shape shape;
  int64_t offset = 0;  // into the arena
};

// model.md §9 names and shapes for the 150m config.
std::vector<Tensor> model_150m() {
  const int64_t D = 1024, H = 8, A = H * 128, F = 4096, V = 32128, S = 512, L = 12, kRecurrent = 9;
  std::vector<Tensor> t;
  t.push_back({"embed", {V, D}});
  t.push_back({"final_norm.scale", {D}});
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "layers." + std::to_string(i) + ".";
    const bool rec = i == kRecurrent;
    t.push_back({p + "attn_norm.scale", {D}});
    for (const char* w : {"wq", "wk", "wv"}) t.push_back({p + "attn." + w, {D, A}});
    if (rec) t.push_back({p + "attn.wq2", {D, A}});
    t.push_back({p + "attn.wo", {rec ? 2 * A : A, D}});
    t.push_back({p + "attn.scale", {H}});
    if (rec) t.push_back({p + "attn.scale2", {H}});
    t.push_back({p + "attn.rel_bias", {H, 32}});
    t.push_back({p + "mlp_norm.scale", {D}});
    t.push_back({p + "mlp.w1", {D, F}});
    t.push_back({p + "mlp.w2", {F, D}});
    if (rec) {
      t.push_back({p + "state.norm.scale", {D}});
      t.push_back({p + "state.ids", {S, D}});
      t.push_back({p + "state.init", {S, D}});
      for (const char* w : {"wq", "wk", "wv", "wq2"}) t.push_back({p + "state." + w, {D, A}});
      t.push_back({p + "state.scale", {H}});
      t.push_back({p + "state.scale2", {H}});
      t.push_back({p + "state.wo", {2 * A, D}});
      t.push_back({p + "state.gate.bias", {D}});
    }
  }
  int64_t offset = 0;
  for (auto& x : t) {
    x.offset = offset;
    offset += ck::shape_numel(x.shape);
  }
  return t;
}

void drop_from_page_cache(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

struct Groups {
  std::vector<std::string> names;
};

double raw_write(const fs::path& file, const std::vector<Tensor>& tensors, const float* arena,
                 const Groups& groups) {
  const auto start = Clock::now();
  std::FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot create " + file.string());
  for (size_t g = 0; g < groups.names.size(); ++g) {
    for (const Tensor& t : tensors) {
      const size_t n = static_cast<size_t>(ck::shape_numel(t.shape));
      if (std::fwrite(arena + t.offset, 4, n, f) != n) throw std::runtime_error("fwrite failed");
    }
  }
  std::fflush(f);
  ::fsync(::fileno(f));
  std::fclose(f);
  return since(start);
}

double raw_read(const fs::path& file, const std::vector<Tensor>& tensors, float* arena, const Groups& groups) {
  drop_from_page_cache(file);
  const auto start = Clock::now();
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + file.string());
  for (size_t g = 0; g < groups.names.size(); ++g) {
    for (const Tensor& t : tensors) {
      const size_t n = static_cast<size_t>(ck::shape_numel(t.shape));
      if (std::fread(arena + t.offset, 4, n, f) != n) throw std::runtime_error("fread failed");
    }
  }
  std::fclose(f);
  return since(start);
}

}  // namespace

int main(int argc, char** argv) {
  fs::path dir = "ckpt-bench-tmp";
  bool params_only = false;
  int repeat = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (arg == "--params-only") params_only = true;
    else if (arg == "--repeat" && i + 1 < argc) repeat = std::stoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: bench_checkpoint [--dir DIR] [--params-only] [--repeat N]\n");
      return 64;
    }
  }
  const std::vector<Tensor> tensors = model_150m();
  const int64_t numel = tensors.back().offset + ck::shape_numel(tensors.back().shape);
  Groups groups;
  groups.names = {"/model"};
  if (!params_only) groups.names.insert(groups.names.end(), {"/optim/adamw.m", "/optim/adamw.v"});
  const int64_t bytes = numel * 4 * static_cast<int64_t>(groups.names.size());
  {
    // The verified load is CPU-bound when other work shares the cores; say how busy they are.
    std::FILE* f = std::fopen("/proc/loadavg", "r");
    char line[128] = {0};
    if (f && std::fgets(line, sizeof line, f)) std::printf("load average: %s", line);
    if (f) std::fclose(f);
  }
  std::printf("150m config: %zu tensors, %.2fM parameters; checkpoint holds %zu group(s), %.3f GB\n",
              tensors.size(), numel / 1e6, groups.names.size(), bytes / 1e9);

  std::vector<float> arena(static_cast<size_t>(numel)), back(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) arena[i] = static_cast<float>((i * 2654435761u) % 100003) * 1e-5f - 0.5f;

  // In-memory checksum speed, for context.
  {
    const auto start = Clock::now();
    std::vector<uint64_t> sums(1, 0);
    const ck::Shape flat = {numel};
    const ck::ChunkGrid one = ck::chunk_grid_with(flat, numel);
    ck::accumulate_checksums(flat, one, ck::Slice::whole(flat), arena.data(), 4, sums);
    const double s = since(start);
    std::printf("checksum (in memory): %.2f GB/s  [%016llx]\n", numel * 4 / s / 1e9,
                static_cast<unsigned long long>(sums[0]));
  }

  fs::create_directories(dir);
  const fs::path raw_file = dir / "raw.bin";
  int failures = 0;
  for (int r = 0; r < repeat; ++r) {
    const double t_raw_write = raw_write(raw_file, tensors, arena.data(), groups);
    const double t_raw_read = raw_read(raw_file, tensors, back.data(), groups);
    fs::remove(raw_file);

    ck::WriterOptions options;
    options.keep_last = 1;
    ck::CheckpointWriter writer(dir, 1000 + r, MPI_COMM_SELF, options);
    ck::Metadata meta;
    meta.step = 1000 + r;
    meta.config_toml = "# bench_checkpoint: 150m\n";
    writer.set_metadata(meta);
    for (const std::string& group : groups.names) {
      for (const Tensor& t : tensors) {
        const std::span<const float> data(arena.data() + t.offset, static_cast<size_t>(ck::shape_numel(t.shape)));
        writer.write_whole<float>(ck::join_path(group, t.name), t.shape, data);
      }
    }
    const ck::SaveResult saved = writer.commit();

    // Cold load with full checksum verification (what resume does), then without (Verify::kNone)
    // to show what the hashing costs on this machine.
    double t_load[2] = {0, 0};
    for (int pass = 0; pass < 2; ++pass) {
      std::fill(back.begin(), back.end(), 0.0f);
      drop_from_page_cache(saved.path);
      const auto load_start = Clock::now();
      {
        ck::CheckpointReader reader(saved.path);
        for (const std::string& group : groups.names) {
          for (const Tensor& t : tensors) {
            std::span<float> out(back.data() + t.offset, static_cast<size_t>(ck::shape_numel(t.shape)));
            reader.read<float>(ck::join_path(group, t.name), ck::Slice::whole(t.shape), out,
                               pass == 0 ? ck::Verify::kTouchedChunks : ck::Verify::kNone);
          }
        }
      }
      t_load[pass] = since(load_start);
      if (std::memcmp(back.data(), arena.data(), arena.size() * 4) != 0) {
        std::printf("ERROR: loaded tensors differ\n");
        ++failures;
      }
    }

    const double raw_w = bytes / t_raw_write / 1e9, raw_r = bytes / t_raw_read / 1e9;
    const double save = saved.stats.gb_per_s(), load = bytes / t_load[0] / 1e9;
    const double load_unverified = bytes / t_load[1] / 1e9;
    std::printf("run %d: raw fwrite+fsync %.3f GB/s (%.2f s), raw fread (cold) %.3f GB/s (%.2f s)\n", r, raw_w,
                t_raw_write, raw_r, t_raw_read);
    std::printf("run %d: save %.3f GB/s (%.2f s)  ratio save/raw_write = %.2f\n", r, save, saved.stats.seconds,
                save / raw_w);
    std::printf("run %d: load (verified) %.3f GB/s (%.2f s)  ratio load/raw_read = %.2f, load/raw_write = %.2f\n",
                r, load, t_load[0], load / raw_r, load / raw_w);
    std::printf("run %d: load (unverified) %.3f GB/s (%.2f s)  ratio load/raw_read = %.2f\n", r, load_unverified,
                t_load[1], load_unverified / raw_r);
    std::printf("run %d: file %s, %.3f GB on disk\n", r, saved.path.c_str(), fs::file_size(saved.path) / 1e9);
  }
  fs::remove_all(dir);
  return failures ? 1 : 0;
}
