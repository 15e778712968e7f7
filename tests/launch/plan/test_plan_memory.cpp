// The planner's memory prediction (launch/plan/planner.h) against what a real run
// allocates, for 9 configs × 4 layouts ((TP, DP) = (1, 1), (1, 2) and (2, 1), (2, 2); DP = 2 with
// ZeRO-1, each rank's optimizer built in-process with that rank's ownership mask, as
// core/data_parallel.cpp does; TP = 2: TP rank 0's sharded model built in-process over a
// group that must not communicate), and for the variants context parallelism splits 3 more
// ((TP, DP x CP, CP) = (1, 2, 2), (2, 2, 2), (1, 4, 4): chunk 0 of each segment):
//  - the shapes the planner derives from model.md §9 equal the ParamStore's, in order;
//  - each category equals Model::memory_report() / the optimizer's allocated state exactly
//    (TP = 2 included), and the total is within 5% (the bound);
//  - Model::memory_report() plus the optimizer state is checked against the bytes actually
//    handed out while the model and optimizer were built (a counting operator new plus the
//    backend memory's allocations, counted by a CountingMemory), so the report itself is not
//    taken on trust.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <new>
#include <tuple>

#include "core/sharding/context_parallel.h"
#include "core/data_parallel.h"
#include "core/model.h"
#include "core/optim/optimizer.h"
#include "core/sharding/tensor_parallel.h"
#include "kernels/backend.h"
#include "launch/config/config.h"
#include "launch/plan/planner.h"
#include "parallel/communicator.h"
#include "tests/common/guarded_backend.h"

namespace {
std::atomic<long long> g_live_bytes{0};
constexpr std::size_t kHeader = 16;  // keeps malloc's 16-byte alignment
}  // namespace

// Counting replacements: every operator new records its size in a header so delete can
// subtract it; live bytes = allocated - freed.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  auto* p = static_cast<unsigned char*>(std::malloc(n + kHeader));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, &n, sizeof n);
  g_live_bytes.fetch_add(static_cast<long long>(n), std::memory_order_relaxed);
  return p + kHeader;
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* q) noexcept {
  if (q == nullptr) return;
  // Integer arithmetic: the header lies before the pointer operator new returned.
  auto* p = reinterpret_cast<unsigned char*>(reinterpret_cast<std::uintptr_t>(q) - kHeader);
  std::size_t n = 0;
  std::memcpy(&n, p, sizeof n);
  g_live_bytes.fetch_sub(static_cast<long long>(n), std::memory_order_relaxed);
  std::free(p);
}
void operator delete[](void* q) noexcept { operator delete(q); }
void operator delete(void* q, std::size_t) noexcept { operator delete(q); }
void operator delete[](void* q, std::size_t) noexcept { operator delete(q); }

namespace brt::launch {
namespace {

// A tensor-parallel group seen from one rank, for building a TP rank's model in-process:
// building a model and its optimizer must not communicate, so every collective is an error.
class SilentGroup final : public parallel::Communicator {
 public:
  SilentGroup(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  int world_rank_of(int group_rank) const override { return group_rank; }
  uint64_t sequence() const override { return 0; }

 protected:
  parallel::Request start_all_reduce(const void*, void*, int64_t, parallel::DataType, parallel::ReduceOp,
                                     parallel::Stream) override { return fail(); }
  parallel::Request start_reduce_scatter(const void*, void*, int64_t, parallel::DataType,
                                         parallel::ReduceOp, parallel::Stream) override { return fail(); }
  parallel::Request start_all_gather(const void*, void*, int64_t, parallel::DataType,
                                     parallel::Stream) override { return fail(); }
  parallel::Request start_broadcast(void*, int64_t, parallel::DataType, int, parallel::Stream) override {
    return fail();
  }
  parallel::Request start_barrier(parallel::Stream) override { return fail(); }

 private:
  static parallel::Request fail() { throw std::logic_error("SilentGroup: a collective while building"); }
  int rank_, size_;
  std::string name_ = "tp (silent)";
};

struct Case {
  const char* name;
  const char* config;
  std::vector<std::string> overrides;
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

class PlanMemory : public ::testing::TestWithParam<Case> {};

void expect_within_5_percent(double predicted, double measured, const std::string& what) {
  ASSERT_GT(measured, 0) << what;
  EXPECT_LE(std::abs(predicted / measured - 1.0), 0.05)
      << what << ": predicted " << predicted << " bytes, measured " << measured;
}

TEST_P(PlanMemory, PredictionMatchesAllocationForDpTpAndZero1) {
  const RunConfig rc = load_run_config(GetParam().config, GetParam().overrides);
  core::ModelConfig cfg = rc.model;
  cfg.resolve();
  const int B = rc.train.batch;
  auto cpu = kernels::make_cpu_backend<float>();
  brt::testing::CountingMemory backend_memory;  // the model's buffers are allocated here
  brt::testing::ForwardingBackend<float> backend(*cpu, backend_memory);

  // (TP, DP, CP): TP = 2 layouts build TP rank 0's slices in-process (rank 1's are the same
  // size); CP layouts (the variants that split) chunk 0 of the segment, dp then being the dp
  // group's DP x CP (rank 1's buffers are the same size).
  std::vector<std::tuple<int, int, int>> layouts = {{1, 1, 1}, {1, 2, 1}, {2, 1, 1}, {2, 2, 1}};
  if (core::context_parallel_problem(cfg, 4).empty())
    layouts.insert(layouts.end(), {{1, 2, 2}, {2, 2, 2}, {1, 4, 4}});
  for (const auto& [tp, dp, cp] : layouts) {
    SilentGroup group(0, tp), cp_group(0, cp);
    const core::TensorParallel tpx = tp > 1 ? core::TensorParallel(group) : core::TensorParallel();
    const core::ContextParallel cpx = cp > 1 ? core::ContextParallel(cp_group) : core::ContextParallel();
    for (int rank = 0; rank < dp; ++rank) {
      SCOPED_TRACE("tp " + std::to_string(tp) + " dp " + std::to_string(dp) + " cp " + std::to_string(cp) +
                   " rank " + std::to_string(rank));
      const long long before = g_live_bytes.load() + backend_memory.live_bytes();
      core::Model<float> model(cfg, B, backend, tpx, cpx);
      std::vector<bool> owned;
      if (dp > 1) {
        std::vector<int64_t> numels;
        for (const auto& p : model.params().params()) numels.push_back(p.numel());
        const core::ParamPartition part = core::partition_parameters(numels, dp);
        owned.assign(numels.size(), false);
        for (size_t p = 0; p < numels.size(); ++p) owned[p] = part.owner[p] == rank;
      }
      auto optimizer = core::make_optimizer(rc.optim, model.params(), owned);
      const double heap = double(g_live_bytes.load() + backend_memory.live_bytes() - before);

      // Shapes: the planner's model.md §9 list is the store's, in declaration order, and so are
      // the TP split axes.
      const auto shapes = model_param_shapes(cfg);
      const auto split = model_param_split_dims(cfg);
      ASSERT_EQ(shapes.size(), size_t(model.params().size()));
      for (size_t p = 0; p < shapes.size(); ++p) {
        const core::ParamSpec& spec = model.params()[int(p)].spec;
        ASSERT_EQ(shapes[p], spec.shape) << spec.name;
        if (tp > 1) {
          EXPECT_EQ(split[p], spec.shard.sharded() ? spec.shard.dim : -1) << spec.name;
        }
      }

      const MemoryPrediction pred = predict_rank_memory(cfg, rc.optim, B, dp, dp > 1, rank, 4, tp, cp);
      const core::DpMemoryReport measured = core::rank_memory_report(model, *optimizer, owned);
      EXPECT_EQ(pred.parameters, measured.parameters);
      EXPECT_EQ(pred.gradients, measured.gradients);
      EXPECT_EQ(pred.optimizer, measured.optimizer);
      EXPECT_EQ(pred.optimizer, optimizer->state_elems_allocated() * int64_t(sizeof(float)));
      EXPECT_EQ(pred.activations, measured.activations);
      EXPECT_EQ(pred.carried_state, measured.carried_state);
      EXPECT_EQ(pred.backward_scratch, measured.backward_scratch);
      EXPECT_EQ(pred.total(), measured.total());
      // The heap saw every buffer the constructors allocated: the report's buffers, the
      // recurrent backward scratch it does not list, the optimizer's step scratch and small
      // bookkeeping (names, vectors of pointers).
      std::printf("%s tp %d dp %d cp %d rank %d: planner %lld B (act %lld scratch %lld), memory_report+optimizer "
                  "%lld B (act %lld scratch %lld), heap %.0f B (%+.2f%%)\n",
                  GetParam().name, tp, dp, cp, rank, static_cast<long long>(pred.total()),
                  static_cast<long long>(pred.activations), static_cast<long long>(pred.backward_scratch),
                  static_cast<long long>(measured.total()), static_cast<long long>(measured.activations),
                  static_cast<long long>(measured.backward_scratch), heap,
                  100.0 * (double(pred.total()) / heap - 1.0));
      expect_within_5_percent(double(pred.total()), heap, "planner vs heap");
      expect_within_5_percent(double(measured.total()), heap, "memory_report vs heap");
      if (dp > 1) {
        EXPECT_LT(pred.optimizer, predict_rank_memory(cfg, rc.optim, B, 1, false, 0, 4, tp, cp).optimizer);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Configs, PlanMemory,
    ::testing::Values(Case{"tiny", "configs/tiny.toml", {}},
                      Case{"bench_small", "configs/bench-small.toml", {}},
                      Case{"lstm_dual_adamw", "configs/tiny.toml",
                           {"model.variant=rec:lstm:dual", "optim.kind=adamw", "optim.lr=0.001", "optim.min_lr=0.0001",
                            "model.d_model=256", "model.layers=3", "train.batch=2"}},
                      Case{"feedback_lstm_dual", "configs/tiny.toml",
                           {"model.variant=feedback:lstm:dual", "model.layers=3", "model.recurrent_layers=[1]"}},
                      Case{"slide", "configs/tiny.toml", {"model.variant=slide", "model.layers=2"}},
                      Case{"bst_sh_s4d", "configs/tiny.toml", {"model.variant=bst:sh:s4d", "model.layers=2"}},
                      Case{"xl_4_blocks", "configs/tiny.toml", {"model.variant=xl", "model.layers=2"}},
                      Case{"bst_mf_s4d", "configs/tiny.toml", {"model.variant=bst:mf:s4d", "model.layers=2"}},
                      Case{"bst_mh_s4d_carry_off", "configs/tiny.toml",
                           {"model.variant=bst:mh:s4d", "model.layers=2", "model.ssm_carry=false"}},
                      Case{"bst_mh_unstructured", "configs/tiny.toml",
                           {"model.variant=bst:mh:unstructured", "model.layers=2"}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace brt::launch
