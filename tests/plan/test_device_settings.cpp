// train.device / train.precision checks and the CUDA scratch sizing (launch/device_backend.h,
// docs/gpu.md): every bad combination is refused before any work with a message naming the
// key and the rank; the CPU backend is what `cpu` builds.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "launch/config.h"
#include "launch/device_backend.h"

namespace brt::launch {
namespace {

std::string refusal(const TrainConfig& train, int gpu, int rank = 3) {
  try {
    validate_device_settings(train, gpu, rank);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceSettings, CpuTakesFp32AndFp64AndRefusesBf16) {
  TrainConfig t;
  EXPECT_EQ(refusal(t, -1), "");
  t.precision = "fp64";
  EXPECT_EQ(refusal(t, -1), "");
  t.precision = "bf16";
  const std::string m = refusal(t, -1);
  EXPECT_NE(m.find("train.precision"), std::string::npos) << m;
  EXPECT_NE(m.find("cuda"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 3"), std::string::npos) << m;
}

TEST(DeviceSettings, CudaNeedsABuildAndAGpuAndTakesTensorParallelism) {
  TrainConfig t;
  t.device = "cuda";
  const std::string no_gpu = refusal(t, -1);
  EXPECT_NE(no_gpu.find("train.device"), std::string::npos) << no_gpu;
  EXPECT_NE(no_gpu.find("rank 3"), std::string::npos) << no_gpu;
  if (!cuda_backend_built()) {
    EXPECT_NE(refusal(t, 0).find("built without the CUDA backend"), std::string::npos);
    return;
  }
  EXPECT_EQ(refusal(t, 0), "");  // fp32 on a bound GPU
  t.precision = "fp64";
  EXPECT_NE(refusal(t, 0).find("fp32 or bf16"), std::string::npos);
  t.precision = "bf16";
  EXPECT_EQ(refusal(t, 0), "");
  t.tp = 2;  // tensor parallelism runs on the GPU (NCCL tp group, docs/gpu.md)
  EXPECT_EQ(refusal(t, 0), "");
}

TEST(DeviceSettings, CpuDeviceBuildsTheCpuBackend) {
  TrainConfig t;
  core::ModelConfig m;
  EXPECT_STREQ(make_run_backend<float>(t, -1, m, 1)->name(), "cpu");
  EXPECT_EQ(make_run_optimizer_kernels(*make_run_backend<double>(t, -1, m, 1)), nullptr);
}

TEST(DeviceSettings, Bf16ScratchHoldsTheLargestOperandPair) {
  core::ModelConfig m;  // the 1.3b shapes
  m.d_model = 2048, m.heads = 32, m.head_dim = 128, m.d_ff = 16384, m.vocab = 32128;
  m.seq_len = 4096;
  const double rows = 4.0 * 4096;
  // dlogits [B·N, V] and the embedding [V, D], both as bf16.
  const double logits_pair = 2.0 * (rows * m.vocab + double(m.vocab) * m.d_model);
  // The tensor-core window attention's backward (kernels/cuda/attention_tc.cu, counted from its
  // layouts): bf16 Qh, dOh [B·N, A] and K, V windows [2·B·N, A]; fp32 dQh and the dK, dV windows;
  // per score (B·N·H·2W of them) dP in fp32, dS and P in bf16.
  const double A = m.attn_width(), W = m.window;
  const double attention = rows * A * (2 + 2 + 2 * 2 + 2 * 2 + 4 + 2 * 4 * 2) + rows * m.heads * 2 * W * (4 + 2 + 2);
  const double needed = std::max(logits_pair, attention);
  EXPECT_GE(double(cuda_workspace_bytes(m, 4, true)), needed);
  EXPECT_LT(double(cuda_workspace_bytes(m, 4, true)), 1.5 * needed);
  // fp32 converts nothing: the backend's 256 MiB default is enough.
  EXPECT_EQ(cuda_workspace_bytes(m, 4, false), std::size_t{256} << 20);
}

}  // namespace
}  // namespace brt::launch
