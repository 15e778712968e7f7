// Parameters are declared once — name, full logical shape, initialiser — and everything else
// (memory planning, initialisation, the optimizer, checkpoints) reads that declaration.
// MODEL.md §9 gives the names and shapes, §10b the layout-independent initialisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brt::core {

enum class InitKind {
  kOnes,         // RMSNorm gains and attention scales
  kZeros,
  kNormal,       // N(0, stddev)
  kTruncNormal,  // truncated normal, sigma = sqrt(gain / fan_in) / 0.8796, cut at +-2 sigma
  kConstant,     // `value` everywhere (S4D-Lin a_n = ln 0.5, MODEL §7.1)
  kUniform,      // U[low, high) (S4D log Δ; the implicit filter's PyTorch-style linears)
  kArange,       // value · (index mod period) (S4D-Lin b_n = π·n over the last axis, §7.1)
};

struct InitSpec {
  InitKind kind = InitKind::kZeros;
  double stddev = 0.0;  // kNormal
  double gain = 1.0;    // kTruncNormal: 1.0 for projections (§4), 0.1 for lstm gates (§5.3)
  int64_t fan_in = 0;   // kTruncNormal
  double value = 0.0;   // kConstant; kArange: the step
  double low = 0.0, high = 0.0;  // kUniform
  int64_t period = 1;   // kArange
};

struct ParamSpec {
  std::string name;              // e.g. "layers.9.state.wq" (MODEL §9)
  std::vector<int64_t> shape;    // full logical shape
  InitSpec init;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
  }
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
