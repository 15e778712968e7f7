// The CUDA-event CallTimer (kernels/cuda/cuda_backend.h make_event_timer, kernels/call_timer.h):
// each timed call's pair of events is read at collect() and summed into its slot, nothing is
// waited for before collect(), and the events are reused after it. On a GPU a slot's time is
// positive and a 512³ product outlasts a 16³ one; in the strict emulator (tests/cuda_emulation,
// where each pair reads 1 ms and an early read would fail) each slot holds its calls × 1 ms.
#include <string>
#include <vector>

#include "kernels/cuda/device/device_arena.h"
#include "tests/kernels/cuda/cuda_test_util.h"

namespace brt::kernels::cuda::test {
namespace {

bool emulated() { return cuda_device_description(0).find("emulator") != std::string::npos; }

TEST(CudaEventTimer, SumsEachCallIntoItsSlot) {
  BRT_REQUIRE_CUDA_DEVICE();
  auto gpu = make_cuda_backend();
  const auto timer = make_event_timer(*gpu);
  EXPECT_STREQ(timer->clock_name(), "CUDA events");
  const int big = 512, small = 16;
  DeviceArena arena(std::size_t(3) * big * big * sizeof(float) + (std::size_t{1} << 16), "event timer");
  float* a = arena.allocate_array<float>(size_t(big) * big, "a");
  float* c = arena.allocate_array<float>(size_t(big) * big, "c");
  gpu->fill(a, int64_t(big) * big, 0.001f);
  std::vector<double> seconds;
  for (int round = 0; round < 2; ++round) {  // the second round reuses the first one's events
    seconds.assign(4, 0.0);
    for (int i = 0; i < 3; ++i) {
      timer->begin();
      gpu->gemm(Trans::N, Trans::N, big, big, big, 1.0f, a, big, a, big, 0.0f, c, big);
      timer->end(2);
    }
    timer->begin();
    gpu->gemm(Trans::N, Trans::N, small, small, small, 1.0f, a, small, a, small, 0.0f, c, small);
    timer->end(0);
    timer->collect(seconds);
    ASSERT_EQ(seconds.size(), 4u);
    EXPECT_EQ(seconds[1], 0.0);  // nothing timed there
    EXPECT_EQ(seconds[3], 0.0);
    if (emulated()) {
      EXPECT_DOUBLE_EQ(seconds[2], 3e-3) << "round " << round;
      EXPECT_DOUBLE_EQ(seconds[0], 1e-3) << "round " << round;
    } else {
      EXPECT_GT(seconds[0], 0.0) << "round " << round;
      EXPECT_GT(seconds[2], seconds[0]) << "round " << round << ": 3 × 512³ against one 16³ product";
      std::printf("round %d: 3 x 512^3 GEMM %.3f ms, one 16^3 GEMM %.3f ms\n", round, seconds[2] * 1e3,
                  seconds[0] * 1e3);
    }
  }
  // A second collect() with nothing timed adds nothing; misuse is refused.
  std::vector<double> again(1, 5.0);
  timer->collect(again);
  EXPECT_EQ(again, std::vector<double>(1, 5.0));
  EXPECT_THROW(timer->end(0), std::logic_error);
  timer->begin();
  EXPECT_THROW(timer->begin(), std::logic_error);
  EXPECT_THROW(timer->collect(again), std::logic_error);
  timer->end(1);
  timer->collect(again);
  EXPECT_GE(again.size(), 2u);
}

// Any other backend is refused naming it (the events need the CUDA backend's stream).
TEST(CudaHost, EventTimerRefusesAnotherBackend) {
  auto cpu = make_cpu_backend<float>();
  EXPECT_THROW(make_event_timer(*cpu), std::invalid_argument);
}

}  // namespace
}  // namespace brt::kernels::cuda::test
