// The optimizer's statistics under tensor parallelism summed where they live
// (StatReducer::reduce_on_device; docs/gpu.md, "The optimizer's statistics across ranks"): the
// TP reducer gathers the partial entries into one run, all-reduces it with the TP group's
// collectives on the optimizer's memory and puts it back, instead of a host round trip per
// statistic. On the CPU both paths are the same MPI sum of the same doubles, so the contract is
// bit for bit: the grad norms, the weights and the optimizer state after four steps equal the
// host path's, for AdamW and Adafactor (every matrix factored: R, C and pieces-split axes), at
// (DP, TP) = (1, world) and with 4 ranks (2, 2) with ZeRO-1; and the step enqueued without
// waiting for its norm (stage_step / enqueue_step / finish_step), which the trainer now takes
// under TP, equals step() bit for bit. (test_tp_adafactor.cpp holds every path to the one-process
// update.)
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/optim/optimizer.h"
#include "data/batch.h"
#include "tests/core/tp/tp_test_util.h"

namespace brt::testing {
namespace {

constexpr uint64_t kDataSeed = 11;
constexpr int kSteps = 4;

// The TP reducer seen as one that sums on the host only: the optimizer takes its host path.
class HostOnly final : public core::StatReducer {
 public:
  explicit HostOnly(core::StatReducer& inner) : inner_(inner) {}
  void reduce(core::StatKind kind, std::span<double> sums, std::span<const core::StatBlock> blocks) override {
    inner_.reduce(kind, sums, blocks);
  }

 private:
  core::StatReducer& inner_;
};

enum class Path { kHost, kDevice, kEnqueued };

struct Outcome {
  std::vector<double> norms;
  std::vector<std::vector<float>> values, state;  // this rank's own, unsummed
};

Outcome run(const std::string& optim, const parallel::ProcessGroups& groups, bool zero, Path path) {
  std::vector<std::string> keys = {"optim.kind=" + optim, "optim.lr=0.05", "optim.clip_norm=0.5"};
  if (optim == "adafactor") keys.push_back("optim.min_dim_to_factor=8");
  const launch::RunConfig cfg = tp_run("rec:lstm:dual", rank_streams(&groups), kSteps, keys);
  TpRankRun<float> r(cfg, &groups, kDataSeed, core::DpSettings{false, 4.0, zero});
  auto optimizer = core::make_optimizer(cfg.optim, r.model.params(), r.dpx ? r.dpx->owned_mask() : std::vector<bool>{});
  core::TensorParallelStatReducer<float> reducer(r.model.params(), r.tp);
  HostOnly host(reducer);
  optimizer->set_reducer(path == Path::kHost ? static_cast<core::StatReducer*>(&host) : &reducer);
  EXPECT_EQ(optimizer->device_steps(), path != Path::kHost);
  Outcome out;
  data::Batch batch;
  for (int step = 0; step < kSteps; ++step) {
    forward_backward(r.model, r.source, batch, r.dpx.get());
    if (path == Path::kEnqueued) {
      optimizer->stage_step();
      optimizer->enqueue_step();
      const core::StepStats s = optimizer->finish_step();
      EXPECT_TRUE(s.applied) << "step " << step;
      out.norms.push_back(s.grad_norm);
    } else {
      out.norms.push_back(optimizer->step().grad_norm);
    }
    if (r.dpx) r.dpx->after_update();
  }
  for (const auto& p : r.model.params().params()) out.values.emplace_back(p.value, p.value + p.numel());
  for (const auto& s : optimizer->state())
    if (s.data != nullptr) out.state.emplace_back(s.data, s.data + s.numel());
  return out;
}

void expect_same(const Outcome& got, const Outcome& want, const std::string& where) {
  EXPECT_EQ(got.norms, want.norms) << where << ": grad norms";
  ASSERT_EQ(got.values.size(), want.values.size()) << where;
  for (size_t p = 0; p < want.values.size(); ++p) EXPECT_EQ(got.values[p], want.values[p]) << where << ": parameter " << p;
  ASSERT_EQ(got.state.size(), want.state.size()) << where;
  for (size_t k = 0; k < want.state.size(); ++k) EXPECT_EQ(got.state[k], want.state[k]) << where << ": state " << k;
}

TEST(TpDeviceStats, SummedWhereTheyLiveEqualTheHostRoundTripBitForBit) {
  for (const std::string optim : {"adamw", "adafactor"}) {
    for (const TpLayout& layout : tp_layouts()) {
      const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, layout.tp);
      const std::string where = optim + " TP " + std::to_string(layout.tp) + (layout.zero ? " ZeRO-1" : "");
      const Outcome host = run(optim, groups, layout.zero, Path::kHost);
      ASSERT_EQ(host.norms.size(), size_t(kSteps));
      EXPECT_GT(host.norms[0], 0.5) << where << ": clipping is exercised";
      expect_same(run(optim, groups, layout.zero, Path::kDevice), host, where + " (summed on the device)");
      expect_same(run(optim, groups, layout.zero, Path::kEnqueued), host, where + " (enqueued)");
    }
  }
}

}  // namespace
}  // namespace brt::testing
