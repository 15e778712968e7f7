// Evaluation-only views of how a model uses its carried memory (docs/evaluation.md,
// "Long-range diagnostics"): ablating the carried state, the recurrent gates' values, and the
// share of each token's attention output that comes from the state (BRT, model.md §5.2) or from
// the SSM context (BST, §7.2).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace brt::core {

// What `brt-dist eval --ablate` resets, forward only (a layer refuses backward while set):
enum class CarryAblation {
  kNone,
  // The recurrent state Σ (BST: the SSM carry and MF's carried context) restarts at every
  // segment as at a document start; the attention caches still carry (model.md §8), so a model
  // without carried state computes exactly what it computes without the ablation.
  kSegment,
  // Every block's tokens read the state of a document start, Σ0 (recurrent layers only; BST's
  // SSM has no per-block state to reset): what the tokens get from the state beyond Σ0.
  kBlock,
};
const char* carry_ablation_name(CarryAblation a);

// Running sums for a mean and a standard deviation, summable over ranks.
struct MomentSums {
  double sum = 0, sum_sq = 0, count = 0;
  void add(double v) {
    sum += v;
    sum_sq += v * v;
    count += 1;
  }
  double mean() const { return count > 0 ? sum / count : 0.0; }
  double stddev() const {
    if (count <= 0) return 0.0;
    const double m = mean();
    return std::sqrt(std::max(0.0, sum_sq / count - m * m));
  }
};

struct LayerDiagnostics {
  int layer = -1;   // the layer's index in the model (model.md §9's layers.{i})
  int source = -1;  // which of the model's Layer objects reports it (the feedback stack is one)
  std::string kind;       // "recurrent" | "bst"
  std::string gate_kind;  // "fixed" | "lstm"; empty for BST
  bool dual = false;
  // fixed: g = σ(b) over the D channels; lstm: the forget gate f over every state entry of
  // every block evaluated (model.md §5.3). gate2: dual's second gate the same way.
  MomentSums gate, gate_input, gate2, gate2_input;  // *_input: lstm's input gate i
  // Per predicted token: ‖A_s·Wo[A:2A]‖ / (‖A_self·Wo[0:A]‖ + ‖A_s·Wo[A:2A]‖), with A_s the
  // cross-attention to the state (BRT) or to the SSM context (BST): how much of the layer's
  // attention output comes from the carried memory.
  MomentSums state_share;
  // Every sum, in a fixed order, for summing over data-parallel ranks.
  std::vector<double*> sums();
};

// Adds one per-token state share to `share` for each row with mask[row] != 0, from the two
// halves of a [2A, D] output projection applied to a_self and a_state ([rows, A] each).
// scratch_a, scratch_b: [rows, D] in the backend's memory.
template <typename T>
void accumulate_state_share(kernels::Backend<T>& be, const T* a_self, const T* a_state,
                            const T* wo, int rows, int A, int D, const uint8_t* mask,
                            T* scratch_a, T* scratch_b, MomentSums& share);

}  // namespace brt::core
