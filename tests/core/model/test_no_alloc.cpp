// Memory is planned up front: after the first step (which may grow kernel
// workspaces once), a training step — forward, backward, optimizer — allocates nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/model.h"
#include "core/optim/optimizer.h"
#include "kernels/backend.h"
#include "model_test_util.h"

#include "tests/common/allocation_counter.h"

namespace brt::testing {
namespace {

class NoAllocation : public ::testing::TestWithParam<std::string> {};

TEST_P(NoAllocation, StepLoopAllocatesNothingAfterTheFirstStep) {
  auto backend = kernels::make_cpu_backend<float>();
  core::ModelConfig cfg = tiny_config(GetParam());
  core::Model<float> model(cfg, 2, *backend);
  model.params().initialize(3);
  core::OptimConfig oc;
  oc.kind = GetParam() == "slide" ? core::OptimKind::kAdamW : core::OptimKind::kAdafactor;
  oc.total_steps = 100;
  auto opt = core::make_optimizer(oc, model.params());
  std::mt19937_64 rng(5);
  RandomBatch a = random_batch(2, cfg.seq_len, cfg.vocab, rng, {1, 1});
  RandomBatch b = random_batch(2, cfg.seq_len, cfg.vocab, rng, {0, 1});
  auto step = [&](const RandomBatch& batch) {
    model.params().zero_grads();
    model.forward(batch.view(), 0.01f);
    model.backward();
    opt->step();
  };
  step(a);
  const long before = brt::testing::heap_allocations().load();
  for (int i = 0; i < 3; ++i) step(i % 2 ? a : b);
  EXPECT_EQ(brt::testing::heap_allocations().load() - before, 0) << "heap allocations inside the step loop";
}

INSTANTIATE_TEST_SUITE_P(Variants, NoAllocation,
                         ::testing::Values("slide", "rec:lstm:dual", "feedback:lstm:dual", "bst:mf:s4d",
                                           "bst:mh:unstructured"),
                         variant_name);

}  // namespace
}  // namespace brt::testing
