// Shared pieces of the data-parallel tests (tests/dp): the small model every test uses, the
// process groups over MPI_COMM_WORLD, and comparisons.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "launch/config/config.h"
#include "parallel/process_groups.h"

namespace brt::testing {

// Global streams of every test: DP=2 gives 2 per rank, DP=4 one.
inline constexpr int kGlobalStreams = 4;

inline int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

// L 2, D 32, H 2, dh 16, F 64, V 64, N 32, W 8, S 8: a step takes milliseconds.
inline launch::RunConfig small_run(const std::string& variant, int streams, int64_t steps,
                                   const std::vector<std::string>& extra = {}) {
  std::string toml =
      "[model]\nvariant = \"" + variant + "\"\nlayers = 2\nd_model = 32\nheads = 2\nhead_dim = 16\n"
      "d_ff = 64\nvocab = 64\nseq_len = 32\nwindow = 8\nstate_size = 8\n" +
      std::string(variant == "slide" ? "" : "recurrent_layers = [1]\n") +
      "[optim]\nkind = \"adamw\"\nlr = 0.01\nwarmup = 3\n"
      "[train]\nseed = 7\npeak_gflops = 1\neval_every = 0\n"
      "[log]\nevery = 1000\nmetrics_path = \"\"\n";
  std::vector<std::string> overrides = {"train.batch=" + std::to_string(streams),
                                        "train.steps=" + std::to_string(steps)};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return launch::parse_run_config(toml, "tests/dp small config", overrides);
}

// ||got - want|| / ||want|| over a tensor (0 when both are zero).
template <typename T>
double relative_error(const T* got, const T* want, int64_t n) {
  double diff = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(got[i]) - double(want[i]);
    diff += d * d;
    ref += double(want[i]) * double(want[i]);
  }
  if (ref == 0) return std::sqrt(diff);
  return std::sqrt(diff / ref);
}

template <typename T>
bool bit_identical(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// A scratch directory shared by all ranks (made by rank 0, name broadcast).
std::string shared_temp_dir(const std::string& tag);

}  // namespace brt::testing
