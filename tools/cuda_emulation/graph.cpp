// Host emulation check of CUDA graph capture (tools/cuda_emulation, docs/gpu.md "CUDA graphs"):
// the training step captured by launch/step_graphs.cpp and replayed must give bit-identical
// losses, gradients and weights to the same steps run eagerly, across reset patterns, a full
// warm-up and replays after other patterns; a capture that waits on the device must fail
// cleanly and leave the stream usable. Prints each step's launch profile: what an eager step
// launches one by one (by kernel name) and what the host launches with the graph.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/optimizer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_optimizer_kernels.h"
#include "kernels/cuda/stream_graph.h"
#include <cuda_runtime.h>  // the emulator's runtime header: its launch counts
#include "launch/step_graphs.h"
#include "compare.h"
#include "training_common.h"

using namespace brt;

namespace {

struct Run {
  std::unique_ptr<kernels::Backend<float>> backend;
  std::unique_ptr<core::Model<float>> model;
  std::unique_ptr<kernels::OptimizerKernels<float>> kernels;
  std::unique_ptr<core::Optimizer<float>> optimizer;
  std::unique_ptr<launch::StepGraphs> graphs;  // null: eager
};

Run make_run(const core::ModelConfig& cfg, int streams, bool graphs) {
  Run r;
  kernels::cuda::CudaOptions options;
  options.workspace_bytes = size_t(16) << 20;
  r.backend = kernels::cuda::make_cuda_backend(options);
  r.model = std::make_unique<core::Model<float>>(cfg, streams, *r.backend);
  r.model->params().initialize(11);
  r.kernels = kernels::cuda::make_cuda_optimizer_kernels(*r.backend);
  core::OptimConfig optim;
  optim.kind = core::OptimKind::kAdamW;
  optim.lr = 1e-2;
  optim.warmup = 0;
  optim.total_steps = 10;
  r.optimizer = core::make_optimizer(optim, r.model->params(), {}, r.kernels.get());
  if (graphs) r.graphs = std::make_unique<launch::StepGraphs>(*r.model, *r.backend);
  return r;
}

using LaunchProfile = std::vector<emu::LaunchCount>;
long total(const LaunchProfile& p) {
  long n = 0;
  for (const auto& c : p) n += c.count;
  return n;
}

// One training step; returns the loss sum and leaves the launch profile of the step in `profile`.
double step(Run& r, const emu_check::Step& s, LaunchProfile& profile) {
  emu::launch_counts().clear();
  r.model->params().zero_grads();
  const core::ModelInput in{s.inputs.data(), s.targets.data(), s.mask.data(), s.doc_start.data()};
  const int64_t count = r.model->stage_step(in);
  const float scale = 1.0f / float(count);
  if (r.graphs) r.graphs->run(scale);
  else r.model->device_step(scale);
  const double nats = r.model->step_nats();
  r.optimizer->step();
  profile = emu::launch_counts();
  return nats;
}

void print_profile(const char* what, LaunchProfile p) {
  std::sort(p.begin(), p.end(), [](const auto& a, const auto& b) { return a.count > b.count; });
  std::printf("    %s: %ld launches:", what, total(p));
  for (size_t i = 0; i < p.size() && i < 8; ++i) std::printf(" %s %ld%s", p[i].name, p[i].count, i + 1 < p.size() && i < 7 ? "," : "");
  std::printf("\n");
}

// micro: one layer of half the width (the CI case, ctest cuda_emulated_step_graphs).
void compare_variant(const std::string& variant, bool micro) {
  core::ModelConfig cfg;
  cfg.variant = variant;
  cfg.layers = micro ? 1 : 2;
  cfg.d_model = micro ? 8 : 16;
  cfg.heads = 2;
  cfg.head_dim = micro ? 4 : 8;
  cfg.d_ff = micro ? 16 : 32;
  cfg.vocab = micro ? 16 : 32;
  cfg.seq_len = micro ? 8 : 16;
  cfg.window = micro ? 4 : 8;
  cfg.state_size = micro ? 4 : 8;
  cfg.recurrent_layers = {micro ? 0 : 1};
  cfg.ssm_state = micro ? 4 : 8;
  cfg.ctx_states = 2;
  cfg.resolve();
  const int streams = 2;
  std::printf("%s: eager steps against graph steps\n", variant.c_str());
  Run eager = make_run(cfg, streams, false), graphs = make_run(cfg, streams, true);
  // Reset patterns per step: all start, none (warm-up), none (capture), none (replay), stream 1
  // starts (another pattern: eager), none (replay after it), none.
  const std::vector<std::vector<uint8_t>> resets = {{1, 1}, {0, 0}, {0, 0}, {0, 0}, {0, 1}, {0, 0}, {0, 0}};
  double worst_loss = 0;
  LaunchProfile eager_profile, graph_profile;
  for (size_t i = 0; i < resets.size(); ++i) {
    emu_check::Step s = emu_check::make_step(cfg, streams, int(i), 5u, 0);
    s.doc_start = resets[i];
    LaunchProfile pe, pg;
    const double a = step(eager, s, pe), b = step(graphs, s, pg);
    worst_loss = std::max(worst_loss, std::fabs(a - b));
    if (i == 3) eager_profile = pe, graph_profile = pg;  // a replayed step
  }
  emu_check::report("  losses of 7 steps, |eager - graph|", worst_loss, 0.0, 46);
  double worst_grad = 0, worst_weight = 0;
  for (int p = 0; p < eager.model->params().size(); ++p) {
    worst_grad = std::max(worst_grad, emu_check::rel(graphs.model->params().grad_to_host(p),
                                                     eager.model->params().grad_to_host(p)));
    worst_weight = std::max(worst_weight, emu_check::rel(graphs.model->params().value_to_host(p),
                                                         eager.model->params().value_to_host(p)));
  }
  emu_check::report("  gradients of the last step", worst_grad, 0.0, 46);
  emu_check::report("  weights after 7 steps", worst_weight, 0.0, 46);
  const auto& st = graphs.graphs->stats();
  std::printf("  graph steps: %lld eager, %lld captured, %lld replayed, %d graphs; %s\n",
              (long long)st.eager_steps, (long long)st.captured_steps, (long long)st.replayed_steps,
              st.graphs, graphs.graphs->describe().c_str());
  emu_check::report("  replayed steps (3 expected)", std::fabs(double(st.replayed_steps) - 3.0), 0.0, 46);
  print_profile("eager step, every launch", eager_profile);
  print_profile("graph step, host launches", graph_profile);
}

// A capture whose work waits on the device fails with the reason and leaves the stream usable.
void capture_failure() {
  std::printf("a capture that reads back\n");
  auto backend = kernels::cuda::make_cuda_backend({});
  kernels::Buffer<float> x(backend->memory(), 16, "x");
  std::string message;
  try {
    kernels::cuda::StreamGraph g(*backend, [&] {
      backend->fill(x.data(), 16, 2.0f);
      (void)x.to_host();
    });
  } catch (const std::exception& e) {
    message = e.what();
  }
  std::printf("    message: %s\n", message.c_str());
  emu_check::report("  fails naming the capture and the wait",
                    message.find("could not be captured") != std::string::npos &&
                            message.find("cudaStreamSynchronize") != std::string::npos
                        ? 0.0 : 1.0, 0.0, 46);
  backend->fill(x.data(), 16, 3.0f);  // the stream works again, and nothing captured ran
  emu_check::report("  stream usable afterwards", std::fabs(x.to_host()[5] - 3.0f), 0.0, 46);
}

}  // namespace

int main(int argc, char** argv) try {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  capture_failure();
  // Arguments: [--micro] [VARIANT ...] (default rec:fixed:skip and bst:mf:unstructured).
  bool micro = false;
  std::vector<std::string> variants;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--micro") micro = true;
    else variants.push_back(argv[i]);
  }
  if (variants.empty()) variants = {"rec:fixed:skip", "bst:mf:unstructured"};
  for (const auto& v : variants) compare_variant(v, micro);
  std::printf("%s (%d failures)\n", emu_check::failures() ? "FAILED" : "all graph checks ok",
              emu_check::failures());
  return emu_check::failures() ? 1 : 0;
} catch (const std::exception& e) {
  std::printf("FAILED: %s\n", e.what());
  return 1;
}
