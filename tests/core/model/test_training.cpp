// Training the tiny config on a fixed (synthetic) stream lowers the loss well below its
// start, and two runs with the same seed give bit-identical losses.
#include <gtest/gtest.h>

#include <cmath>

#include "launch/config/config.h"
#include "launch/train/trainer.h"

namespace brt::testing {
namespace {

launch::TrainOptions tiny_run(int steps) {
  launch::TrainOptions o;
  o.config = launch::load_run_config(
      "configs/tiny.toml",
      {"train.steps=" + std::to_string(steps), "train.eval_every=0", "log.metrics_path=",
       "train.peak_gflops=1", "data.source=synthetic", "checkpoint.dir=", "model.vocab=256",
       "train.batch=2", "model.seq_len=128", "optim.warmup=20"});
  o.quiet = true;
  return o;
}

TEST(Training, TinyConfigLossFallsWellBelowItsStart) {
  const launch::TrainResult r = launch::run_training(tiny_run(200));
  ASSERT_EQ(r.losses.size(), 200u);
  double first = 0, last = 0;
  for (int i = 0; i < 10; ++i) first += r.losses[i] / 10, last += r.losses[190 + i] / 10;
  std::printf("tiny: mean loss of the first 10 steps %.4f, of the last 10 %.4f (ln V = %.4f)\n",
              first, last, std::log(256.0));
  EXPECT_NEAR(first, std::log(256.0), 0.5);  // starts near uniform
  EXPECT_LT(last, first - 1.5);              // and learns the chain's structure
}

TEST(Training, SameSeedGivesBitIdenticalLosses) {
  const launch::TrainResult a = launch::run_training(tiny_run(15));
  const launch::TrainResult b = launch::run_training(tiny_run(15));
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t i = 0; i < a.losses.size(); ++i)
    EXPECT_EQ(a.losses[i], b.losses[i]) << "step " << i;  // exact, not approximate
}

}  // namespace
}  // namespace brt::testing
