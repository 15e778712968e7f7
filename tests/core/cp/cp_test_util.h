// Shared pieces of the context-parallel tests (tests/core/cp): (DP, CP, TP) layouts built from
// MPI_COMM_WORLD (world rank r = (d·CP + c)·TP + t, TP innermost as in a run), a small model
// whose segment splits into whole blocks on 4 ranks, deterministic segments, and the gathers
// that turn a rank's part back into the one-process tensors.
#pragma once

#include <mpi.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/sharding/context_parallel.h"
#include "core/model.h"
#include "core/sharding/tensor_parallel.h"
#include "parallel/mpi/mpi_communicator.h"
#include "tests/common/micro_model.h"
#include "tests/core/dp/dp_test_util.h"

namespace brt::testing {

struct CpShape {
  int dp = 1, cp = 1, tp = 1;
  std::string name() const {
    return "(DP, CP, TP) = (" + std::to_string(dp) + ", " + std::to_string(cp) + ", " +
           std::to_string(tp) + ")";
  }
};

// CP alone on every rank, then DP × CP and CP × TP on 4.
inline std::vector<CpShape> cp_layouts(int world) {
  if (world == 2) return {{1, 2, 1}};
  return {{1, 4, 1}, {2, 2, 1}, {1, 2, 2}};
}

struct CpLayout {
  int data_size = 1, data_rank = 0;  // DP alone
  std::unique_ptr<parallel::MpiCommunicator> tp, cp, grad_group;  // grad_group: DP × CP
  core::ContextParallel context() const { return core::ContextParallel(*cp); }
};

inline std::unique_ptr<parallel::MpiCommunicator> split(int color, int key, const std::string& name) {
  MPI_Comm comm;
  MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm);
  return std::make_unique<parallel::MpiCommunicator>(comm, name);
}

inline CpLayout make_layout(const CpShape& s) {
  const int r = world_rank(), t = r % s.tp, c = (r / s.tp) % s.cp, d = r / (s.tp * s.cp);
  CpLayout l;
  l.data_size = s.dp;
  l.data_rank = d;
  l.tp = split(d * s.cp + c, t, "tp");
  l.cp = split(d * s.tp + t, c, "cp");
  l.grad_group = split(t, r, "dp_cp");
  return l;
}

// L 2 (layer 0 BST for bst:*), D 32, H 4 × 8, F 64, V 64, N 32, W 4: chunks of 8 tokens (two
// blocks) on 4 ranks. BST: Ds 8 features, N_s 8 (4 modes).
inline core::ModelConfig cp_model_config(const std::string& variant, bool carry) {
  core::ModelConfig m = micro_model(variant, {.layers = 2, .d_model = 32, .heads = 4, .head_dim = 8, .d_ff = 64,
                                              .vocab = 64, .seq_len = 32, .window = 4, .state_size = 8,
                                              .ssm_state = 8, .ctx_states = 4});
  m.ssm_carry = carry;
  return m;
}

// One segment of every global stream: random tokens and masks; document starts: every stream
// in segment 0, the odd streams in segment 1, none in segment 2.
struct SegmentData {
  std::vector<int32_t> inputs, targets;
  std::vector<uint8_t> mask, doc_start;
  int64_t count = 0;  // unmasked targets over every stream
};

inline SegmentData segment_data(const core::ModelConfig& cfg, int streams, int segment) {
  std::mt19937 gen(1000 + segment);
  std::uniform_int_distribution<int> token(0, cfg.vocab - 1);
  std::uniform_real_distribution<double> unit(0, 1);
  SegmentData s;
  const size_t n = size_t(streams) * cfg.seq_len;
  for (size_t i = 0; i < n; ++i) {
    s.inputs.push_back(token(gen));
    s.targets.push_back(token(gen));
    s.mask.push_back(unit(gen) < 0.85 ? 1 : 0);
    s.count += s.mask.back();
  }
  for (int b = 0; b < streams; ++b) s.doc_start.push_back(segment == 0 || (segment == 1 && b % 2 == 1));
  return s;
}

inline double sum_over(parallel::Communicator& group, double v) { return group.all_reduce_value(v); }

// Every parameter gradient summed over DP × CP and gathered over TP, as doubles, store order.
template <typename T>
std::vector<std::vector<double>> gradients(const core::ParamStore<T>& store, const CpLayout* layout) {
  const core::TensorParallel tp = layout ? core::TensorParallel(*layout->tp) : core::TensorParallel();
  std::vector<std::vector<double>> out;
  std::vector<T> staging;
  for (const auto& p : store.params()) {
    std::vector<T> local(p.grad, p.grad + p.spec.numel());
    if (layout) layout->grad_group->all_reduce(local);
    std::vector<T> full(size_t(p.spec.global_numel()));
    core::gather_shards(tp, p.spec, local.data(), full.data(), staging);
    out.emplace_back(full.begin(), full.end());
  }
  return out;
}

// Every carried tensor of the model, gathered over TP along its shard dimension, as doubles (the
// S4D carry's bytes read back as the doubles they are).
template <typename T>
std::vector<std::vector<double>> carried(core::Model<T>& model, const core::TensorParallel& tp) {
  std::vector<std::vector<double>> out;
  for (const auto& ref : model.carried_state()) {
    int64_t n = 1;
    for (int64_t d : ref.shape) n *= d;
    std::vector<T> local(static_cast<size_t>(n));
    model.memory().to_host(local.data(), ref.data, size_t(n) * sizeof(T));
    std::vector<T> full = local;
    const int parts = ref.shard.size > 1 ? ref.shard.size : 1;
    if (parts > 1) {
      std::vector<T> blocks(static_cast<size_t>(n) * parts);
      tp.group()->all_gather(std::span<const T>(local), std::span<T>(blocks));
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < int(ref.shape.size()); ++d) (d < ref.shard.dim ? outer : inner) *= ref.shape[size_t(d)];
      full.resize(blocks.size());
      for (int64_t o = 0; o < outer; ++o)
        for (int r = 0; r < parts; ++r)
          std::memcpy(&full[size_t((o * parts + r) * inner)], &blocks[size_t(r * n + o * inner)],
                      size_t(inner) * sizeof(T));
    }
    if (ref.name.size() >= 9 && ref.name.compare(ref.name.size() - 9, 9, "ssm.carry") == 0) {
      std::vector<double> bits(full.size() * sizeof(T) / sizeof(double));
      std::memcpy(bits.data(), full.data(), bits.size() * sizeof(double));
      out.push_back(std::move(bits));
    } else {
      out.emplace_back(full.begin(), full.end());
    }
  }
  return out;
}

// Streams [first, first + count) of every carried tensor of `total` streams (dimension 0).
inline std::vector<std::vector<double>> streams_of(const std::vector<std::vector<double>>& all,
                                                   int total, int first, int count) {
  std::vector<std::vector<double>> out;
  for (const auto& t : all) {
    const size_t per = t.size() / size_t(total);
    out.emplace_back(t.begin() + long(first * per), t.begin() + long((first + count) * per));
  }
  return out;
}

}  // namespace brt::testing
