// Host-side behaviour that needs no GPU (runs everywhere, including CI): the device query
// never crashes, the arena planner's offsets, and precision names. The arena's allocation
// paths run on a GPU only.
#include <stdexcept>

#include "tests/cuda/cuda_test_util.h"

namespace brt::kernels::cuda::test {
namespace {

TEST(CudaHost, DeviceCountIsANumberEvenWithoutADriver) {
  const int count = cuda_device_count();
  EXPECT_GE(count, 0);
  EXPECT_EQ(cuda_device_count(), count);  // a second query after a failed one still works
  if (count == 0) {
    EXPECT_THROW(make_cuda_backend(), std::runtime_error);
    EXPECT_THROW(select_device_for_local_rank(3), std::runtime_error);
  }
}

TEST(CudaHost, ArenaPlanAlignsEveryBuffer) {
  ArenaPlan plan;
  EXPECT_EQ(plan.add("a", 10), 0u);
  EXPECT_EQ(plan.add_array<float>("b", 100), kArenaAlignment);
  EXPECT_EQ(plan.add("c", 1), kArenaAlignment + align_up(400));
  EXPECT_EQ(plan.total_bytes(), kArenaAlignment + align_up(400) + kArenaAlignment);
  EXPECT_NE(plan.describe().find("b: 400 bytes"), std::string::npos);
}

TEST(CudaHost, EmptyArenaRefusesAllocationsWithItsName) {
  DeviceArena arena(0, "empty arena");
  try {
    arena.allocate(16, "probe");
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("empty arena"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("probe"), std::string::npos);
  }
}

TEST(CudaHost, PrecisionNamesRoundTrip) {
  EXPECT_EQ(parse_precision("bf16"), Precision::kBf16);
  EXPECT_EQ(parse_precision(precision_name(Precision::kFp32)), Precision::kFp32);
  EXPECT_THROW(parse_precision("fp16"), std::runtime_error);
}

class CudaArenaTest : public CudaTest {};

TEST_F(CudaArenaTest, AllocationsAreAlignedAndBounded) {
  DeviceArena arena(1000, "small");
  void* a = arena.allocate(10, "a");
  void* b = arena.allocate(10, "b");
  EXPECT_EQ(static_cast<char*>(b) - static_cast<char*>(a), static_cast<long>(kArenaAlignment));
  EXPECT_THROW(arena.allocate(1000, "too big"), std::runtime_error);
  arena.reset();
  EXPECT_EQ(arena.allocate(10, "again"), a);
}

}  // namespace
}  // namespace brt::kernels::cuda::test
