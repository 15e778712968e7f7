// Tensor parallelism on backend memory the host cannot touch (docs/gpu.md, "Device residency";
// docs/parallelism.md, "Tensor parallelism on the GPU"). Under mpirun every rank is one TP
// rank of one replica (TP = world size). The same TP run goes once over the plain CPU backend
// and once over the GuardedBackend (CPU kernels over memory that is PROT_NONE outside kernel
// calls and the Memory's own copies): the collectives then take TensorParallel's staged path
// (Memory::to_host, the MPI collective, Memory::from_host), the vocabulary-parallel
// embedding and cross-entropy run as backend kernels on local token ids, and sequence
// parallelism's row reorderings as backend copy_2d calls. Any host dereference of backend
// memory is a SIGSEGV; every result must be bit-identical to the plain CPU run (the staged
// collective moves the same bytes through the same MPI reduction).
// Variants: rec:fixed:skip (fixed gate: the bias gradient's all-reduce) and rec:lstm:dual
// (LSTM gates' reduce-scatter, the state MLP's add_local_rows), both with Σ split over TP;
// BST variants (the SSM features split over TP: W_dn's input-gradient and W_up's output
// all-reduces, the replicated filter network's gradient all-reduce, the staged kernel
// generation and the carry of this rank's features).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/model.h"
#include "data/batch.h"
#include "kernels/backend.h"
#include "launch/feed/batch_source.h"
#include "parallel/process_groups.h"
#include "tests/common/bit_identical.h"
#include "tests/common/guarded_backend.h"
#include "tests/core/model/model_test_util.h"
#include "tests/core/tp/tp_test_util.h"

namespace brt::testing {
namespace {

constexpr int kStreams = 2;
constexpr int kSteps = 3;

// Everything a short TP run exposes to the host (this rank's shards).
struct TpRunResult {
  std::vector<double> nats;
  std::vector<std::vector<float>> row_losses;  // per step
  std::vector<float> logits;                   // forward_logits of a side batch (this rank's columns)
  std::vector<std::vector<float>> carried;     // after the last step
  std::vector<std::vector<float>> grads;       // per parameter, after the last backward
};

TpRunResult run(kernels::Backend<float>& backend, const core::ModelConfig& cfg,
                const core::TensorParallel& tp, const std::function<size_t()>& allocated = {}) {
  core::Model<float> model(cfg, kStreams, backend, tp);
  model.params().initialize(17);
  const int N = model.config().seq_len, V = model.config().vocab;
  // Every TP rank reads the same streams.
  launch::SyntheticMarkovSource source(V, kStreams, N, 99, 0);
  TpRunResult r;
  data::Batch batch;
  size_t after_first_step = 0;
  for (int step = 0; step < kSteps; ++step) {
    if (step == 1 && allocated) after_first_step = allocated();
    source.next(batch);
    for (size_t i = 0; i < batch.mask.size(); i += 5) batch.mask[i] = 0;  // masked rows too
    if (step == 2) {
      const float* logits = model.forward_logits(
          {batch.inputs.data(), nullptr, nullptr, batch.doc_start.data()});
      r.logits = kernels::copy_to_host(model.memory(), logits,
                                       size_t(kStreams) * N * size_t(model.vocab_range().size()));
    }
    model.params().zero_grads();
    const core::LossSums sums = model.forward(
        {batch.inputs.data(), batch.targets.data(), batch.mask.data(), batch.doc_start.data()},
        1.0f / float(kStreams * N));
    model.backward();
    r.nats.push_back(sums.nats);
    r.row_losses.push_back(model.row_losses());
  }
  if (allocated) {
    EXPECT_EQ(allocated(), after_first_step) << "backend memory allocated in the step loop";
  }
  r.carried = model.snapshot_carried_state();
  for (int i = 0; i < model.params().size(); ++i) r.grads.push_back(model.params().grad_to_host(i));
  return r;
}

class TpDeviceResidency : public ::testing::TestWithParam<std::string> {};

TEST_P(TpDeviceResidency, GuardedMemoryRunIsBitIdenticalToTheCpuBackend) {
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, world_size());
  const core::TensorParallel tp(groups.tp());
  ASSERT_EQ(tp.size(), world_size());
  const core::ModelConfig cfg = tp_run(GetParam(), kStreams, 1).model;
  SCOPED_TRACE("rank " + std::to_string(world_rank()));
  auto cpu = kernels::make_cpu_backend<float>();
  const TpRunResult want = run(*cpu, cfg, tp);
  GuardedBackend<float> guarded;
  const TpRunResult got = run(guarded, cfg, tp,
                              [&] { return guarded.guarded_memory().bytes_allocated(); });
  ASSERT_EQ(got.nats.size(), want.nats.size());
  for (size_t s = 0; s < want.nats.size(); ++s) {
    EXPECT_EQ(got.nats[s], want.nats[s]) << "step " << s;
    EXPECT_GT(want.nats[s], 0.0);
  }
  expect_bit_identical(got.row_losses, want.row_losses, "row losses of step");
  expect_bit_identical({got.logits}, {want.logits}, "side-batch logits");
  expect_bit_identical(got.carried, want.carried, "carried state");
  expect_bit_identical(got.grads, want.grads, "gradient of parameter");
}

INSTANTIATE_TEST_SUITE_P(Variants, TpDeviceResidency,
                         ::testing::Values("rec:fixed:skip", "rec:lstm:dual", "bst:sh:s4d",
                                           "bst:mh:s4d", "bst:mf:unstructured"),
                         variant_name);

}  // namespace
}  // namespace brt::testing
