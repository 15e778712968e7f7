// The planner's memory prediction (launch/planner.h, issue 8 item 4) against what a real run
// allocates, for 3 configs × 2 layouts (DP = 1; DP = 2 with ZeRO-1, each rank's optimizer
// built in-process with that rank's ownership mask, as launch/data_parallel.cpp does):
//  - the shapes the planner derives from MODEL §9 equal the ParamStore's, in order;
//  - each category equals Model::memory_report() / the optimizer's allocated state exactly,
//    and the total is within 5% (the bound);
//  - Model::memory_report() plus the optimizer state is checked against the bytes the heap
//    actually handed out while the model and optimizer were built (a counting operator new),
//    so the report itself is not taken on trust.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/model.h"
#include "core/optimizer.h"
#include "kernels/backend.h"
#include "launch/config.h"
#include "launch/data_parallel.h"
#include "launch/planner.h"

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

TEST_P(PlanMemory, PredictionMatchesAllocationForDp1AndZero1Dp2) {
  const RunConfig rc = load_run_config(GetParam().config, GetParam().overrides);
  core::ModelConfig cfg = rc.model;
  cfg.resolve();
  const int B = rc.train.batch;
  auto backend = kernels::make_cpu_backend<float>();

  for (int dp : {1, 2}) {
    for (int rank = 0; rank < dp; ++rank) {
      SCOPED_TRACE("dp " + std::to_string(dp) + " rank " + std::to_string(rank));
      const long long before = g_live_bytes.load();
      core::Model<float> model(cfg, B, *backend);
      std::vector<bool> owned;
      if (dp > 1) {
        std::vector<int64_t> numels;
        for (const auto& p : model.params().params()) numels.push_back(p.numel());
        const ParamPartition part = partition_parameters(numels, dp);
        owned.assign(numels.size(), false);
        for (size_t p = 0; p < numels.size(); ++p) owned[p] = part.owner[p] == rank;
      }
      auto optimizer = core::make_optimizer(rc.optim, model.params(), owned);
      const double heap = double(g_live_bytes.load() - before);

      // Shapes: the planner's MODEL §9 list is the store's, in declaration order.
      const auto shapes = model_param_shapes(cfg);
      ASSERT_EQ(shapes.size(), size_t(model.params().size()));
      for (size_t p = 0; p < shapes.size(); ++p)
        ASSERT_EQ(shapes[p], model.params()[int(p)].spec.shape) << model.params()[int(p)].spec.name;

      const MemoryPrediction pred = predict_rank_memory(cfg, rc.optim, B, dp, dp > 1, rank);
      const DpMemoryReport measured = rank_memory_report(model, *optimizer, owned);
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
      std::printf("%s dp %d rank %d: planner %lld B, memory_report+optimizer %lld B, heap %.0f B (%+.2f%%)\n",
                  GetParam().name, dp, rank, static_cast<long long>(pred.total()),
                  static_cast<long long>(measured.total()), heap, 100.0 * (double(pred.total()) / heap - 1.0));
      expect_within_5_percent(double(pred.total()), heap, "planner vs heap");
      expect_within_5_percent(double(measured.total()), heap, "memory_report vs heap");
      if (dp > 1) {
        EXPECT_LT(pred.optimizer, predict_rank_memory(cfg, rc.optim, B, 1, false, 0).optimizer);
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
                      Case{"slide", "configs/tiny.toml", {"model.variant=slide", "model.layers=2"}},
                      Case{"bst_sh_s4d", "configs/tiny.toml", {"model.variant=bst:sh:s4d", "model.layers=2"}},
                      Case{"bst_mf_s4d", "configs/tiny.toml", {"model.variant=bst:mf:s4d", "model.layers=2"}},
                      Case{"bst_mh_unstructured", "configs/tiny.toml",
                           {"model.variant=bst:mh:unstructured", "model.layers=2"}}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace brt::launch
