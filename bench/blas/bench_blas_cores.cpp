// `bench_blas_cores [--threads N]`: sgemm GFLOP/s of the models' product forms under every
// OpenBLAS core this CPU runs, each measured in a child process with OPENBLAS_CORETYPE set (the
// variable is read once, when OpenBLAS loads), interleaved round by round so a busy machine
// slows every core alike, and printed as ratios to OpenBLAS's own choice on this CPU
// (docs/reliability.md "Which BLAS core" cites it). A child is this program with --child.
#include <cblas.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

struct Shape {
  const char* what;
  int m, n, k;
};
const Shape kShapes[] = {{"x·Wᵀ 512x512x512", 512, 512, 512},
                         {"x·W1ᵀ 1024x2048x512", 1024, 2048, 512},
                         {"LM head 256x32128x512", 256, 32128, 512},
                         {"attention tile 128x256x64", 128, 256, 64}};

// Best GFLOP/s of 3 x·Wᵀ products of each shape, one line "core g1 g2 ...".
int child() {
  std::string line = openblas_get_corename();
  for (const Shape& s : kShapes) {
    std::vector<float> a(size_t(s.m) * s.k, 0.5f), b(size_t(s.n) * s.k, 0.25f), c(size_t(s.m) * s.n);
    double best = 1e30;
    for (int r = 0; r < 4; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.m, s.n, s.k, 1.0f, a.data(), s.k, b.data(), s.k, 0.0f,
                  c.data(), s.n);
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) best = std::min(best, t);
    }
    line += " " + std::to_string(2.0 * s.m * s.n * s.k / best / 1e9);
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

std::vector<double> measure(const char* self, const std::string& core, std::string* name) {
  int fd[2];
  if (pipe(fd) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    if (core.empty()) unsetenv("OPENBLAS_CORETYPE");
    else setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
    execl(self, self, "--child", (char*)nullptr);
    _exit(127);
  }
  close(fd[1]);
  char buf[512] = {};
  const ssize_t got = read(fd[0], buf, sizeof buf - 1);
  close(fd[0]);
  waitpid(pid, nullptr, 0);
  if (got <= 0) return {};
  char* save = nullptr;
  *name = strtok_r(buf, " \n", &save);
  std::vector<double> rates;
  while (char* tok = strtok_r(nullptr, " \n", &save)) rates.push_back(std::atof(tok));
  return rates;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--child") == 0) return child();
  if (argc > 2 && std::strcmp(argv[1], "--threads") == 0) setenv("OMP_NUM_THREADS", argv[2], 1);
  std::vector<std::string> cores = {""};  // "": OpenBLAS's own detection
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) cores.push_back("SkylakeX");
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) cores.push_back("Haswell");
  if (__builtin_cpu_supports("avx")) cores.push_back("Sandybridge");
  cores.push_back("Prescott");
  std::map<std::string, std::vector<double>> best;
  std::map<std::string, std::string> names;
  for (int round = 0; round < 3; ++round)
    for (const auto& core : cores) {
      std::string name;
      const std::vector<double> r = measure(argv[0], core, &name);
      if (r.size() != std::size(kShapes)) continue;
      names[core] = name;
      auto& b = best[core];
      b.resize(r.size(), 0.0);
      for (size_t i = 0; i < r.size(); ++i) b[i] = std::max(b[i], r[i]);
    }
  const char* threads = std::getenv("OMP_NUM_THREADS");
  std::printf("bench_blas_cores: sgemm x·Wᵀ GFLOP/s (best of 3 rounds), %s thread(s); ratio to OpenBLAS's own choice (%s)\n",
              threads ? threads : "default", names[""].c_str());
  std::printf("%-24s", "core");
  for (const Shape& s : kShapes) std::printf(" | %26s", s.what);
  std::printf("\n");
  for (const auto& core : cores) {
    if (!best.count(core)) continue;
    std::printf("%-24s", core.empty() ? ("(own) " + names[core]).c_str() : core.c_str());
    for (size_t i = 0; i < best[core].size(); ++i)
      std::printf(" | %10.1f GF/s  x%5.2f", best[core][i], best[core][i] / best[""][i]);
    std::printf("\n");
  }
  return 0;
}
