// The model's shape and variant (model.md §0, §5.3, §6, §7, §12). Filled from a config file
// by launch/; validated by validate() before anything is allocated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brt::core {

enum class ModelFamily { kSlide, kXL, kRecurrent, kBST };
enum class GateKind { kFixed, kLSTM };
enum class RecurrentConfig { kSkip, kDual };
enum class BstVariant { kSH, kMH, kMF };
enum class SsmKernel { kS4D, kUnstructured };

struct ModelConfig {
  // Variant name as in docs/model.md: "slide", "xl", "rec:fixed:skip", "rec:lstm:dual", ...,
  // "feedback:fixed:skip", ...,
  // "bst:sh:s4d", ... The layer count is a separate key (13-layer slide, 24-layer forms).
  std::string variant = "rec:fixed:skip";
  int layers = 12;        // L
  int d_model = 512;      // D
  int heads = 8;          // H
  int head_dim = 64;      // dh
  int d_ff = 2048;        // F
  int vocab = 32128;      // V
  int seq_len = 4096;     // N
  int window = 512;       // W (xl: one Transformer-XL segment per block, model.md §6)
  int state_size = 512;   // S
  // Empty means the model.md §5 default: [9, 19] for 24 layers, else [L - 3].
  std::vector<int> recurrent_layers;
  // BST (model.md §7): empty means the default [0, 9] (clamped to layers that exist).
  std::vector<int> bst_layers;
  int ssm_state = 64;     // N_s
  int ctx_states = 32;    // S_ctx (MF)
  bool ssm_carry = true;
  // Initialisation scales of the recurrent state (model.md §5, §5.3; the defaults are docs/model.md's):
  // Σ0 ~ N(0, state_init_std), state IDs P ~ N(0, state_id_std), and the fixed gates' bias
  // b ~ N(gate_bias_mean, 0.1), i.e. σ(b) ≈ σ(gate_bias_mean) at the start. Options for
  // studies of how the state is learned (docs/fidelity.md), not part of the papers' recipe.
  double state_init_std = 0.1;
  double state_id_std = 1.0;
  double gate_bias_mean = 0.0;

  // Derived from `variant` by resolve(); read these, not the string.
  ModelFamily family = ModelFamily::kRecurrent;
  GateKind gate = GateKind::kFixed;
  RecurrentConfig rec_config = RecurrentConfig::kSkip;
  BstVariant bst_variant = BstVariant::kSH;
  SsmKernel ssm_kernel = SsmKernel::kS4D;
  // "feedback:{gate}:{config}" (model.md §5.4): family kRecurrent with one recurrent layer whose
  // state every other layer's tokens also read; the stack runs block-major.
  bool feedback = false;

  int attn_width() const { return heads * head_dim; }  // A
  int blocks() const { return seq_len / window; }      // T
  // The BST SSM sublayer's shapes (model.md §7.1), derived here only: its features Ds = D/4
  // (resolve() refuses a BST model with D % 4 != 0) and its channels C: 1 (SH), H (MH) or
  // S_ctx (MF).
  int ssm_features() const { return d_model / 4; }  // Ds
  int ssm_channels() const;                         // C
  bool is_recurrent_layer(int i) const;
  bool is_bst_layer(int i) const;

  // Parses `variant`, fills the derived fields and default layer lists, and checks every
  // constraint (N % W == 0, layer indices in range, positive sizes). Throws
  // std::invalid_argument naming the offending key ("model.window", ...).
  void resolve();
};

// Every value resolve() accepts for `variant`, in docs/model.md's order: slide, xl, rec:*, feedback:*,
// bst:*. The key table publishes it (`brt-dist config keys --json`) for the Python side.
std::vector<std::string> model_variants();

}  // namespace brt::core
