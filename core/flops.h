// FLOPs per token by model.md §10 (forward; training counts 3× forward). Used for achieved
// GFLOP/s and MFU in training logs and benchmarks.
#pragma once

#include "core/model_config.h"

namespace brt::core {

struct FlopBreakdown {
  double layers = 0;    // all standard layers and the standard part of recurrent layers
  double recurrent = 0;  // the recurrent or BST extra (§10), incl. gate/MLP terms for lstm/dual
  double logits = 0;     // 2DV
  // The part of layers + recurrent that is attention (the score and value products: 4WA per
  // standard layer, the state reads 4SA and the state side's (S/W)(4SA + 8WA), BST's 4A·k_c),
  // for kernel-class step-time predictions (launch/plan/planner.h); the rest is matrix products.
  double attention = 0;
  double forward() const { return layers + recurrent + logits; }
  double training() const { return 3.0 * forward(); }
};

// `cfg` must be resolve()d. The §10 formula covers rec:fixed:skip; for 'lstm' gates we add
// the two 2A→D gate products per state row, and for 'dual' the state MLP (2·2DF) and its
// gate (2·2FD for lstm), all scaled by S/W like the other state-side terms.
FlopBreakdown flops_per_token(const ModelConfig& cfg);

}  // namespace brt::core
