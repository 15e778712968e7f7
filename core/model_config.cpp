#include "core/model_config.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace brt::core {
namespace {

[[noreturn]] void fail(const std::string& key, const std::string& what) {
  throw std::invalid_argument(key + ": " + what);
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

void require_positive(int value, const char* key) {
  if (value <= 0) fail(key, std::to_string(value) + " must be > 0");
}

std::string list_text(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Sorts, and checks that every index names an existing layer exactly once.
void check_layer_list(std::vector<int>& layers, int count, const char* key) {
  std::sort(layers.begin(), layers.end());
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 0 || layers[i] >= count)
      fail(key, list_text(layers) + " names layer " + std::to_string(layers[i]) +
                    ", outside [0, model.layers = " + std::to_string(count) + ")");
    if (i > 0 && layers[i] == layers[i - 1])
      fail(key, list_text(layers) + " lists layer " + std::to_string(layers[i]) + " twice");
  }
}

const char* kVariantHelp =
    "expected slide | xl | rec:{fixed|lstm}:{skip|dual} | feedback:{fixed|lstm}:{skip|dual} | "
    "bst:{sh|mh|mf}:{s4d|unstructured}";

// Variant (model.md §5.3, §6, §7): sets c's family and its gate, configuration, BST variant or
// SSM kernel from c.variant.
void resolve_variant(ModelConfig& c) {
  const std::vector<std::string> parts = split(c.variant, ':');
  const std::string bad = "\"" + c.variant + "\" is not a variant; ";
  if (parts.empty()) fail("model.variant", bad + kVariantHelp);
  const std::string& head = parts[0];
  if (head == "slide" || head == "xl") {
    if (parts.size() != 1) {
      const std::string hint = c.variant.find("13L") != std::string::npos || c.variant.find("24L") != std::string::npos
                                   ? " (the layer count is its own key: model.layers = 13)"
                                   : "";
      fail("model.variant", bad + kVariantHelp + hint);
    }
    c.family = head == "slide" ? ModelFamily::kSlide : ModelFamily::kXL;
  } else if (head == "rec" || head == "feedback") {
    if (parts.size() != 3) fail("model.variant", bad + kVariantHelp);
    if (parts[1] == "fixed") c.gate = GateKind::kFixed;
    else if (parts[1] == "lstm") c.gate = GateKind::kLSTM;
    else fail("model.variant", bad + "the gate is fixed | lstm, not \"" + parts[1] + "\"");
    if (parts[2] == "skip") c.rec_config = RecurrentConfig::kSkip;
    else if (parts[2] == "dual") c.rec_config = RecurrentConfig::kDual;
    else fail("model.variant", bad + "the configuration is skip | dual, not \"" + parts[2] + "\"");
    c.family = ModelFamily::kRecurrent;
    c.feedback = head == "feedback";
  } else if (head == "bst") {
    if (parts.size() != 3) fail("model.variant", bad + kVariantHelp);
    if (parts[1] == "sh") c.bst_variant = BstVariant::kSH;
    else if (parts[1] == "mh") c.bst_variant = BstVariant::kMH;
    else if (parts[1] == "mf") c.bst_variant = BstVariant::kMF;
    else fail("model.variant", bad + "the BST variant is sh | mh | mf, not \"" + parts[1] + "\"");
    if (parts[2] == "s4d") c.ssm_kernel = SsmKernel::kS4D;
    else if (parts[2] == "unstructured") c.ssm_kernel = SsmKernel::kUnstructured;
    else fail("model.variant", bad + "the SSM kernel is s4d | unstructured, not \"" + parts[2] + "\"");
    c.family = ModelFamily::kBST;
  } else {
    fail("model.variant", bad + kVariantHelp);
  }
}

// Sizes (model.md §0).
void check_sizes(const ModelConfig& c) {
  require_positive(c.layers, "model.layers");
  require_positive(c.d_model, "model.d_model");
  require_positive(c.heads, "model.heads");
  require_positive(c.head_dim, "model.head_dim");
  require_positive(c.d_ff, "model.d_ff");
  require_positive(c.vocab, "model.vocab");
  require_positive(c.seq_len, "model.seq_len");
  require_positive(c.window, "model.window");
  if (c.seq_len % c.window != 0)
    fail("model.window", std::to_string(c.window) + " does not divide model.seq_len " + std::to_string(c.seq_len));
}

}  // namespace

std::vector<std::string> model_variants() {
  std::vector<std::string> names = {"slide", "xl"};
  for (const char* family : {"rec", "feedback"})
    for (const char* gate : {"fixed", "lstm"})
      for (const char* config : {"skip", "dual"}) names.push_back(std::string(family) + ":" + gate + ":" + config);
  for (const char* bst : {"sh", "mh", "mf"})
    for (const char* kernel : {"s4d", "unstructured"}) names.push_back(std::string("bst:") + bst + ":" + kernel);
  return names;
}

bool ModelConfig::is_recurrent_layer(int i) const {
  return family == ModelFamily::kRecurrent &&
         std::find(recurrent_layers.begin(), recurrent_layers.end(), i) != recurrent_layers.end();
}

bool ModelConfig::is_bst_layer(int i) const {
  return family == ModelFamily::kBST && std::find(bst_layers.begin(), bst_layers.end(), i) != bst_layers.end();
}

int ModelConfig::ssm_channels() const {
  switch (bst_variant) {
    case BstVariant::kSH: return 1;
    case BstVariant::kMH: return heads;
    case BstVariant::kMF: return ctx_states;
  }
  return 1;
}

void ModelConfig::resolve() {
  resolve_variant(*this);
  check_sizes(*this);

  // Layer lists: meaningful only for their family, so a base file's list does not leak into a
  // variant that has none (e.g. a slide form of a rec config).
  if (family == ModelFamily::kRecurrent) {
    require_positive(state_size, "model.state_size");
    if (recurrent_layers.empty()) {
      // model.md §5: [9, 19] for 24 layers, else the third from the top (layer 0 if L < 3).
      recurrent_layers = layers == 24 ? std::vector<int>{9, 19} : std::vector<int>{std::max(0, layers - 3)};
    }
    check_layer_list(recurrent_layers, layers, "model.recurrent_layers");
    if (feedback && recurrent_layers.size() != 1)
      fail("model.recurrent_layers", "the feedback variant is defined for one recurrent layer "
                                     "(model.md §5.4), not " + std::to_string(recurrent_layers.size()));
  } else {
    recurrent_layers.clear();
  }
  if (family == ModelFamily::kBST) {
    if (bst_layers.empty()) {
      for (int i : {0, 9})  // model.md §7 default, keeping the layers that exist
        if (i < layers) bst_layers.push_back(i);
    }
    check_layer_list(bst_layers, layers, "model.bst_layers");
    if (d_model % 4 != 0)
      fail("model.d_model", std::to_string(d_model) + " must be a multiple of 4 for BST (Ds = D/4, model.md §7.1)");
    require_positive(ssm_state, "model.ssm_state");
    if (ssm_kernel == SsmKernel::kS4D && ssm_state % 2 != 0)
      fail("model.ssm_state", std::to_string(ssm_state) + " must be even (N_s/2 complex modes, model.md §7.1)");
    if (bst_variant == BstVariant::kMF) require_positive(ctx_states, "model.ctx_states");
  } else {
    bst_layers.clear();
  }
}

}  // namespace brt::core
