// The SSM sublayer of a BST layer (model.md §7.1) and its carried state (§7.3):
//   Z = RMSNorm_ssm(X);  U = Z·W_dn (D→Ds = D/4)
//   Y_c = K_c ∗ U + Dskip_c ⊙ U       (causal depthwise FFT convolution, c ∈ [0, C))
//   Ctx_c = Y_c·W_up^(c)              (one W_up shared, or one per head for MH)
// with K from S4D modes (`s4d`) or a Hyena-style implicit filter (`unstructured`).
// C = 1 (SH), H (MH), S_ctx (MF). Parameters are layers.{i}.ssm.* (model.md §9).
//
// Output layout (context()):
//   SH  [B, N, D]        Ctx_0
//   MH  [H, B, N, D]     Ctx_h (head-major, so each head's context is one [B·N, D] block)
//   MF  [B, T, C, D]     Ctx_c at the LAST position of each block k, (k+1)·W − 1: only these
//                        rows are ever read (§7.2), so W_up runs on T·C rows, not N·C.
//
// Carry (§7.3, `ssm_carry`): s4d keeps the complex state x [B, C, Ds, M] in double; the next
// segment adds its response (Backend::s4d_carry_apply) and backpropagates into Δ, A, C
// (Backend::s4d_carry_apply_backward). unstructured keeps the previous segment's U [B, N, Ds] and
// convolves [U_prev; U] with the N-tap kernel (an FFT convolution of length 2N). A document
// start resets the carry; with `ssm_carry` off every segment starts from zero.
//
// Memory (docs/gpu.md, "BST on the GPU"): activations, scratch and carry are Buffers in the
// backend's memory and every data-sized step (B·N rows: norm, projections, the FFT convolution
// through Backend::make_fft_conv, the carry terms, the MF row gather) is a backend call, and so
// is the kernel generation — S4D modes (Backend::s4d_kernel_*) or the implicit filter network
// (kernels/implicit_filter.h: gemm and the filter ops), from [C, Ds, M]-sized parameters
// to a [C, Ds, N] kernel, once per step. Nothing is staged through the host.
//
// Context parallelism (core/sharding/context_parallel.h, s4d only): this rank's rows are chunk r of the
// segment; the state entering the chunk is the exclusive scan of the chunks' state summaries,
// started from the carry (kernels/ssm/s4d_state_passing.h), and its gradient is passed back by
// the reverse scan. Every rank advances the carry over the whole segment alike.
//
// Tensor parallelism (docs/parallelism.md, "BST under TP"): the Ds features are split, rank r
// holding features [r·Ds/TP, (r+1)·Ds/TP) of every channel. W_dn is column-parallel (its input
// gradient all-reduced), the per-feature S4D parameters and Dskip are split along Ds, the
// implicit filter's w_out is split per channel (pieces = C: filters are ordered c·Ds + f) with
// the filter network replicated (its gradient, reaching it through the local filters only, is
// all-reduced), W_up is row-parallel along Ds with its output all-reduced, so context() is
// whole and identical on every rank. The carry tensors are this rank's features.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/sharding/context_parallel.h"
#include "core/layer.h"
#include "core/model_config.h"
#include "core/param_store.h"
#include "core/sharding/tensor_parallel.h"
#include "kernels/backend.h"
#include "kernels/implicit_filter.h"
#include "kernels/ssm/s4d_kernel.h"

namespace brt::core {

template <typename T>
class BstSsm {
 public:
  // prefix: "layers.{i}." (parameters go under prefix + "ssm."). Buffers live in `memory`.
  // Buffers in backend.memory(); the convolver is planned here (no allocation in a step).
  BstSsm(ParamStore<T>& store, const ModelConfig& cfg, const std::string& prefix, int streams,
         kernels::Backend<T>& backend, const TensorParallel& tp = {},
         const ContextParallel& cp = {});
  ~BstSsm();

  int channels() const { return channels_; }
  int64_t context_rows() const;  // rows of context(): B·N, H·B·N or B·T·C
  // x: [B·N, D] (backend memory); doc_start [B] host. Saves what backward needs and advances
  // the carry.
  void forward(kernels::Backend<T>& be, const uint8_t* doc_start, const T* x);
  // Before forward (Layer::stage): copies the streams that continue their carry to backend
  // memory, so forward copies nothing when it sees the same doc_start.
  void stage(const uint8_t* doc_start);
  const T* context() const { return ctx_.data(); }  // backend memory
  // dctx: gradient w.r.t. context() (same layout). Accumulates dx and parameter gradients.
  void backward(kernels::Backend<T>& be, const T* dctx, T* dx);

  // The carry: s4d "ssm.carry" [B, C, Ds, M, 2·k] holds the double state's exact bits in T
  // (k = sizeof(double)/sizeof(T)); unstructured "ssm.carry_u" [B, N, Ds]. Under TP: this
  // rank's Ds/TP features (shard dim 2 in both).
  std::vector<TensorRef<T>> carried_state();
  int64_t activation_bytes() const;
  int64_t backward_scratch_bytes() const;

 private:
  kernels::ssm::S4dParams<T> s4d_params() const;  // the store's (backend memory)
  kernels::ssm::S4dGrads<T> s4d_grads() const;
  kernels::ssm::ImplicitFilterParams<T> filter_params() const;  // unstructured (backend memory)
  void generate_kernel(kernels::Backend<T>& be);
  // Y_c of stream b: the last N rows of channel c's convolution output, [N, Ds].
  T* y_rows(T* y, int b, int c) const;
  const T* y_rows(const T* y, int b, int c) const { return y_rows(const_cast<T*>(y), b, c); }
  void up_forward(kernels::Backend<T>& be);
  void up_backward(kernels::Backend<T>& be, const T* dctx);
  void kernel_backward(kernels::Backend<T>& be);
  // s4d: the state entering this segment (or chunk) into state_used_, its response added to y_,
  // and the carry advanced; backward: the response's and (under CP) the scan's gradients.
  void state_forward(kernels::Backend<T>& be, bool any_continues);
  void state_backward(kernels::Backend<T>& be);
  void pass_state_forward(kernels::Backend<T>& be, const kernels::ssm::S4dCarryDims& cd);
  void pass_state_backward(kernels::Backend<T>& be, const kernels::ssm::S4dCarryDims& cd);
  // Constructor steps: the kernel's parameters (S4D modes, or the implicit filter network with
  // its TP filter ids), then the activation and scratch buffers and the s4d carry/CP state.
  void declare_s4d_modes(const ShardSpec& features);
  void declare_implicit_filter(kernels::Backend<T>& backend, const TensorParallel& tp);
  void allocate_activations();
  void allocate_s4d_state();

  ParamStore<T>& store_;
  const ModelConfig& cfg_;
  TensorParallel tp_;
  std::string prefix_;
  kernels::Memory& memory_;
  int streams_, channels_;
  int d_full_;   // Ds = D/4 (the declared shapes)
  int d_small_;  // this rank's features, Ds / TP
  int modes_;
  int conv_len_;  // N, or 2N for unstructured with the carry ([U_prev; U])
  bool s4d_, carry_;
  int norm_ = -1, w_dn_ = -1, w_up_ = -1, dskip_ = -1;
  int log_dt_ = -1, a_re_ = -1, a_im_ = -1, c_re_ = -1, c_im_ = -1;
  int filter_[8] = {-1, -1, -1, -1, -1, -1, -1, -1};  // w0 b0 w1 b1 w2 b2 freq w_out
  // Planned by the constructor for (streams, Ds): no step allocates.
  std::unique_ptr<kernels::FftConvolver<T>> conv_;
  std::unique_ptr<kernels::ssm::ImplicitFilter<T>> filter_net_;

  // Saved activations (backend memory).
  const T* x_ = nullptr;
  kernels::Buffer<T> z_, rstd_;    // [B·N, D], [B·N]
  kernels::Buffer<T> u_;           // [B·N, Ds]
  kernels::Buffer<T> conv_u_;      // [B, 2N, Ds] (unstructured carry only)
  kernels::Buffer<T> kernel_;      // [C, Ds, N] generated kernel
  kernels::Buffer<T> kernel_ext_;  // [C, Ds, 2N] zero-padded (unstructured carry only)
  kernels::Buffer<T> y_;           // [B, C, conv_len, Ds]
  kernels::Buffer<T> y_end_;       // MF: [B, T, C, Ds]
  kernels::Buffer<T> ctx_;         // see context()
  kernels::Buffer<double> state_used_;  // s4d: the state this segment's carry term read
  std::vector<uint8_t> active_;   // host [B]: streams continuing a document with the carry on
  kernels::Buffer<uint8_t> active_device_;  // the same, for the backend's carry backward
  std::vector<uint8_t> staged_active_;      // what stage() copied to active_device_
  bool staged_ = false;                     // stage() ran since the last forward
  // Backward scratch.
  kernels::Buffer<T> dy_, dkernel_, dkernel_ext_, du_conv_, du_, dz_, dy_end_;
  kernels::Buffer<T> filter_dgrad_;  // TP: the replicated filter network's gradient, before all-reduce
  // Carried (detached).
  kernels::Buffer<double> state_;  // s4d: [B, C, Ds, M, 2] (exposed as T bits)
  kernels::Buffer<T> u_prev_;      // unstructured: previous segment's U [B, N, Ds]
  // Context parallelism (s4d): [B, C, Ds, M, 2] doubles each, the gathered ones C_cp times that.
  ContextParallel cp_;
  kernels::Buffer<double> summary_, summaries_;        // h of this chunk, of every chunk
  kernels::Buffer<double> state_prev_;                 // x_in(r − 1)
  kernels::Buffer<double> state_grad_, state_grads_;   // g of this chunk, of every chunk
  kernels::Buffer<double> scan_grad_;                  // the reverse scan's running gradient
  kernels::Buffer<uint8_t> all_active_;                // [B] ones: chunks r > 0 always read a state
};

}  // namespace brt::core
