// Host-side behaviour that needs no GPU (runs everywhere, including CI): the device query
// never crashes, the arena planner's offsets, and precision names. The arena's allocation
// paths run on a GPU only.
#include <stdexcept>

#include "tests/kernels/cuda/cuda_test_util.h"

namespace brt::kernels::cuda::test {
namespace {

TEST(CudaHost, DeviceCountIsANumberEvenWithoutADriver) {
  const int count = cuda_device_count();
  EXPECT_GE(count, 0);
  EXPECT_EQ(cuda_device_count(), count);  // a second query after a failed one still works
  const CudaDeviceQuery query = query_cuda_devices();
  EXPECT_EQ(query.count, count);
  if (!query.error.empty()) {  // the runtime failed: its error is named, never dropped
    EXPECT_EQ(query.error.rfind("cudaError", 0), 0u) << query.error;
    EXPECT_NE(query.describe().find(query.error), std::string::npos);
  }
  if (count == 0) {
    try {
      make_cuda_backend();
      ADD_FAILURE() << "a backend without a device";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(query.describe()), std::string::npos) << e.what();
    }
    EXPECT_THROW(select_device_for_local_rank(3), std::runtime_error);
  }
}

// The device check's first call (scripts/gpu-check.sh preflight): the runtime sees a device, a
// kernel and a cuBLAS product run on it and give the right numbers. Without a device it skips
// naming the CUDA error, or fails under BRT_REQUIRE_GPU=1.
TEST(CudaDeviceCheck, DeviceIsUsable) {
  BRT_REQUIRE_CUDA_DEVICE();
  std::printf("device 0: %s\n", cuda_device_description(0).c_str());
  auto gpu = make_cuda_backend();
  DeviceArena arena(std::size_t{1} << 20, "device check");
  float* a = arena.allocate_array<float>(4, "a");
  float* c = arena.allocate_array<float>(4, "c");
  const std::vector<float> host = {1, 2, 3, 4};  // [2, 2]
  copy_to_device(a, host.data(), 16, stream_handle(*gpu));
  gpu->gemm(Trans::N, Trans::N, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2);  // a·a
  gpu->scale_inplace(c, 4, 0.5f);
  synchronize(*gpu);
  std::vector<float> out(4);
  copy_to_host(out.data(), c, 16, stream_handle(*gpu));
  EXPECT_EQ(out, (std::vector<float>{3.5f, 5.0f, 7.5f, 11.0f}));
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
