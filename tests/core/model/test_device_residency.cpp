// Device residency of the model (docs/gpu.md, "Device residency"): every buffer of
// Model lives in the backend's memory and the host only touches it through the Memory's
// copies. Run on the GuardedBackend (CPU kernels over memory the host cannot access outside a
// kernel call: a stray host dereference is a SIGSEGV), a few training steps — with a carried
// state snapshot/restore, row losses and logits copied out — must give results bit-identical
// to the plain CPU backend's from the same initialisation. BST variants (every SSM kind, the
// carry on, a document start mid-run) included: their SSM's kernel generation (S4D modes or
// the implicit filter network) runs as backend calls too, and no step copies more than its
// inputs between host and backend memory. Tensor
// parallelism on such memory: tests/core/tp/test_tp_device_residency.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/model.h"
#include "kernels/backend.h"
#include "model_test_util.h"
#include "tests/common/bit_identical.h"
#include "tests/common/guarded_backend.h"

namespace brt::testing {
namespace {

// Everything a short run exposes to the host.
struct RunResult {
  std::vector<double> nats;
  std::vector<int64_t> counts;
  std::vector<std::vector<float>> row_losses;       // per step
  std::vector<float> logits;                        // forward_logits of a side batch
  std::vector<std::vector<float>> carried_mid;      // snapshot after step 2
  std::vector<std::vector<float>> carried_end;      // after the last step
  std::vector<std::vector<float>> grads;            // per parameter, after the last backward
  std::vector<std::vector<float>> values;           // per parameter (unchanged: no optimizer)
};

// `allocated` (optional) reports the backend memory's bytes handed out so far: the run checks
// that nothing is allocated after the first step (memory planned up front).
// `transferred` (optional) reports the bytes copied between host and backend memory so far:
// a steady-state step (forward + backward) may copy in its tokens, targets, mask and document
// starts and a few scalars per layer, nothing parameter- or activation-sized (no
// per-step host round trip in any variant).
RunResult run(kernels::Backend<float>& backend, const std::string& variant,
              const std::function<std::size_t()>& allocated = {},
              const std::function<std::size_t()>& transferred = {}) {
  constexpr int B = 2;
  core::ModelConfig cfg = tiny_config(variant);
  if (variant.rfind("bst:", 0) == 0) {  // BST layer 0 (model.md §7), small SSM state and MF context
    cfg.ssm_state = 8;
    cfg.ctx_states = 4;
  }
  core::Model<float> model(cfg, B, backend);
  model.params().initialize(17);
  std::mt19937_64 rng(23);
  const int N = model.config().seq_len, V = model.config().vocab;
  const std::vector<RandomBatch> batches = {random_batch(B, N, V, rng, {1, 1}),
                                            random_batch(B, N, V, rng, {0, 1}),
                                            random_batch(B, N, V, rng, {0, 0})};
  const RandomBatch side = random_batch(B, N, V, rng, {0, 1});
  RunResult r;
  std::size_t after_first_step = 0;
  for (size_t step = 0; step < batches.size(); ++step) {
    if (step == 1 && allocated) after_first_step = allocated();
    if (step == 2) {
      // An evaluation-like detour: snapshot, run something else, restore, continue.
      r.carried_mid = model.snapshot_carried_state();
      const float* logits = model.forward_logits(side.view());
      r.logits = kernels::copy_to_host(model.memory(), logits, size_t(B) * N * V);
      model.restore_carried_state(r.carried_mid);
    }
    model.params().zero_grads();
    const std::size_t moved_before = transferred ? transferred() : 0;
    const core::LossSums sums = model.forward(batches[step].view(), 1.0f / float(B * N));
    model.backward();
    if (transferred && step == 1) {
      const std::size_t moved = transferred() - moved_before;
      const std::size_t inputs = std::size_t(B) * N * 9 + B;  // int32 ids, targets; mask; starts
      EXPECT_LE(moved, inputs + 64 * std::size_t(model.config().layers) + 256)
          << variant << ": a training step copied " << moved
          << " bytes between host and backend memory (its inputs are " << inputs << ")";
    }
    r.nats.push_back(sums.nats);
    r.counts.push_back(sums.count);
    r.row_losses.push_back(model.row_losses());
  }
  if (allocated) {
    EXPECT_EQ(allocated(), after_first_step) << variant << ": backend memory allocated in the step loop";
  }
  r.carried_end = model.snapshot_carried_state();
  for (int i = 0; i < model.params().size(); ++i) {
    r.grads.push_back(model.params().grad_to_host(i));
    r.values.push_back(model.params().value_to_host(i));
  }
  return r;
}

class DeviceResidency : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceResidency, GuardedMemoryRunIsBitIdenticalToTheCpuBackend) {
  auto cpu = kernels::make_cpu_backend<float>();
  GuardedBackend<float> guarded;
  const RunResult want = run(*cpu, GetParam());
  const RunResult got =
      run(guarded, GetParam(), [&guarded] { return guarded.guarded_memory().bytes_allocated(); },
          [&guarded] { return guarded.guarded_memory().host_transfer_bytes(); });
  ASSERT_EQ(want.nats.size(), got.nats.size());
  for (size_t s = 0; s < want.nats.size(); ++s) {
    EXPECT_EQ(0, std::memcmp(&want.nats[s], &got.nats[s], sizeof(double))) << "loss of step " << s;
    EXPECT_EQ(want.counts[s], got.counts[s]);
    EXPECT_GT(want.nats[s], 0.0);
  }
  expect_bit_identical(want.row_losses, got.row_losses, "row losses of step");
  expect_bit_identical({want.logits}, {got.logits}, "forward_logits");
  expect_bit_identical(want.carried_mid, got.carried_mid, "carried state snapshot");
  expect_bit_identical(want.carried_end, got.carried_end, "final carried state");
  expect_bit_identical(want.grads, got.grads, "gradient of parameter");
  expect_bit_identical(want.values, got.values, "value of parameter");
  // The run did something: some carried state and gradients are non-zero.
  double g = 0, c = 0;
  for (const auto& v : got.grads)
    for (float x : v) g += double(x) * x;
  for (const auto& v : got.carried_end)
    for (float x : v) c += double(x) * x;
  EXPECT_GT(g, 0.0);
  EXPECT_GT(c, 0.0);
}

// The step as device work alone (Model::stage_step / stage_loss_scale / device_work / step_nats,
// what a CUDA graph captures: launch/train/step_graphs.h): bit-identical to forward + backward, and
// the device work copies nothing between host and backend memory — every host decision was
// staged before it.
TEST_P(DeviceResidency, DeviceStepCopiesNothingAndMatchesForwardBackward) {
  constexpr int B = 2;
  core::ModelConfig cfg = tiny_config(GetParam());
  if (GetParam().rfind("bst:", 0) == 0) {
    cfg.ssm_state = 8;
    cfg.ctx_states = 4;
  }
  GuardedBackend<float> plain, staged;
  core::Model<float> a(cfg, B, plain), b(cfg, B, staged);
  a.params().initialize(29);
  b.params().initialize(29);
  std::mt19937_64 rng(31);
  const int N = a.config().seq_len, V = a.config().vocab;
  for (const std::vector<uint8_t>& starts : {std::vector<uint8_t>{1, 1}, {0, 1}, {0, 0}, {1, 0}}) {
    const RandomBatch batch = random_batch(B, N, V, rng, starts);
    a.params().zero_grads();
    b.params().zero_grads();
    const core::LossSums want = a.forward(batch.view(), 0.03125f);
    a.backward();
    EXPECT_EQ(b.stage_step(batch.view()), want.count);
    b.stage_loss_scale(0.03125f);  // a device scalar: one graph serves every scale
    const std::size_t before = staged.guarded_memory().host_transfer_bytes();
    b.device_work();
    EXPECT_EQ(staged.guarded_memory().host_transfer_bytes(), before)
        << GetParam() << ": the device step copied between host and backend memory";
    const double nats = b.step_nats();
    EXPECT_EQ(0, std::memcmp(&want.nats, &nats, sizeof(double))) << GetParam() << " loss";
  }
  std::vector<std::vector<float>> ga, gb;
  for (int i = 0; i < a.params().size(); ++i) {
    ga.push_back(a.params().grad_to_host(i));
    gb.push_back(b.params().grad_to_host(i));
  }
  expect_bit_identical(ga, gb, "gradient of parameter");
  expect_bit_identical(a.snapshot_carried_state(), b.snapshot_carried_state(), "carried state");
}

INSTANTIATE_TEST_SUITE_P(Variants, DeviceResidency,
                         ::testing::Values("slide", "xl", "rec:fixed:skip", "rec:lstm:dual",
                                           "feedback:lstm:dual", "bst:sh:s4d",
                                           "bst:sh:unstructured", "bst:mh:s4d",
                                           "bst:mh:unstructured", "bst:mf:s4d",
                                           "bst:mf:unstructured"),
                         variant_name);

// The guard itself: touching guarded memory from the host outside a kernel faults, and a
// kernel given a host pointer (invalid on a GPU) is an error.
TEST(GuardedMemoryDeathTest, HostAccessOutsideAKernelFaults) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  GuardedBackend<float> guarded;
  kernels::Buffer<float> buffer(guarded.memory(), 16, "probe");
  guarded.fill(buffer.data(), 16, 2.0f);  // a kernel may write it
  EXPECT_EQ(buffer.to_host()[3], 2.0f);   // and a copy may read it
  std::vector<float> host(16);
  EXPECT_THROW(guarded.copy(buffer.data(), 16, host.data()), std::logic_error);  // host pointer
  EXPECT_DEATH(
      {
        volatile float* p = buffer.data();
        p[0] = 1.0f;
      },
      "");
}

// The SSM carry off (every segment from zero state) on both SSM kernels.
TEST(DeviceResidencyBst, WithoutCarryIsBitIdenticalToTheCpuBackend) {
  for (const char* variant : {"bst:sh:s4d", "bst:mf:unstructured"}) {
    core::ModelConfig cfg = tiny_config(variant);
    cfg.ssm_state = 8;
    cfg.ctx_states = 4;
    cfg.ssm_carry = false;
    auto cpu = kernels::make_cpu_backend<float>();
    GuardedBackend<float> guarded;
    std::mt19937_64 rng(5);
    const RandomBatch batch = random_batch(2, cfg.seq_len, cfg.vocab, rng, {0, 1});
    std::vector<std::vector<float>> grads[2];
    int which = 0;
    for (kernels::Backend<float>* be : {static_cast<kernels::Backend<float>*>(cpu.get()),
                                        static_cast<kernels::Backend<float>*>(&guarded)}) {
      core::Model<float> model(cfg, 2, *be);
      model.params().initialize(3);
      for (int step = 0; step < 2; ++step) {
        model.params().zero_grads();
        model.forward(batch.view(), 0.0625f);
        model.backward();
      }
      for (int i = 0; i < model.params().size(); ++i)
        grads[which].push_back(model.params().grad_to_host(i));
      ++which;
    }
    expect_bit_identical(grads[0], grads[1], std::string(variant) + " gradient of parameter");
  }
}

}  // namespace
}  // namespace brt::testing
