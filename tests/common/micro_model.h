// The micro models the tests build: a ModelConfig (core/model_config.h, model.md §0) of the
// sizes a test names, small enough for finite differences, the emulator or a CPU run of a few
// hundred steps. One function for every test, so that the fields a model needs are written
// once: a test names its sizes (designated initialisers), not a row of assignments.
#pragma once

#include <string>
#include <vector>

#include "core/model_config.h"

namespace brt::testing {

// The sizes of a micro model, ModelConfig's fields of the same names. The first eight have no
// default a test could rely on (0: resolve() rejects it); the others keep ModelConfig's own
// default when left at 0 (or empty, for the layer lists).
struct MicroSizes {
  int layers = 0, d_model = 0, heads = 0, head_dim = 0, d_ff = 0, vocab = 0, seq_len = 0, window = 0;
  int state_size = 0;                 // S, the recurrent state's rows (model.md §5)
  std::vector<int> recurrent_layers{};  // which layers are recurrent (rec:*, feedback:*)
  std::vector<int> bst_layers{};        // which layers are BST (bst:*, model.md §7)
  int ssm_state = 0;                  // N_s (model.md §7.1)
  int ctx_states = 0;                 // S_ctx (model.md §7.2)
};

// `variant` at the sizes `s`, not resolved (a test that changes a field resolves after).
inline core::ModelConfig micro_model(const std::string& variant, const MicroSizes& s) {
  core::ModelConfig c;
  c.variant = variant;
  c.layers = s.layers;
  c.d_model = s.d_model;
  c.heads = s.heads;
  c.head_dim = s.head_dim;
  c.d_ff = s.d_ff;
  c.vocab = s.vocab;
  c.seq_len = s.seq_len;
  c.window = s.window;
  if (s.state_size > 0) c.state_size = s.state_size;
  if (!s.recurrent_layers.empty()) c.recurrent_layers = s.recurrent_layers;
  if (!s.bst_layers.empty()) c.bst_layers = s.bst_layers;
  if (s.ssm_state > 0) c.ssm_state = s.ssm_state;
  if (s.ctx_states > 0) c.ctx_states = s.ctx_states;
  return c;
}

}  // namespace brt::testing
