// train.cuda_graph (launch/train/step_graphs.h, docs/gpu.md "CUDA graphs"): the key, when a step can
// be captured and why not, and that only the CUDA backend captures. The captures themselves
// run in the emulator (tests/cuda_emulation/run.sh <build> graph) and on a GPU
// (tests/kernels/cuda/cuda_graph_test.cpp).
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/model.h"
#include "kernels/backend.h"
#include "launch/config/config.h"
#include "launch/run/device_backend.h"
#include "launch/train/step_graphs.h"
#include "tests/common/micro_model.h"

namespace brt::launch {
namespace {

TEST(StepGraphs, TheKeyIsOnByDefaultAndCanBeTurnedOff) {
  EXPECT_TRUE(TrainConfig{}.cuda_graph);
  const RunConfig off = load_run_config(std::string(BRT_SOURCE_DIR) + "/configs/tiny.toml",
                                        {"train.cuda_graph=false"});
  EXPECT_FALSE(off.train.cuda_graph);
  EXPECT_THROW(load_run_config(std::string(BRT_SOURCE_DIR) + "/configs/tiny.toml",
                               {"train.cuda_graph=sometimes"}),
               std::exception);
}

TEST(StepGraphs, CaptureObstaclesNameTheReason) {
  TrainConfig t;
  t.device = "cpu";
  EXPECT_NE(step_capture_obstacle(t, 1, 1).find("CUDA feature"), std::string::npos);
  t.device = "cuda";
  if (!cuda_backend_built()) {
    EXPECT_NE(step_capture_obstacle(t, 1, 1).find("no CUDA backend"), std::string::npos);
    return;
  }
  EXPECT_EQ(step_capture_obstacle(t, 1, 1), "");
  EXPECT_NE(step_capture_obstacle(t, 1, 2).find("tensor parallelism"), std::string::npos);
  EXPECT_NE(step_capture_obstacle(t, 4, 1).find("train.overlap=true"), std::string::npos);
  t.overlap = false;  // the hooks do nothing; the buckets are reduced after the graph
  EXPECT_EQ(step_capture_obstacle(t, 4, 1), "");
  EXPECT_NE(step_capture_obstacle(t, 4, 2).find("tensor parallelism"), std::string::npos);
  t.cp = 2;
  EXPECT_NE(step_capture_obstacle(t, 4, 1).find("context parallelism"), std::string::npos);
}

TEST(StepGraphs, OnlyTheCudaBackendCaptures) {
  core::ModelConfig cfg = testing::micro_model(
      "slide", {.layers = 1, .d_model = 8, .heads = 2, .head_dim = 4, .d_ff = 8, .vocab = 8, .seq_len = 8, .window = 4});
  auto cpu = kernels::make_cpu_backend<float>();
  core::Model<float> model(cfg, 1, *cpu);
  try {
    StepGraphs graphs(model, *cpu);
    FAIL() << "the CPU backend was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'cpu' backend cannot capture"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace brt::launch
