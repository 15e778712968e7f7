// Host emulation check of CUDA graph capture (tests/cuda_emulation, docs/gpu.md "CUDA graphs"):
// the training step captured by launch/train/step_graphs.cpp and replayed, the optimizer's update
// inside it (AdamW for rec:fixed:skip, Adafactor for bst:mf:unstructured), must give bit-identical losses, gradients and weights to the same steps run
// eagerly with the update after the host has judged the norm (Optimizer::step), across reset patterns, masks
// that differ in every step (so the loss scale 1/count differs: it is staged outside the graph
// and must not split the graphs), a full warm-up and replays after other patterns; a capture
// that waits on the device must fail cleanly and leave the stream usable. Prints each step's
// launch profile: what an eager step launches one by one (by kernel name) and what the host
// launches with the graph. With --bad-target: a replayed step whose target is outside the
// vocabulary must fail with the eager loss's message, as the eager step does.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/optim/optimizer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/optim/cuda_optimizer_kernels.h"
#include "kernels/cuda/stream_graph.h"
#include <cuda_runtime.h>  // the emulator's runtime header: its launch counts
#if __has_include("launch/train/step_graphs.h")
#include "launch/train/step_graphs.h"
#else
#include "launch/step_graphs.h"  // EMU_REPO: a checkout from before launch/'s rooms
#endif
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

Run make_run(const core::ModelConfig& cfg, int streams, bool graphs,
             core::OptimKind kind = core::OptimKind::kAdamW) {
  Run r;
  kernels::cuda::CudaOptions options;
  options.workspace_bytes = size_t(16) << 20;
  r.backend = kernels::cuda::make_cuda_backend(options);
  r.model = std::make_unique<core::Model<float>>(cfg, streams, *r.backend);
  r.model->params().initialize(11);
  r.kernels = kernels::cuda::make_cuda_optimizer_kernels(*r.backend);
  core::OptimConfig optim;
  optim.kind = kind;
  optim.lr = 1e-2;
  optim.warmup = 0;
  optim.total_steps = 10;
  r.optimizer = core::make_optimizer(optim, r.model->params(), {}, r.kernels.get());
  if (graphs) r.graphs = std::make_unique<launch::StepGraphs>(*r.model, *r.backend, 8, r.optimizer.get());
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
  double nats = 0;
  if (r.graphs) {  // the update captured behind backward, its scalars staged before
    r.optimizer->stage_step();
    r.graphs->run(scale);
    nats = r.model->step_nats();
    if (!r.optimizer->finish_step().applied) throw std::runtime_error("the update inside the graph was skipped");
  } else {
    r.model->device_step(scale);
    nats = r.model->step_nats();
    r.optimizer->step();
  }
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
core::ModelConfig model_config(const std::string& variant, bool micro) {
  const int k = micro ? 1 : 2;  // the half-width micro model, or twice it
  core::ModelConfig cfg = brt::testing::micro_model(
      variant, {.layers = k, .d_model = 8 * k, .heads = 2, .head_dim = 4 * k, .d_ff = 16 * k, .vocab = 16 * k,
                .seq_len = 8 * k, .window = 4 * k, .state_size = 4 * k, .recurrent_layers = {k - 1},
                .ssm_state = 4 * k, .ctx_states = 2});
  cfg.resolve();
  return cfg;
}

void compare_variant(const std::string& variant, bool micro) {
  const core::ModelConfig cfg = model_config(variant, micro);
  const int streams = 2;
  const core::OptimKind kind = variant.rfind("bst", 0) == 0 ? core::OptimKind::kAdafactor : core::OptimKind::kAdamW;
  std::printf("%s with %s: eager steps against graph steps\n", variant.c_str(),
              kind == core::OptimKind::kAdamW ? "AdamW" : "Adafactor");
  Run eager = make_run(cfg, streams, false, kind), graphs = make_run(cfg, streams, true, kind);
  // Reset patterns per step: all start, none (warm-up), none (capture), none (replay), stream 1
  // starts (another pattern: eager), none (replay after it), none. The masks differ every step.
  const std::vector<std::vector<uint8_t>> resets = {{1, 1}, {0, 0}, {0, 0}, {0, 0}, {0, 1}, {0, 0}, {0, 0}};
  double worst_loss = 0;
  LaunchProfile eager_profile, graph_profile;
  for (size_t i = 0; i < resets.size(); ++i) {
    emu_check::Step s = emu_check::make_step(cfg, streams, int(i), 5u, 0);
    s.doc_start = resets[i];
    for (size_t r = 5; r < 5 + i; ++r) s.mask[r] = 0;  // another unmasked count every step
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
  // The read-back's cudaMemcpyAsync into pageable memory is refused first (the strict
  // emulator, as CUDA); a lenient runtime would fail at its cudaStreamSynchronize.
  const bool named = message.find("cudaMemcpyAsync") != std::string::npos ||
                     message.find("cudaStreamSynchronize") != std::string::npos;
  emu_check::report("  fails naming the capture and the call",
                    message.find("could not be captured") != std::string::npos && named ? 0.0 : 1.0, 0.0, 46);
  backend->fill(x.data(), 16, 3.0f);  // the stream works again, and nothing captured ran
  emu_check::report("  stream usable afterwards", std::fabs(x.to_host()[5] - 3.0f), 0.0, 46);
}

// What the backend's eager loss (softmax_xent_forward_backward, which waits and checks) says
// of target `target` at row `row` of a rows x V problem.
std::string eager_message(kernels::Backend<float>& be, int rows, int V, int row, int32_t target) {
  kernels::Buffer<float> logits(be.memory(), size_t(rows) * V, "logits"), loss(be.memory(), size_t(rows), "loss");
  kernels::Buffer<int32_t> targets(be.memory(), size_t(rows), "targets");
  kernels::Buffer<uint8_t> mask(be.memory(), size_t(rows), "mask");
  std::vector<int32_t> t(size_t(rows), 0);
  t[size_t(row)] = target;
  targets.from_host(t);
  mask.from_host(std::vector<uint8_t>(size_t(rows), 1));
  logits.from_host(std::vector<float>(size_t(rows) * V, 0.0f));
  try {
    be.softmax_xent_forward_backward(logits.data(), targets.data(), mask.data(), rows, V, 1.0f, logits.data(), loss.data());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// One step whose staged target at `row` is then overwritten on the device with `target` (a
// target the host check of Model::stage_step never saw: what any other path to the device
// would leave); "(no error)" or the step's message.
std::string step_with_device_target(Run& r, const emu_check::Step& s, int row, int32_t target, double& nats) {
  r.model->params().zero_grads();
  const core::ModelInput in{s.inputs.data(), s.targets.data(), s.mask.data(), s.doc_start.data()};
  try {
    const float scale = 1.0f / float(r.model->stage_step(in));
    auto* staged = static_cast<int32_t*>(emu::upload_destination(s.targets.data()));
    if (staged == nullptr) return "(the staged targets were not found)";
    cudaDeviceSynchronize();  // the upload has landed; device memory is host memory here
    staged[row] = target;
    if (r.graphs) r.graphs->run(scale);
    else r.model->device_step(scale);
    nats = r.model->step_nats();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// Steps of the micro model with the all-continue pattern until one is replayed from its
// graph, then a replayed step with target V (outside the vocabulary) at an unmasked row. Given
// to Model::stage_step, the host check refuses it. Placed in the staged device targets
// instead, the step must fail with the eager loss's message (what softmax_xent_forward_backward
// says), on the graph path and on the plain device_step path alike, not return a loss.
void bad_target() {
  const core::ModelConfig cfg = model_config("rec:fixed:skip", true);
  const int streams = 2, rows = streams * cfg.seq_len, bad_row = 5, V = cfg.vocab;
  std::printf("a replayed step with target %d (outside [0, %d)) at row %d\n", V, V, bad_row);
  Run eager = make_run(cfg, streams, false), graphs = make_run(cfg, streams, true);
  const std::string want = eager_message(*eager.backend, rows, V, bad_row, V);
  std::printf("    the eager loss says: %s\n", want.c_str());
  const std::vector<std::vector<uint8_t>> resets = {{1, 1}, {0, 0}, {0, 0}, {0, 0}};
  for (size_t i = 0; i < resets.size(); ++i) {
    emu_check::Step s = emu_check::make_step(cfg, streams, int(i), 9u, 0);
    s.doc_start = resets[i];
    LaunchProfile profile;
    step(eager, s, profile);
    step(graphs, s, profile);
  }
  emu_check::Step s = emu_check::make_step(cfg, streams, 4, 9u, 0);
  s.doc_start = {0, 0};
  {
    emu_check::Step bad = s;
    bad.targets[bad_row] = V;
    std::string got;
    try {
      LaunchProfile profile;
      step(graphs, bad, profile);
      got = "(no error)";
    } catch (const std::exception& e) {
      got = e.what();
    }
    std::printf("    given to Model::stage_step: %s\n", got.c_str());
  }
  const long long replays = graphs.graphs->stats().replayed_steps;
  for (Run* r : {&eager, &graphs}) {
    const char* path = r == &eager ? "device_step" : "graph replay";
    double nats = 0;
    const std::string got = step_with_device_target(*r, s, bad_row, V, nats);
    if (got == "(no error)") std::printf("    %s: no error, loss sum %.9g returned\n", path, nats);
    else std::printf("    %s says: %s\n", path, got.c_str());
    emu_check::report(std::string("  ") + path + ": the eager loss's message", got == want ? 0.0 : 1.0, 0.0, 46);
  }
  emu_check::report("  the bad step was a replay", std::fabs(double(graphs.graphs->stats().replayed_steps - (replays + 1))), 0.0, 46);
}

}  // namespace

int main(int argc, char** argv) try {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  // Arguments: --bad-target, or [--micro] [VARIANT ...] (default rec:fixed:skip and
  // bst:mf:unstructured).
  bool micro = false;
  std::vector<std::string> variants;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--micro") micro = true;
    else if (std::string(argv[i]) == "--bad-target") variants.push_back("");
    else variants.push_back(argv[i]);
  }
  if (!variants.empty() && variants[0].empty()) {
    bad_target();
  } else {
    capture_failure();
    if (variants.empty()) variants = {"rec:fixed:skip", "bst:mf:unstructured"};
    for (const auto& v : variants) compare_variant(v, micro);
  }
  std::printf("%s (%d failures)\n", emu_check::failures() ? "FAILED" : "all graph checks ok",
              emu_check::failures());
  return emu_check::failures() ? 1 : 0;
} catch (const std::exception& e) {
  std::printf("FAILED: %s\n", e.what());
  return 1;
}
