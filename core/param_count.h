// Parameter counts from the shapes of model.md §9, written out independently of the model code so
// a test can check that what the model declares is what the spec says (model.md §12 example:
// 150m rec:fixed:skip = 160.46M non-embedding, 193.36M in all).
#pragma once

#include <cstdint>

#include "core/model_config.h"

namespace brt::core {

// Every parameter: the tied embedding V*D, the final norm D and all layers. `config` must be
// resolve()d (the derived fields and layer lists are read).
int64_t count_parameters(const ModelConfig& config);
// count_parameters minus the embedding table (the final norm counts, as in model.md §12).
int64_t count_non_embedding_parameters(const ModelConfig& config);

// The pieces, for tests and reports.
int64_t standard_layer_parameters(const ModelConfig& config);  // model.md §4: 4DA + 2DF + 2D + 33H
int64_t recurrent_layer_extra(const ModelConfig& config);      // model.md §5/§9 additions (gate, config)
int64_t feedback_layer_extra(const ModelConfig& config);       // §5.4: a non-recurrent layer's wq2, scale2, wo half
int64_t bst_layer_extra(const ModelConfig& config);            // model.md §7/§9 additions

}  // namespace brt::core
