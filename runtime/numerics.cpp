#include "runtime/numerics.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runtime/blas_env.h"
#include "runtime/gemm_probe.h"

#ifndef BRT_BUILD_TYPE
#define BRT_BUILD_TYPE "unknown"
#endif

namespace brt::runtime {

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    std::string name = line.substr(colon + 1);
    name.erase(0, name.find_first_not_of(" \t"));
    return name;
  }
  return "unknown CPU";
}

std::string cpu_isa() {
  std::string out;
  auto add = [&out](bool has, const char* name) {
    if (has) out += (out.empty() ? "" : " ") + std::string(name);
  };
  __builtin_cpu_init();
  add(__builtin_cpu_supports("avx512f"), "avx512f");
  add(__builtin_cpu_supports("avx512bw"), "avx512bw");
  add(__builtin_cpu_supports("avx2"), "avx2");
  add(__builtin_cpu_supports("fma"), "fma");
  add(__builtin_cpu_supports("avx"), "avx");
  return out.empty() ? "sse2" : out;
}

// The instruction set our own kernels were compiled for (-march=native builds differ by host).
std::string compiled_isa() {
  std::string out = "x86-64";
#ifdef __AVX__
  out += " avx";
#endif
#ifdef __AVX2__
  out += " avx2";
#endif
#ifdef __FMA__
  out += " fma";
#endif
#ifdef __AVX512F__
  out += " avx512f";
#endif
  return out;
}

std::string compiler() {
#if defined(__clang__)
  return std::string("Clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("GCC ") + __VERSION__;
#else
  return "unknown compiler";
#endif
}

// OPENBLAS_* variables that change kernels or blocking (the core is in blas_core_choice).
std::string blas_environment() {
  std::string out;
  for (const char* name : {"OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OPENBLAS_VERBOSE"})
    if (const char* v = std::getenv(name)) out += (out.empty() ? "" : " ") + std::string(name) + "=" + v;
  return out.empty() ? "(none set)" : out;
}

std::string openblas_version() {
  std::istringstream config(openblas_get_config());
  std::string name, version;
  config >> name >> version;
  return name + " " + version;
}

}  // namespace

void Numerics::add(std::string key, std::string label, std::string value, bool decisive) {
  fields.push_back({std::move(key), std::move(label), std::move(value), decisive});
}

std::string Numerics::value(const std::string& key) const {
  for (const auto& f : fields)
    if (f.key == key) return f.value;
  return "";
}

std::string Numerics::to_text() const {
  std::string out;
  for (const auto& f : fields) out += f.key + "\t" + f.label + "\t" + (f.decisive ? "1" : "0") + "\t" + f.value + "\n";
  return out;
}

Numerics Numerics::from_text(const std::string& text) {
  Numerics n;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find('\t'), b = line.find('\t', a + 1), c = line.find('\t', b + 1);
    if (c == std::string::npos) continue;
    n.add(line.substr(0, a), line.substr(a + 1, b - a - 1), line.substr(c + 1), line.substr(b + 1, c - b - 1) == "1");
  }
  return n;
}

std::string Numerics::decisive_text() const {
  std::string out;
  for (const auto& f : fields)
    if (f.decisive) out += f.key + "=" + f.value + "\n";
  return out;
}

std::string Numerics::summary() const {
  std::string out = value("blas") + " core " + value("blas_core") + " (" + value("blas_core_choice") + "), gemm probe " +
                    value("gemm_probe") + "; " + value("cpu") + " (" + value("cpu_isa") + "); " + value("compiler") +
                    " " + value("build") + " for " + value("compiled_for");
  const std::string threads = value("threads");
  out += "; " + threads + (threads == "1" ? " thread" : " threads");
  if (const std::string gpu = value("gpu"); !gpu.empty())
    out += "; " + gpu + " sm_" + value("compute_capability") + ", driver " + value("gpu_driver") + ", CUDA runtime " +
           value("cuda_runtime") + ", cuBLAS " + value("cublas") + ", cuFFT " + value("cufft") + ", NCCL " +
           value("nccl");
  return out;
}

Numerics cpu_numerics(int threads) {
  omp_set_num_threads(threads);  // the probe's bits depend on it
  const GemmProbe probe = run_gemm_probe();
  Numerics n;
  n.add("blas", "BLAS", openblas_version());
  n.add("blas_core", "OpenBLAS core", openblas_get_corename());
  n.add("blas_core_choice", "core chosen by", blas_core_provenance(), false);
  n.add("blas_env", "OpenBLAS environment", blas_environment(), false);
  n.add("gemm_probe", "GEMM probe bits", probe.hash);
  n.add("blas_check", "BLAS self-check", probe.check, false);
  n.add("cpu", "CPU", cpu_model_name(), false);
  n.add("cpu_isa", "CPU instruction set", cpu_isa(), false);
  n.add("compiled_for", "compiled for", compiled_isa());
  n.add("compiler", "compiler", compiler());
  n.add("build", "build type", BRT_BUILD_TYPE);
  n.add("threads", "OpenMP threads", std::to_string(threads));
  return n;
}

std::string blas_self_check_problem(const Numerics& numerics) {
  const std::string check = numerics.value("blas_check");
  if (check.rfind("ok", 0) == 0 || check.empty()) return "";
  return "the BLAS self-check failed: OpenBLAS core " + numerics.value("blas_core") + " (" +
         numerics.value("blas_core_choice") + ") " + check +
         "; this OpenBLAS computes wrong results with that core on this CPU. Set OPENBLAS_CORETYPE to another core "
         "(e.g. OPENBLAS_CORETYPE=Haswell on a CPU with AVX2, Sandybridge without) for every rank";
}

}  // namespace brt::runtime
