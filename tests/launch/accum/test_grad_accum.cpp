// Gradient accumulation in one process (launch/train/grad_accum.h): train.batch = 2 with
// train.grad_accum = 2 against train.batch = 4 — the same streams and tokens, so the same loss,
// gradient norm, parameters and carried state to float32 rounding of a re-ordered sum
// (reordered_sum_tolerance, tests/launch/accum/accum_test_util.h) and the same data cursor exactly
// (recurrent, attention and BST variants; one stream x 3 micro-steps too); a
// skipped step skips the whole step; resume is bit-exact, and a big batch's checkpoint resumes
// under accumulation; bad values are refused naming the key.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "launch/run/device_backend.h"
#include "launch/train/step_graphs.h"
#include "tests/launch/accum/accum_test_util.h"
#include "tests/core/tp/tp_test_util.h"

namespace brt::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 5;

// model.window = N for xl (it attends over its whole segment, model.md §6).
std::vector<std::string> variant_keys(const std::string& variant, const std::string& dir) {
  std::vector<std::string> keys = {"checkpoint.dir=" + dir};
  if (variant == "xl") keys.push_back("model.window=32");
  return keys;
}

TEST(GradAccum, MatchesTheBigBatch) {
  const std::string dir = shared_temp_dir("accum_big");
  const double tol = reordered_sum_tolerance();
  for (const std::string variant : {"rec:fixed:skip", "rec:lstm:dual", "slide", "xl"}) {
    const std::string big_dir = dir + "/" + variant + "-big", acc_dir = dir + "/" + variant + "-accum";
    const auto big = train(small_run(variant, 4, kSteps, variant_keys(variant, big_dir)));
    auto acc_keys = variant_keys(variant, acc_dir);
    acc_keys.push_back("train.grad_accum=2");
    const auto acc = train(small_run(variant, 2, kSteps, acc_keys));
    ASSERT_EQ(big.losses.size(), size_t(kSteps)) << variant;
    double worst_loss = 0, worst_norm = 0, worst_param = 0, worst_state = 0;
    expect_steps_close(acc.losses, big.losses, tol, variant + " loss", &worst_loss);
    expect_steps_close(acc.grad_norms, big.grad_norms, tol, variant + " gradient norm", &worst_norm);
    expect_checkpoints_close(acc_dir, big_dir, "/model", tol, &worst_param);
    // Every stream's carried state, kept per stream group: rows [g·2, g·2 + 2) are group g's.
    expect_checkpoints_close(acc_dir, big_dir, "/state", tol, &worst_state);
    // The same streams read to the same place: the data cursors are identical.
    const auto cursor_acc = checkpoint_tensors(acc_dir, "/data"), cursor_big = checkpoint_tensors(big_dir, "/data");
    ASSERT_EQ(cursor_acc.size(), cursor_big.size());
    for (size_t i = 0; i < cursor_acc.size(); ++i)
      if (cursor_acc[i].first == "/data/cursor") {
        EXPECT_EQ(cursor_acc[i].second, cursor_big[i].second) << variant;
      }
    std::printf("%-15s worst relative difference vs batch 4: loss %.2e, gradient norm %.2e, parameters %.2e, "
                "carried state %.2e (tolerance %.2e)\n", variant.c_str(), worst_loss, worst_norm, worst_param,
                worst_state, tol);
  }
  fs::remove_all(dir);
}

TEST(GradAccum, BlockStateTransformersMatchTheBigBatch) {
  // BST carries its S4D state (doubles) or the previous segment's inputs per stream too
  // (docs/bst.md); the groups keep them like any carried tensor.
  const double tol = reordered_sum_tolerance();
  for (const std::string variant : {"bst:sh:s4d", "bst:mf:unstructured"}) {
    const auto big = train(tp_run(variant, 4, kSteps));
    const auto acc = train(tp_run(variant, 2, kSteps, {"train.grad_accum=2"}));
    expect_steps_close(acc.losses, big.losses, tol, variant + " loss");
    expect_steps_close(acc.grad_norms, big.grad_norms, tol, variant + " gradient norm");
  }
}

TEST(GradAccum, ThreeMicroStepsOfOneStreamMatchThreeStreams) {
  const double tol = reordered_sum_tolerance();
  const auto big = train(small_run("rec:fixed:skip", 3, kSteps, {"optim.kind=adafactor"}));
  const auto acc = train(small_run("rec:fixed:skip", 1, kSteps, {"optim.kind=adafactor", "train.grad_accum=3"}));
  expect_steps_close(acc.losses, big.losses, tol, "loss");
  expect_steps_close(acc.grad_norms, big.grad_norms, tol, "gradient norm");
}

TEST(GradAccum, TheStepGuardSkipsTheWholeStep) {
  // A non-finite gradient at step 3 (launch/process/fault_injection.h): the step is skipped with
  // all its micro-steps, and the steps around it still match the big batch.
  launch::TrainOptions big, acc;
  big.config = small_run("rec:lstm:dual", 4, kSteps);
  acc.config = small_run("rec:lstm:dual", 2, kSteps, {"train.grad_accum=2"});
  for (auto* o : {&big, &acc}) {
    o->quiet = true;
    o->faults = launch::FaultInjection("nonfinite@step=3");
  }
  const auto b = launch::run_training(big), a = launch::run_training(acc);
  EXPECT_EQ(b.skipped_steps, 1);
  EXPECT_EQ(a.skipped_steps, 1);
  ASSERT_EQ(a.losses.size(), size_t(kSteps - 1));
  expect_steps_close(a.losses, b.losses, reordered_sum_tolerance(), "loss");
}

// Trains `first` steps into `dir` with `first_keys`, then resumes to `total` with `then_keys`.
std::vector<double> split_run(const std::string& dir, int first_batch, const std::vector<std::string>& first_keys,
                              int then_batch, const std::vector<std::string>& then_keys, int first, int total) {
  // The first part stops early but keeps the whole run's learning-rate schedule.
  std::vector<std::string> common = {"optim.kind=adafactor", "optim.total_steps=" + std::to_string(total),
                                     "checkpoint.dir=" + dir};
  auto part1 = common, part2 = common;
  part1.insert(part1.end(), first_keys.begin(), first_keys.end());
  part2.insert(part2.end(), then_keys.begin(), then_keys.end());
  part2.push_back("checkpoint.resume=true");
  train(small_run("rec:lstm:dual", first_batch, first, part1));
  return train(small_run("rec:lstm:dual", then_batch, total, part2)).losses;
}

TEST(GradAccum, ResumesBitExactly) {
  constexpr int kFirst = 4, kTotal = 8;
  const std::string dir = shared_temp_dir("accum_resume");
  const std::vector<std::string> accum = {"train.grad_accum=2"};
  const auto straight = train(small_run("rec:lstm:dual", 2, kTotal,
                                        {"optim.kind=adafactor", "optim.total_steps=8", "train.grad_accum=2"}));
  const auto resumed = split_run(dir + "/accum", 2, accum, 2, accum, kFirst, kTotal);
  ASSERT_EQ(resumed.size(), size_t(kTotal - kFirst));
  const std::vector<double> tail(straight.losses.begin() + kFirst, straight.losses.end());
  EXPECT_TRUE(bit_identical(resumed, tail));
  for (size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(resumed[i], tail[i]) << "step " << kFirst + 1 + i;
  fs::remove_all(dir);
}

TEST(GradAccum, ABigBatchCheckpointResumesUnderAccumulation) {
  // The groups' carried state is saved as the [B·M, ...] state of train.batch = B·M, so either
  // run resumes the other's checkpoint on the same streams and loss curve.
  constexpr int kFirst = 4, kTotal = 8;
  const std::string dir = shared_temp_dir("accum_cross");
  const auto straight = train(small_run("rec:lstm:dual", 4, kTotal, {"optim.kind=adafactor", "optim.total_steps=8"}));
  const std::vector<double> tail(straight.losses.begin() + kFirst, straight.losses.end());
  const auto big_then_accum = split_run(dir + "/big-then-accum", 4, {}, 2, {"train.grad_accum=2"}, kFirst, kTotal);
  const auto accum_then_big = split_run(dir + "/accum-then-big", 2, {"train.grad_accum=2"}, 4, {}, kFirst, kTotal);
  expect_steps_close(big_then_accum, tail, reordered_sum_tolerance(), "batch 4 then batch 2 x 2");
  expect_steps_close(accum_then_big, tail, reordered_sum_tolerance(), "batch 2 x 2 then batch 4");
  fs::remove_all(dir);
}

std::string refusal(const std::vector<std::string>& keys) {
  try {
    small_run("rec:fixed:skip", 2, 1, keys);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(GradAccum, RefusesBadValuesNamingTheKey) {
  EXPECT_NE(refusal({"train.grad_accum=0"}).find("train.grad_accum"), std::string::npos);
  EXPECT_NE(refusal({"train.grad_accum=-2"}).find("train.grad_accum"), std::string::npos);
  const std::string overflow = refusal({"train.batch=1073741824", "train.grad_accum=4"});
  EXPECT_NE(overflow.find("train.grad_accum"), std::string::npos) << overflow;
  EXPECT_EQ(refusal({"train.grad_accum=3"}), "");
}

TEST(GradAccum, CudaGraphsStepAsideNamingTheKey) {
  launch::TrainConfig t;
  t.device = "cuda";
  t.grad_accum = 2;
  const std::string why = launch::step_capture_obstacle(t, 1, 1);
  if (!launch::cuda_backend_built()) {
    EXPECT_NE(why.find("no CUDA backend"), std::string::npos);
    return;
  }
  EXPECT_NE(why.find("train.grad_accum > 1"), std::string::npos) << why;
}

}  // namespace
}  // namespace brt::testing
