// Gradient accumulation across ranks (mpirun -np 2; launch/train/grad_accum.h) against one
// process on the big batch, within reordered_sum_tolerance (tests/launch/accum/accum_test_util.h):
//  - data parallel: train.batch = 1, train.grad_accum = 2 on 2 ranks (overlap on, so the
//    micro-steps' backward hooks are live, and off, bit-identical to on) against train.batch = 4
//    in one process, and against train.batch = 2 on 2 ranks; parameters, carried state and
//    cursor of the final checkpoints too;
//  - tensor parallel (TP = 2) and context parallel (CP = 2): train.batch = 2 x 2 against 4.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/launch/accum/accum_test_util.h"
#include "tests/core/tp/tp_test_util.h"

namespace brt::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kSteps = 5;

TEST(GradAccumParallel, DataParallelMatchesTheBigBatch) {
  ASSERT_EQ(world_size(), 2);
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 1);
  const std::string dir = shared_temp_dir("accum_dp");
  const double tol = reordered_sum_tolerance();
  for (const std::string variant : {"rec:fixed:skip", "slide"}) {
    const std::string ref_dir = dir + "/" + variant + "-one", acc_dir = dir + "/" + variant + "-dp-accum";
    // One process holds all 4 streams (rank 0 keeps its checkpoint to compare with).
    const auto ref = train(small_run(variant, 4, kSteps, {world_rank() == 0 ? "checkpoint.dir=" + ref_dir : "checkpoint.dir="}));
    const auto plain_dp = train(small_run(variant, 2, kSteps), &groups);
    const auto acc = train(small_run(variant, 1, kSteps, {"train.grad_accum=2", "checkpoint.dir=" + acc_dir}), &groups);
    const auto acc_no_overlap = train(small_run(variant, 1, kSteps, {"train.grad_accum=2", "train.overlap=false"}), &groups);
    double worst_loss = 0, worst_norm = 0, worst_param = 0, worst_state = 0;
    expect_steps_close(acc.losses, ref.losses, tol, variant + " loss vs one process", &worst_loss);
    expect_steps_close(acc.grad_norms, ref.grad_norms, tol, variant + " gradient norm vs one process", &worst_norm);
    expect_steps_close(acc.losses, plain_dp.losses, tol, variant + " loss vs batch 2 on 2 ranks", &worst_loss);
    expect_steps_close(acc.grad_norms, plain_dp.grad_norms, tol, variant + " gradient norm vs batch 2 on 2 ranks",
                       &worst_norm);
    EXPECT_TRUE(bit_identical(acc.losses, acc_no_overlap.losses)) << variant << ": overlap on and off differ";
    MPI_Barrier(MPI_COMM_WORLD);  // every checkpoint written
    if (world_rank() == 0) {
      expect_checkpoints_close(acc_dir, ref_dir, "/model", tol, &worst_param);
      expect_checkpoints_close(acc_dir, ref_dir, "/state", tol, &worst_state);
      const auto a = checkpoint_tensors(acc_dir, "/data"), r = checkpoint_tensors(ref_dir, "/data");
      for (size_t i = 0; i < a.size() && i < r.size(); ++i)
        if (a[i].first == "/data/cursor") {
          EXPECT_EQ(a[i].second, r[i].second) << variant << " cursor";
        }
      std::printf("%-15s DP 2 x batch 1 x grad_accum 2 vs one process of 4: worst relative difference loss %.2e, "
                  "gradient norm %.2e, parameters %.2e, carried state %.2e (tolerance %.2e)\n", variant.c_str(),
                  worst_loss, worst_norm, worst_param, worst_state, tol);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) fs::remove_all(dir);
}

// A 2-rank layout (TP or CP) trains train.batch = 2 x grad_accum 2 like train.batch = 4 at the
// same layout, and like one process of 4 streams.
void expect_layout_matches(const parallel::ProcessGroups& groups, const launch::RunConfig& big,
                           const launch::RunConfig& acc, const launch::RunConfig& one, const std::string& what) {
  const double tol = reordered_sum_tolerance();
  const auto b = train(big, &groups), a = train(acc, &groups), o = train(one, nullptr);
  double worst_loss = 0, worst_norm = 0;
  expect_steps_close(a.losses, b.losses, tol, what + " loss", &worst_loss);
  expect_steps_close(a.grad_norms, b.grad_norms, tol, what + " gradient norm", &worst_norm);
  // Against one process the layout itself already differs to float rounding (1e-4 in tests/core/tp).
  expect_steps_close(a.losses, o.losses, 1e-4, what + " loss vs one process");
  if (world_rank() == 0)
    std::printf("%s: batch 2 x grad_accum 2 vs batch 4, worst relative difference loss %.2e, gradient norm %.2e "
                "(tolerance %.2e)\n", what.c_str(), worst_loss, worst_norm, tol);
}

TEST(GradAccumParallel, TensorParallelMatchesTheBigBatch) {
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 2);
  for (const std::string variant : {"rec:lstm:dual", "slide"})
    expect_layout_matches(groups, tp_run(variant, 4, kSteps, {"train.tp=2"}),
                          tp_run(variant, 2, kSteps, {"train.tp=2", "train.grad_accum=2"}),
                          tp_run(variant, 4, kSteps), "TP 2 " + variant);
}

TEST(GradAccumParallel, ContextParallelMatchesTheBigBatch) {
  const auto groups = parallel::make_mpi_process_groups(MPI_COMM_WORLD, 1, {}, 2);
  expect_layout_matches(groups, small_run("slide", 4, kSteps, {"train.cp=2"}),
                        small_run("slide", 2, kSteps, {"train.cp=2", "train.grad_accum=2"}),
                        small_run("slide", 4, kSteps), "CP 2 slide");
}

}  // namespace
}  // namespace brt::testing
