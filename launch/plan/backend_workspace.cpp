#include "launch/plan/backend_workspace.h"

#include <algorithm>

#include "kernels/ssm/fft_conv_dims.h"

namespace brt::launch {

std::size_t cuda_workspace_bytes(const core::ModelConfig& model, int streams, bool bf16) {
  const double rows = double(streams) * model.seq_len;
  const double widest = std::max({double(model.vocab), double(model.d_ff),
                                  2.0 * model.attn_width(), double(model.d_model)});
  // Operand pairs: activation × weight (rows·widest + widest·D) or activation × activation
  // (the weight gradients, at most 2·rows·widest), two bytes an element.
  const double gemm = bf16 ? 2.0 * (2.0 * rows * widest + widest * model.d_model) : 0.0;
  // bf16 window attention on the tensor cores (kernels/cuda/attention/attention_tc.cu), backward: bf16
  // copies of Q, dO (2 B each per element of [B·N, A]) and of the K, V windows (twice as many
  // rows), the fp32 dQ and dK, dV windows, and per score tile (H·2W per row) dP in fp32 plus
  // dSb and Pb in bf16. Same arena as the GEMM operands, used by another call: the larger counts.
  const double A = model.attn_width(), W = model.window;
  const double window_tc = rows * A * (2 + 2 + 4 + 4 + 4 + 8 + 8) + rows * model.heads * 2 * W * 8;
  // Cross-attentions on the tensor cores (cross_attention_tc.cu), the largest being the state's
  // reads of [block; state] (model.md §5.2): S query rows and W + S keys per block, i.e. per token
  // row S/W queries and (W + S)/W keys; 8 bytes per query element (Qh, dOh, dQh), 12 per key
  // element (Kh, Vh, dKh, dVh) and 8 per score (dP, dSb, Pb). Below the window's for S <= W/2.
  const double S = model.state_size, q_rows = S / W, k_rows = (W + S) / W;
  const double cross_tc = rows * A * (8 * q_rows + 12 * k_rows) + rows * model.heads * q_rows * (W + S) * 8;
  const double attention = bf16 ? std::max(window_tc, cross_tc) : 0.0;
  // Attention backward's per-row deltas (H floats a row), the embedding sort, the loss rows.
  const double other = rows * (4.0 * model.heads + 64.0);
  const double bytes = std::max(gemm, attention) + other + double(std::size_t{64} << 20);
  return std::max<std::size_t>(std::size_t(bytes), std::size_t{256} << 20);
}

CudaWorkspaceBytes cuda_backend_workspace(const core::ModelConfig& model_in, int streams, bool bf16,
                                          int tp, int64_t parameter_bytes) {
  core::ModelConfig model = model_in;
  model.resolve();
  CudaWorkspaceBytes w;
  w.scratch = int64_t(cuda_workspace_bytes(model, streams, bf16));
  w.cublas = int64_t{32} << 20;  // kernels/cuda/cuda_backend.cpp kCublasWorkspaceBytes
  w.weight_shadow = bf16 ? parameter_bytes / 2 : 0;  // fp32 parameters, a bf16 copy
  // One convolver per BST layer (core/layers/bst_ssm.cpp): length N, or 2N for the unstructured
  // kernel's carry over [U_prev; U]; channels 1 (SH), H (MH) or S_ctx (MF); Ds = D/4 per rank.
  const int channels = model.ssm_channels();
  const bool ext = model.ssm_kernel != core::SsmKernel::kS4D && model.ssm_carry;
  const int length = ext ? 2 * model.seq_len : model.seq_len, features = model.ssm_features() / std::max(1, tp);
  for (int i = 0; i < model.layers; ++i) {
    if (!model.is_bst_layer(i)) continue;
    const auto fft = kernels::ssm::cuda_fft_conv_device_bytes(length, channels, streams, features);
    w.fft_buffers += fft.buffers;
    w.fft_work_area = std::max<int64_t>(w.fft_work_area, fft.work_area);
  }
  return w;
}

}  // namespace brt::launch
