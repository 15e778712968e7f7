// Parameters are declared once — name, full logical shape, initialiser — and everything else
// (memory planning, initialisation, the optimizer, checkpoints) reads that declaration.
// model.md §9 gives the names and shapes, §10b the layout-independent initialisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brt::core {

enum class InitKind {
  kOnes,         // RMSNorm gains and attention scales
  kZeros,
  kNormal,       // N(value, stddev): mean `value`, 0 for every docs/model.md default
  kTruncNormal,  // truncated normal, sigma = sqrt(gain / fan_in) / 0.8796, cut at +-2 sigma
  kConstant,     // `value` everywhere (S4D-Lin a_n = ln 0.5, model.md §7.1)
  kUniform,      // U[low, high) (S4D log Δ; the implicit filter's PyTorch-style linears)
  kArange,       // value · (index mod period) (S4D-Lin b_n = π·n over the last axis, §7.1)
};

struct InitSpec {
  InitKind kind = InitKind::kZeros;
  double stddev = 0.0;  // kNormal
  double gain = 1.0;    // kTruncNormal: 1.0 for projections (§4), 0.1 for lstm gates (§5.3)
  int64_t fan_in = 0;   // kTruncNormal
  double value = 0.0;   // kConstant; kNormal: the mean; kArange: the step
  double low = 0.0, high = 0.0;  // kUniform
  int64_t period = 1;   // kArange
};

// How a tensor-parallel rank holds a parameter (docs/parallelism.md, "Tensor parallelism"):
// replicated (dim < 0 or size 1), or the slice `rank` of `size` equal parts along `dim`. A
// dimension made of `pieces` equal consecutive blocks (the recurrent Wo [2A, D] acts on
// concat(A_ee, A_es)) is split block by block: the rank owns part `rank` of every block.
struct ShardSpec {
  int dim = -1;
  int rank = 0, size = 1;
  int pieces = 1;
  bool sharded() const { return dim >= 0 && size > 1; }
};

struct ParamSpec {
  std::string name;              // e.g. "layers.9.state.wq" (model.md §9)
  std::vector<int64_t> shape;    // full logical shape (whatever the sharding)
  InitSpec init;
  ShardSpec shard = {};          // which slice of `shape` this process stores
  // Elements this process stores (the local slice).
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : local_shape()) n *= s;
    return n;
  }
  int64_t global_numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
  std::vector<int64_t> local_shape() const {
    std::vector<int64_t> local = shape;
    if (shard.sharded()) local[size_t(shard.dim)] /= shard.size;
    return local;
  }
  // The flat index in the full logical tensor of local element `local_index`, so a shard is
  // initialised as exactly its slice of the whole (model.md §10b).
  int64_t global_index(int64_t local_index) const;
  // Offset along `shard.dim` of the rows this rank holds in block `piece` (of shard.pieces).
  int64_t shard_offset(int piece) const;
  bool is_matrix() const { return shape.size() >= 2; }  // AdamW weight decay applies to these
};

// A parameter's storage inside a ParamStore: value and gradient live in two contiguous
// arenas (so global norms, optimizer sweeps and gradient all-reduces touch one buffer).
template <typename T>
struct Param {
  ParamSpec spec;
  int64_t offset = 0;  // into the store's value/grad arenas
  T* value = nullptr;
  T* grad = nullptr;
  int64_t numel() const { return spec.numel(); }
};

}  // namespace brt::core
