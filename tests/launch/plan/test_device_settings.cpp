// train.device / train.precision checks and the CUDA scratch sizing (launch/run/device_backend.h,
// docs/gpu.md): every bad combination is refused before any work with a message naming the
// key and the rank; the CPU backend is what `cpu` builds.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "kernels/ssm/fft_conv_dims.h"
#include "launch/config/config.h"
#include "launch/run/device_backend.h"
#include "parallel/mpi/launch_env.h"

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
  // The same config on every rank: no rank in it, so mpirun's ranks agree on one message.
  EXPECT_EQ(m.find("rank 3"), std::string::npos) << m;
  // A usage error (exit 2), as every bad command-line value.
  EXPECT_THROW(validate_device_settings(t, -1, 0), parallel::UsageError);
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
  // The tensor-core window attention's backward (kernels/cuda/attention/attention_tc.cu, counted from its
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

// The CUDA backend's own memory that brt-dist plan counts per GPU: scratch, cuBLAS, for BST
// one cuFFT convolver per layer (staging + five spectra, 64-bit sizes) sharing ONE work area,
// and in bf16 the weight shadow.
TEST(DeviceSettings, BackendWorkspaceCountsTheConvolversAndOneSharedCufftWorkArea) {
  const RunConfig bst = load_run_config("configs/1.3b-bst-mf-unstructured.toml", {});
  core::ModelConfig m = bst.model;
  m.resolve();
  const int B = 8;
  const CudaWorkspaceBytes w = cuda_backend_workspace(m, B, true);
  EXPECT_EQ(w.scratch, int64_t(cuda_workspace_bytes(m, B, true)));
  EXPECT_EQ(w.cublas, int64_t{32} << 20);
  // MF: C = ctx_states channels; the unstructured kernel with the carry convolves 2N.
  const long long n_fft = kernels::ssm::fft_friendly_size(4 * m.seq_len), n_freq = n_fft / 2 + 1;
  const long long rows_y = (long long)B * m.ctx_states * (m.d_model / 4);
  EXPECT_GT(rows_y * n_fft, (long long)INT32_MAX) << "the case the 64-bit plans are for";
  EXPECT_EQ(w.fft_work_area, rows_y * n_freq * 8);  // one area, the largest plan's data
  int bst_layers = 0;
  for (int i = 0; i < m.layers; ++i) bst_layers += m.is_bst_layer(i) ? 1 : 0;
  ASSERT_GT(bst_layers, 0);
  const auto one = kernels::ssm::cuda_fft_conv_device_bytes(2 * m.seq_len, m.ctx_states, B, m.d_model / 4);
  EXPECT_EQ(w.fft_buffers, bst_layers * one.buffers);
  EXPECT_GE(one.buffers, rows_y * n_fft * 4);  // the real staging rows at least
  // Under TP each rank convolves its D/4/TP features.
  EXPECT_LT(cuda_backend_workspace(m, B, true, 2).fft_buffers, w.fft_buffers);
  // No SSM, no convolver.
  const RunConfig rec = load_run_config("configs/1.3b.toml", {});
  EXPECT_EQ(cuda_backend_workspace(rec.model, B, true).fft_buffers, 0);
  EXPECT_EQ(cuda_backend_workspace(rec.model, B, true).fft_work_area, 0);
  // bf16 keeps a bf16 copy of the rank's fp32 parameters (CudaBackend::weights_fixed); fp32 none.
  const int64_t parameter_bytes = int64_t{4} * 325'000'000;
  EXPECT_EQ(cuda_backend_workspace(rec.model, B, true, 4, parameter_bytes).weight_shadow, parameter_bytes / 2);
  EXPECT_EQ(cuda_backend_workspace(rec.model, B, false, 4, parameter_bytes).weight_shadow, 0);
}

}  // namespace
}  // namespace brt::launch
