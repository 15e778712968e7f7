// The run's spine (launch/run/run_model.h) and the one decision of what tensor parallelism
// splits (core/tp_split.h): a RunModel built for training holds the optimizer and reports the
// memory the planner predicts (launch/plan/planner.h), one built for inference holds the model
// alone; the split sizes follow the resolved model's family (feedback and BST included).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "core/param_count.h"
#include "core/tp_split.h"
#include "launch/config/config.h"
#include "launch/plan/planner.h"
#include "launch/run/context_parallel_refusal.h"
#include "launch/run/run_model.h"

namespace brt::launch {
namespace {

RunConfig small(const std::string& variant) {
  return load_run_config(std::string(BRT_SOURCE_DIR) + "/configs/tiny.toml",
                         {"model.variant=" + variant, "model.layers=2", "model.seq_len=32",
                          "model.window=" + std::string(variant == "xl" ? "32" : "8"), "model.state_size=8",
                          "model.d_model=32", "model.heads=2", "model.head_dim=16", "model.d_ff=64", "model.vocab=64",
                          "model.ssm_state=8", "model.ctx_states=4", "train.batch=2", "data.source=synthetic"});
}

std::vector<std::string> split_names(const core::ModelConfig& m) {
  std::vector<std::string> names;
  for (const auto& s : core::tensor_parallel_splits(m)) names.push_back(s.name);
  return names;
}

TEST(TpSplit, FollowsTheResolvedFamily) {
  const std::vector<std::string> common = {"model.heads", "model.d_ff", "model.vocab"};
  EXPECT_EQ(split_names(small("slide").model), common);
  EXPECT_EQ(split_names(small("xl").model), common);
  for (const char* v : {"rec:fixed:skip", "feedback:lstm:dual"}) {  // the state rows, feedback included
    std::vector<std::string> want = common;
    want.push_back("model.state_size");
    EXPECT_EQ(split_names(small(v).model), want) << v;
  }
  std::vector<std::string> bst = common;
  bst.push_back("model.d_model / 4 (the BST SSM features Ds)");
  EXPECT_EQ(split_names(small("bst:mf:unstructured").model), bst);
}

TEST(TpSplit, NamesTheFirstSizeThatDoesNotDivide) {
  RunConfig c = small("feedback:fixed:skip");
  EXPECT_EQ(core::tensor_parallel_split_problem(c.model, 2), "");
  c = load_run_config(std::string(BRT_SOURCE_DIR) + "/configs/tiny.toml",
                      {"model.variant=feedback:fixed:skip", "model.state_size=9"});
  EXPECT_EQ(core::tensor_parallel_split_problem(c.model, 2), "model.state_size = 9 does not divide by tp = 2");
  EXPECT_THROW(predict_rank_memory(c.model, c.optim, 1, 1, false, 0, 4, 2), std::invalid_argument);
}

TEST(RunModel, TrainingHoldsTheOptimizerAndThePlannedMemory) {
  for (const char* v : {"rec:lstm:dual", "feedback:fixed:skip", "bst:sh:s4d", "slide"}) {
    SCOPED_TRACE(v);
    const RunConfig cfg = small(v);
    RunModel<float> run(cfg, {}, RunModelOptions::train(cfg));
    EXPECT_EQ(run.parameters(), core::count_parameters(run.model().config()));
    EXPECT_EQ(run.data_parallel(), nullptr);  // one process
    EXPECT_EQ(run.dp_cp_size(), 1);
    EXPECT_GT(run.optimizer().state_elems_allocated(), 0);
    const MemoryPrediction p = predict_rank_memory(cfg.model, cfg.optim, cfg.train.batch, 1, false, 0, 4, 1);
    EXPECT_EQ(run.memory().parameters, p.parameters);
    EXPECT_EQ(run.memory().optimizer, p.optimizer);
    EXPECT_EQ(run.memory().activations, p.activations);
    EXPECT_EQ(run.memory().total(), p.total());
  }
}

TEST(RunModel, InferenceHoldsTheModelAlone) {
  const RunConfig cfg = small("rec:fixed:skip");
  RunModel<float> run(cfg, {}, RunModelOptions::inference(1));
  EXPECT_EQ(run.model().streams(), 1);
  EXPECT_EQ(run.memory().optimizer, 0);
  EXPECT_THROW(run.optimizer(), std::logic_error);
}

TEST(RunModel, RefusesADeviceSettingNamingTheKey) {
  RunConfig cfg = small("slide");
  cfg.train.precision = "bf16";  // the CPU computes in fp32 or fp64
  try {
    RunModel<float> run(cfg, {}, RunModelOptions::train(cfg));
    FAIL() << "built a bf16 model on the CPU";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("train.precision"), std::string::npos) << e.what();
  }
}

// Every refusal of context parallelism comes from one function (launch/run/context_parallel_refusal.h),
// which every command reaches through make_run_groups with its work: what splits is allowed on
// any command that runs segments; what a command cannot split is named with its flag, before
// the ranks and the model are looked at; then the ranks, then the variant and length.
TEST(ContextParallelRefusal, OneFunctionForEveryCommand) {
  RunConfig cfg = small("slide");
  cfg.train.cp = 2;
  EXPECT_EQ(context_parallel_refusal(cfg, 2, CpWork::kTrain), "");
  EXPECT_EQ(context_parallel_refusal(cfg, 4, CpWork::kEval), "");
  const auto refused = [&](const RunConfig& c, int world, CpWork work, const std::string& text) {
    const std::string why = context_parallel_refusal(c, world, work);
    EXPECT_NE(why.find(text), std::string::npos) << "got: " << why;
  };
  refused(cfg, 2, CpWork::kTaskEval, "eval --task scores one answer per document");
  refused(cfg, 2, CpWork::kMqarEval, "eval --task mqar: run it without --cp (train.cp = 2)");
  refused(cfg, 1, CpWork::kGenerate, "generate decodes one block per segment");
  refused(cfg, 3, CpWork::kTrain, "--cp 2 does not fit: 3 ranks");
  RunConfig rec = small("rec:fixed:skip");
  rec.train.cp = 2;
  refused(rec, 2, CpWork::kEval, "the recurrent state is updated block after block");
  RunConfig unstructured = small("bst:sh:unstructured");
  unstructured.train.cp = 2;
  refused(unstructured, 2, CpWork::kTrain, "no finite state");
  // Without context parallelism nothing is refused, whatever the work and the variant.
  rec.train.cp = 1;
  for (CpWork work : {CpWork::kTrain, CpWork::kEval, CpWork::kTaskEval, CpWork::kMqarEval, CpWork::kGenerate})
    EXPECT_EQ(context_parallel_refusal(rec, 3, work), "");
  // The CUDA graph capture names context parallelism as its obstacle only under it.
  EXPECT_EQ(context_parallel_capture_obstacle(rec.train), "");
  EXPECT_NE(context_parallel_capture_obstacle(cfg.train).find("S4D state passing"), std::string::npos);
}

}  // namespace
}  // namespace brt::launch
