// CUDA graphs on the GPU (label gpu; skip without a GPU; docs/gpu.md "CUDA graphs"): training
// steps whose forward and backward replay from graphs (launch/train/step_graphs.h) are bit-identical
// to eager steps — losses and every weight — for the recurrent, sliding and BST variants, in
// fp32 and bf16, through document starts; and brt-dist's trainer uses them by default.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/optim/optimizer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/optim/cuda_optimizer_kernels.h"
#include "launch/config/config.h"
#include "launch/feed/batch_source.h"
#include "launch/train/step_graphs.h"
#include "launch/train/trainer.h"
#include "tests/kernels/cuda/gpu_required.h"

namespace {

namespace kc = brt::kernels::cuda;

struct Trace {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
  brt::launch::StepGraphStats graphs;
};

Trace train(const brt::launch::RunConfig& cfg, kc::Precision precision, bool graphs, int steps) {
  kc::CudaOptions options;
  options.precision = precision;
  auto backend = kc::make_cuda_backend(options);
  brt::core::Model<float> model(cfg.model, cfg.train.batch, *backend);
  model.params().initialize(uint64_t(cfg.train.seed));
  auto kernels = kc::make_cuda_optimizer_kernels(*backend);
  auto optimizer = brt::core::make_optimizer(cfg.optim, model.params(), {}, kernels.get());
  std::unique_ptr<brt::launch::StepGraphs> step_graphs;
  if (graphs) step_graphs = std::make_unique<brt::launch::StepGraphs>(model, *backend);
  brt::launch::SyntheticMarkovSource source(cfg.model.vocab, cfg.train.batch, cfg.model.seq_len,
                                            uint64_t(cfg.train.seed));
  brt::data::Batch batch;
  Trace t;
  for (int step = 0; step < steps; ++step) {
    source.next(batch);
    if (step == 6) batch.doc_start[0] = 1;  // a document start mid-run: another graph's pattern
    // Variable masks (padding at the end of a document): another unmasked count and so another
    // loss scale every step, which the graphs read from device memory (no new signature).
    for (int r = 0; r < step % 4 * 3 && r < int(batch.mask.size()); ++r) batch.mask[size_t(r)] = 0;
    int64_t count = 0;
    for (uint8_t m : batch.mask) count += m;
    model.params().zero_grads();
    model.stage_step({batch.inputs.data(), batch.targets.data(), batch.mask.data(), batch.doc_start.data()});
    const float scale = count ? 1.0f / float(count) : 0.0f;
    if (step_graphs) step_graphs->run(scale);
    else model.device_step(scale);
    t.losses.push_back(model.step_nats());
    optimizer->step();
  }
  for (int i = 0; i < model.params().size(); ++i) t.weights.push_back(model.params().value_to_host(i));
  if (step_graphs) t.graphs = step_graphs->stats();
  return t;
}

class CudaGraphs : public ::testing::Test {
 protected:
  void SetUp() override {
    BRT_REQUIRE_CUDA_DEVICE();
  }
};

TEST_F(CudaGraphs, ReplayedStepsAreBitIdenticalToEagerSteps) {
  for (const std::string variant : {"rec:fixed:skip", "slide", "bst:sh:s4d", "bst:mf:unstructured"}) {
    for (const kc::Precision precision : {kc::Precision::kFp32, kc::Precision::kBf16}) {
      const auto cfg = brt::launch::load_run_config(
          "configs/tiny.toml", {"data.source=synthetic", "model.variant=" + variant});
      const Trace eager = train(cfg, precision, false, 12);
      const Trace graphs = train(cfg, precision, true, 12);
      const std::string what = variant + " " + kc::precision_name(precision);
      for (size_t i = 0; i < eager.losses.size(); ++i)
        EXPECT_EQ(std::memcmp(&eager.losses[i], &graphs.losses[i], sizeof(double)), 0)
            << what << " step " << i + 1 << ": " << eager.losses[i] << " vs " << graphs.losses[i];
      for (size_t p = 0; p < eager.weights.size(); ++p)
        EXPECT_EQ(std::memcmp(eager.weights[p].data(), graphs.weights[p].data(),
                              eager.weights[p].size() * sizeof(float)), 0)
            << what << " parameter " << p;
      // 12 steps, two signatures (all continue; stream 0 restarting at step 7), masks varying
      // every step: 2 warm-ups, 1 capture, the rest replayed.
      EXPECT_GE(graphs.graphs.replayed_steps, 8) << what;
      EXPECT_GT(graphs.graphs.graph_kernels, 20) << what;
      std::printf("%s: %lld replayed, %lld captured, %lld eager; one graph holds %d kernels, %d "
                  "copies, %d fills\n", what.c_str(), (long long)graphs.graphs.replayed_steps,
                  (long long)graphs.graphs.captured_steps, (long long)graphs.graphs.eager_steps,
                  graphs.graphs.graph_kernels, graphs.graphs.graph_copies, graphs.graphs.graph_fills);
    }
  }
}

// A target outside the vocabulary inside a replayed step ends the step with the eager path's
// message (the loss kernel skips the row; Model::step_nats reads the bad row and throws).
TEST_F(CudaGraphs, AReplayedStepWithABadTargetThrowsTheEagerMessage) {
  const auto cfg = brt::launch::load_run_config("configs/tiny.toml", {"data.source=synthetic"});
  auto backend = kc::make_cuda_backend();
  brt::core::Model<float> model(cfg.model, cfg.train.batch, *backend);
  model.params().initialize(1);
  brt::launch::StepGraphs graphs(model, *backend);
  brt::launch::SyntheticMarkovSource source(cfg.model.vocab, cfg.train.batch, cfg.model.seq_len, 1);
  brt::data::Batch batch;
  for (int step = 0; step < 4; ++step) {
    source.next(batch);
    if (step == 3) batch.targets[5] = cfg.model.vocab + 7;
    model.params().zero_grads();
    model.stage_step({batch.inputs.data(), batch.targets.data(), batch.mask.data(), batch.doc_start.data()});
    graphs.run(1.0f / float(batch.mask.size()));
    if (step < 3) {
      EXPECT_GT(model.step_nats(), 0.0);
      continue;
    }
    EXPECT_EQ(graphs.stats().replayed_steps, 2);
    try {
      model.step_nats();
      ADD_FAILURE() << "a bad target gave a loss";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), brt::kernels::bad_target_message(
                                           "cuda", cfg.model.vocab + 7, 5, cfg.model.vocab));
    }
  }
}

TEST_F(CudaGraphs, TheTrainerReplaysGraphsByDefaultAndMatchesEagerTraining) {
  auto run = [](bool graphs) {
    brt::launch::TrainOptions o;
    o.config = brt::launch::load_run_config(
        "configs/tiny.toml", {"data.source=synthetic", "train.device=cuda", "train.steps=10",
                              "train.cuda_graph=" + std::string(graphs ? "true" : "false"),
                              "checkpoint.dir=", "log.metrics_path="});
    o.quiet = true;
    o.gpu_device = 0;
    return brt::launch::run_training(o);
  };
  const auto with = run(true), without = run(false);
  EXPECT_GE(with.graph_steps, 7);
  EXPECT_EQ(without.graph_steps, 0);
  EXPECT_EQ(with.losses, without.losses);
}

}  // namespace
