// What the emulator's training checks (training.cpp, training_tp.cpp) feed and record: the
// batches of a micro model's steps and the trace compared between the two backends.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/model_config.h"
#include "core/optim/optimizer.h"

#include "../common/micro_model.h"  // relative: an EMU_REPO checkout may predate it

namespace emu_check {

// The micro model every training check runs (resolved): 2 layers, D 32, H 2 x 16, F 64, V 64,
// N 32, the recurrent layer 1 with S 16, BST (layer 0) with N_s 16 and S_ctx 4 — small enough
// for the emulator, and every size tensor parallelism splits divides by 2. `window` W divides N.
inline brt::core::ModelConfig micro_model(const std::string& variant, int window) {
  brt::core::ModelConfig cfg = brt::testing::micro_model(
      variant, {.layers = 2, .d_model = 32, .heads = 2, .head_dim = 16, .d_ff = 64, .vocab = 64, .seq_len = 32,
                .window = window, .state_size = 16, .recurrent_layers = {1}, .ssm_state = 16, .ctx_states = 4});
  cfg.resolve();
  return cfg;
}

struct Step {
  std::vector<int32_t> inputs, targets;
  std::vector<uint8_t> mask, doc_start;
};

// Random tokens of step `index` (seeded by seed + index: the same on every rank), one padded
// target, every stream starting a document at step 0 and stream `restarting` again at step 1.
inline Step make_step(const brt::core::ModelConfig& cfg, int streams, int index, unsigned seed,
                      int restarting) {
  std::mt19937 gen(seed + unsigned(index));
  std::uniform_int_distribution<int> token(0, cfg.vocab - 1);
  Step s;
  const size_t n = size_t(streams) * cfg.seq_len;
  for (size_t i = 0; i < n; ++i) s.inputs.push_back(token(gen)), s.targets.push_back(token(gen));
  s.mask.assign(n, 1);
  s.mask[3] = 0;  // one padded target
  s.doc_start.assign(size_t(streams), index == 0 ? 1 : 0);
  if (index == 1) s.doc_start[size_t(restarting)] = 1;  // a new document at step 2
  return s;
}

struct Trace {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;    // (this rank's shards) after the first backward
  std::vector<std::vector<float>> weights;  // (this rank's shards) after the last step
};

// `steps` training steps of make_step's batches (seed, restarting): the mean loss of each
// step, the gradients after the first backward and the weights after the last step.
inline Trace record_steps(brt::core::Model<float>& model, brt::core::Optimizer<float>& optimizer,
                          int streams, int steps, unsigned seed, int restarting) {
  Trace t;
  for (int i = 0; i < steps; ++i) {
    const Step s = make_step(model.config(), streams, i, seed, restarting);
    model.params().zero_grads();
    const brt::core::LossSums sums =
        model.forward({s.inputs.data(), s.targets.data(), s.mask.data(), s.doc_start.data()},
                      1.0f / float(s.mask.size() - 1));
    model.backward();
    if (i == 0)
      for (int p = 0; p < model.params().size(); ++p) t.grads.push_back(model.params().grad_to_host(p));
    optimizer.step();
    t.losses.push_back(sums.nats / double(sums.count));
  }
  for (int p = 0; p < model.params().size(); ++p) t.weights.push_back(model.params().value_to_host(p));
  return t;
}

}  // namespace emu_check
