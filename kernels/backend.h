// The kernels interface: every numeric operation a layer performs, as a pure function over
// raw row-major buffers with explicit shapes. Layers call a Backend<T>& and never learn which
// implementation runs (kernels/cpu, kernels/cuda). Kernels never allocate and never communicate.
//
// Conventions (all kernels):
//  - Row-major. An activation "[n, A]" has rows of width A; A = H*dh and head h occupies
//    columns [h*dh, (h+1)*dh) (model.md §9).
//  - Forward kernels OVERWRITE their outputs.
//  - Backward kernels ACCUMULATE (+=) into every gradient output, for inputs and parameters
//    alike; callers zero gradient buffers when they need a fresh sum. This keeps residual
//    streams and shared weights simple.
//  - Reductions are deterministic: the same inputs give bit-identical outputs regardless of
//    thread count scheduling (fixed partition of work, fixed summation order).
//  - T is float (the training path) or double (the float64 reference / gradient-check path).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/memory.h"
#include "kernels/ssm/fft_conv_dims.h"
#include "kernels/ssm/s4d_kernel.h"
#include "kernels/ssm/s4d_state_passing.h"

namespace brt::kernels {

enum class Trans { N, T };

// Dimensions of the sliding-window self-attention of model.md §3.2 over a batch of segments.
struct WindowAttnDims {
  int batch;     // B streams
  int seq;       // N tokens per segment (multiple of window)
  int window;    // W; blocks per segment T = seq / window. W == seq is Transformer-XL.
  int heads;     // H
  int head_dim;  // dh
  int width() const { return heads * head_dim; }  // A
  int blocks() const { return seq / window; }
};

// Dimensions of an (optionally causal) cross-attention (model.md §3.4), batched over `batch`
// independent problems. Row width of Q, K, V and out is A = heads*head_dim. The strides say
// how far apart (in elements) consecutive batch entries start, so a block of a larger
// [B, N, A] activation can be addressed in place.
struct CrossAttnDims {
  int batch;
  int queries;  // nq
  int keys;     // nk
  int heads;
  int head_dim;
  int64_t q_stride;   // elements between batch entries of Q and of out
  int64_t kv_stride;  // elements between batch entries of K and V
  bool causal;        // if true, query i may see key j only when j <= i (model.md §7.2 SH/MH)
  int width() const { return heads * head_dim; }
};

// T5 relative-position bucket of model.md §3.3 for a distance n >= 1 (computed in fp32).
int t5_bucket(int distance);
constexpr int kT5Buckets = 32;

// The causal depthwise FFT convolution of model.md §7.1 (contract: kernels/ssm/fft_conv.h) on a
// backend's memory, planned for at most (max_batch, max_features) by Backend::make_fft_conv.
// forward overwrites y; backward accumulates du, dk, ddskip (any may be null). Deterministic.
template <typename T>
class FftConvolver {
 public:
  virtual ~FftConvolver() = default;
  virtual void forward(const ssm::FftConvDims& d, const T* k, const T* u, const T* dskip,
                       T* y) = 0;
  virtual void backward(const ssm::FftConvDims& d, const T* k, const T* u, const T* dskip,
                        const T* dy, T* du, T* dk, T* ddskip) = 0;
};

// The error a loss raises for an unmasked target outside [0, V): the same text from the waiting
// and the deferred forms of every backend ("kernels/cuda softmax_xent: target 7 of row 2 is
// outside [0, 5)").
inline std::string bad_target_message(const std::string& backend, int64_t target, int64_t row,
                                      int V) {
  return "kernels/" + backend + " softmax_xent: target " + std::to_string(target) + " of row " +
         std::to_string(row) + " is outside [0, " + std::to_string(V) + ")";
}

// Bytes of the mask linear_relu_forward writes for y [n, out]: a bit per element, each of the n
// rows padded to 128 bits (the cuBLASLt ReLU bit-mask, whose leading dimension must be a
// multiple of 128). Core allocates it whatever the backend, so a layer's buffers do not depend
// on which backend runs it (the CPU's never touches it: 1/32 of y's bytes).
inline int64_t relu_mask_bytes(int64_t n, int64_t out) { return n * ((out + 127) / 128) * 16; }

template <typename T>
class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Where this backend's buffers live (kernels/memory.h): every pointer passed to a kernel
  // points into memory allocated here (host memory for the CPU backend, device memory for
  // CUDA). Host-side int32/uint8 inputs (tokens, targets, masks) must be copied there too.
  virtual Memory& memory() = 0;

  // C[M,N] = alpha * op(A) * op(B) + beta * C. lda/ldb/ldc are row strides of the stored
  // (untransposed) matrices.
  virtual void gemm(Trans ta, Trans tb, int M, int N, int K, T alpha, const T* A, int lda,
                    const T* B, int ldb, T beta, T* C, int ldc) = 0;
  // A linear layer's backward, y = x·w with x [n, in] and w [in, out] (rows contiguous): dx =
  // dx_beta·dx + dy·wᵀ (skipped when dx is null), then dw += xᵀ·dy. Exactly these two gemm
  // calls; a backend may share their work (CUDA in bf16 rounds dy to bf16 once for both).
  virtual void linear_backward(const T* x, int n, int in, const T* w, int out, const T* dy, T* dx, T* dw,
                               T dx_beta) {
    if (dx != nullptr) gemm(Trans::N, Trans::T, n, in, out, T(1), dy, out, w, out, dx_beta, dx, in);
    gemm(Trans::T, Trans::N, in, out, n, T(1), x, in, dy, out, T(1), dw, out);
  }
  // Products of one input with several weights (the attention's projections, model.md §3.1):
  // y[j] = x·w[j] for x [n, in] and each w[j] [in, out], j < count. Exactly these gemm calls; a
  // backend may share their work (CUDA in bf16 rounds x once for all of them).
  virtual void linear_forward_shared(const T* x, int n, int in, int count, const T* const* w, int out,
                                     T* const* y) {
    for (int j = 0; j < count; ++j) gemm(Trans::N, Trans::N, n, out, in, T(1), x, in, w[j], out, T(0), y[j], out);
  }
  // An MLP's first product and its ReLU (model.md §4): y = relu(x·w) for x [n, in], w [in, out],
  // and `mask` (relu_mask_bytes(n, out) bytes, the backend's own format) keeps what
  // relu_linear_backward needs of the product before the ReLU. The default is gemm, then
  // relu_forward in place (no mask); CUDA in bf16 applies the ReLU in the product's epilogue.
  // `y_for_products`: until weights_fixed(nullptr, 0) (the model's end), y is read only as an
  // operand of this backend's products (gemm and the linear ops: relu_linear_backward's x among
  // them) and written by nothing but this call; a backend may then keep y in the precision its
  // products read (CUDA in bf16: bf16 values in y's memory, the rounding a product would apply,
  // read without a conversion). Any other read of y is then undefined.
  virtual void linear_relu_forward(const T* x, int n, int in, const T* w, int out, T* y, void* mask,
                                   bool y_for_products) {
    (void)mask;
    (void)y_for_products;
    gemm(Trans::N, Trans::N, n, out, in, T(1), x, in, w, out, T(0), y, out);
    relu_forward(y, int64_t(n) * out, y);
  }
  // The backward of a linear layer y = x·w whose input came out of linear_relu_forward (x =
  // relu(pre), `mask` as it wrote it): dx = (dy·wᵀ + dx_add)·(pre > 0), the gradient before the
  // ReLU (dx_add may be null), then dw += xᵀ·dy. The default is linear_backward, add_inplace
  // and relu_backward in place; CUDA in bf16 applies the ReLU's gradient in dx's epilogue.
  virtual void relu_linear_backward(const T* x, const void* mask, int n, int in, const T* w, int out, const T* dy,
                                    const T* dx_add, T* dx, T* dw) {
    (void)mask;
    const int64_t nx = int64_t(n) * in;
    linear_backward(x, n, in, w, out, dy, dx, dw, T(0));
    if (dx_add != nullptr) add_inplace(dx, dx_add, nx);
    relu_backward(x, dx, nx, dx);
  }
  // The MLP's backward through both its products (model.md §4), u = relu(x·w1)·w2 with x [n, in],
  // w1 [in, hidden], w2 [hidden, out], m = relu(x·w1) and `mask` as linear_relu_forward wrote
  // them: dm = (du·w2ᵀ + dm_extra)·(pre > 0) into dm [n, hidden] (dm_extra may be null), dw2 +=
  // mᵀ·du, then dx = dm·w1ᵀ (written) and dw1 += xᵀ·dm. The default is relu_linear_backward,
  // then linear_backward with dx_beta 0, so the CPU computes what those two calls do; a backend
  // may keep dm in the precision the two products read (CUDA in bf16 without dm_extra: DRELU
  // writes it in bf16 and they read it as it is), so dm's content afterwards is the backend's.
  virtual void mlp_products_backward(const T* x, const T* w1, const T* m, const void* mask, int n, int in,
                                     int hidden, const T* w2, int out, const T* du, const T* dm_extra, T* dm,
                                     T* dx, T* dw1, T* dw2) {
    relu_linear_backward(m, mask, n, hidden, w2, out, du, dm_extra, dm, dw2);
    linear_backward(x, n, in, w1, hidden, dm, dx, dw1, T(0));
  }
  // A product onto the residual stream (model.md §4: y = x + a·Wo, out = y + MLP(y)): y =
  // residual + x·w for x [n, in], w [in, out], residual and y [n, out] (residual may be y). The
  // default is copy, then gemm with beta 1, so the CPU's values are those of the two calls; CUDA
  // in bf16 reads the residual as the product's C and writes y (no copy), within fp32 rounding
  // of the two calls (cuBLASLt may pick another kernel than cublasGemmEx).
  virtual void linear_forward_residual(const T* x, int n, int in, const T* w, int out, const T* residual, T* y) {
    if (residual != y) copy(residual, int64_t(n) * out, y);
    gemm(Trans::N, Trans::N, n, out, in, T(1), x, in, w, out, T(1), y, out);
  }
  // The model's weights are [values, values + n) and stay unchanged from this call until the
  // next one (core calls it at the start of every forward, and a step's backward reads the
  // weights its forward read); nullptr / 0 releases them. A backend whose products read rounded
  // operands (CUDA in bf16) rounds the weights here, once, into a copy it reads wherever a
  // product's operand lies inside the range, instead of rounding that operand at every call:
  // the same operands, so the same results bit for bit. Other backends ignore it.
  virtual void weights_fixed(const T* values, int64_t n) {
    (void)values;
    (void)n;
  }

  // ---- element-wise helpers -------------------------------------------------------------
  virtual void fill(T* x, int64_t n, T value) = 0;
  virtual void copy(const T* x, int64_t n, T* y) = 0;           // y = x
  virtual void add_inplace(T* y, const T* x, int64_t n) = 0;    // y += x
  virtual void scale_inplace(T* x, int64_t n, T alpha) = 0;     // x *= alpha
  // Column sums of dz [n, D] accumulated into db [D] (bias gradients).
  virtual void column_sum_accumulate(const T* dz, int n, int D, T* db) = 0;
  // out[i, :] += row[:] for all rows (broadcast add of a [D] or [rows, D] table).
  virtual void add_rows_broadcast(T* out, const T* table, int rows_out, int rows_table,
                                  int D) = 0;  // out[i] += table[i % rows_table]

  // ---- model.md §1: embedding (no scaling) -----------------------------------------------
  // A token of -1 selects no row: forward writes a zero row, backward adds nothing (the
  // vocabulary-parallel embedding passes -1 for tokens another TP rank holds).
  virtual void embedding_forward(const int32_t* tokens, int n, const T* table, int D,
                                 T* out) = 0;
  virtual void embedding_backward(const int32_t* tokens, int n, const T* dout, int D,
                                  T* dtable) = 0;

  // ---- model.md §2: RMSNorm; rstd[n] saved for backward ----------------------------------
  virtual void rmsnorm_forward(const T* x, const T* gamma, int n, int D, T* y, T* rstd) = 0;
  // rmsnorm_forward whose y is read only as an operand of this backend's products, and written
  // by nothing but this call, until the model's end (linear_relu_forward's y_for_products: the
  // same contract). The default is rmsnorm_forward; CUDA in bf16 writes y in bf16 (the rounding
  // a product would apply), which its products read without a conversion.
  virtual void rmsnorm_forward_for_products(const T* x, const T* gamma, int n, int D, T* y, T* rstd) {
    rmsnorm_forward(x, gamma, n, D, y, rstd);
  }
  virtual void rmsnorm_backward(const T* x, const T* gamma, const T* rstd, const T* dy, int n,
                                int D, T* dx, T* dgamma) = 0;
  // rmsnorm_backward with the residual stream's gradient folded in (the residual adds of
  // model.md §4 around the norm): dx = base + RMSNorm's input gradient, where base is
  // dx + residual (accumulate) or residual (not), a null residual counting as none (0 when not
  // accumulating); dgamma += as rmsnorm_backward. residual must not alias dx. The default is
  // fill / copy / add_inplace, then rmsnorm_backward; a backend's own is one pass and equals
  // it bit for bit (the same float additions in the same order).
  virtual void rmsnorm_backward_residual(const T* x, const T* gamma, const T* rstd, const T* dy,
                                         const T* residual, bool accumulate, int n, int D, T* dx,
                                         T* dgamma) {
    const int64_t nd = int64_t(n) * D;
    if (accumulate && residual != nullptr) add_inplace(dx, residual, nd);
    if (!accumulate && residual != nullptr) copy(residual, nd, dx);
    if (!accumulate && residual == nullptr) fill(dx, nd, T(0));
    rmsnorm_backward(x, gamma, rstd, dy, n, D, dx, dgamma);
  }

  // ---- model.md §3.1: per-head L2 normalisation y = x * rsqrt(sum x^2 + 1e-6) ------------
  // x, y: [n, H*dh]; rnorm: [n, H] saved for backward. y may alias x.
  virtual void head_l2norm_forward(const T* x, int n, int H, int dh, T* y, T* rnorm) = 0;
  // dx = rnorm * (dy - y * <y, dy>) per head, written (no zero fill first; its callers read
  // it as a product's input gradient). Uses the forward's output y.
  virtual void head_l2norm_backward(const T* y, const T* rnorm, const T* dy, int n, int H,
                                    int dh, T* dx) = 0;
  // head_l2norm_backward whose dx [n, H*dh] is read next, and only, as the output gradient dy of
  // this backend's linear_backward (the projection the heads came from, model.md §3.1), and
  // written by nothing else before that. The default is head_l2norm_backward; CUDA in bf16
  // writes dx in bf16 (the rounding the product would apply), which that linear_backward reads
  // without a conversion and then lets go of, so the buffer is fp32 again for any later use.
  virtual void head_l2norm_backward_for_product(const T* y, const T* rnorm, const T* dy, int n, int H,
                                                int dh, T* dx) {
    head_l2norm_backward(y, rnorm, dy, n, H, dh, dx);
  }

  // ---- model.md §3.2/§3.3: sliding-window self-attention ----------------------------------
  // q, k, v, out: [B, N, A] (q, k already normalised). k_cache, v_cache: [B, W, A], the
  // previous block for block 0 (zeros at a document start; attended, not masked).
  // rel_bias: [H, 32]; scale: [H]. probs: [B, T, H, W, 2W] saved for backward.
  virtual void window_attention_forward(const WindowAttnDims& d, const T* q, const T* k,
                                        const T* v, const T* k_cache, const T* v_cache,
                                        const T* rel_bias, const T* scale, T* out,
                                        T* probs) = 0;
  // window_attention_forward whose out is read only as an operand of this backend's products
  // (the output projection's, forward and backward), and written by nothing but this call,
  // until the model's end (rmsnorm_forward_for_products' contract). The default is
  // window_attention_forward; CUDA in bf16 writes out in bf16 (the rounding a product would
  // apply), which its products read without a conversion.
  virtual void window_attention_forward_for_products(const WindowAttnDims& d, const T* q, const T* k, const T* v,
                                                     const T* k_cache, const T* v_cache, const T* rel_bias,
                                                     const T* scale, T* out, T* probs) {
    window_attention_forward(d, q, k, v, k_cache, v_cache, rel_bias, scale, out, probs);
  }
  // Accumulates dq, dk, dv (no gradient to the detached cache), drel_bias, dscale.
  virtual void window_attention_backward(const WindowAttnDims& d, const T* q, const T* k,
                                         const T* v, const T* k_cache, const T* v_cache,
                                         const T* rel_bias, const T* scale, const T* probs,
                                         const T* dout, T* dq, T* dk, T* dv, T* drel_bias,
                                         T* dscale) = 0;
  // The same, WRITING dq, dk, dv (their contents on entry do not matter); drel_bias and dscale
  // still accumulate. The default zero-fills them, then accumulates: the CPU's values. CUDA in
  // bf16 writes them from its tensor-core pass (no fill, no read of the three): the same sums,
  // so the same values (0 + x is x; only a zero's sign can differ).
  virtual void window_attention_backward_write(const WindowAttnDims& d, const T* q, const T* k, const T* v,
                                               const T* k_cache, const T* v_cache, const T* rel_bias,
                                               const T* scale, const T* probs, const T* dout, T* dq, T* dk,
                                               T* dv, T* drel_bias, T* dscale) {
    const int64_t n = int64_t(d.batch) * d.seq * d.width();
    for (T* g : {dq, dk, dv}) fill(g, n, T(0));
    window_attention_backward(d, q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout, dq, dk, dv, drel_bias,
                              dscale);
  }
  // window_attention_backward_write whose dv is read next, and only, as the output gradient dy
  // of this backend's linear_backward (V's projection), and written by nothing else before that
  // (head_l2norm_backward_for_product's contract). The default is window_attention_backward_write;
  // CUDA in bf16 writes dv in bf16 (the rounding the product would apply), which that
  // linear_backward reads without a conversion and then lets go of.
  virtual void window_attention_backward_write_dv_for_product(const WindowAttnDims& d, const T* q, const T* k,
                                                              const T* v, const T* k_cache, const T* v_cache,
                                                              const T* rel_bias, const T* scale, const T* probs,
                                                              const T* dout, T* dq, T* dk, T* dv, T* drel_bias,
                                                              T* dscale) {
    window_attention_backward_write(d, q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout, dq, dk, dv, drel_bias,
                                    dscale);
  }

  // ---- model.md §3.4: cross-attention (no bias, optional causal mask) ---------------------
  // Batch entry b: q at q + b*q_stride ([nq, A] rows), k/v at k/v + b*kv_stride ([nk, A]),
  // out at out + b*q_stride. probs: [batch, H, nq, nk] (dense, saved for backward).
  // logits = scale_h * <q_i, k_j>; softmax over j.
  virtual void cross_attention_forward(const CrossAttnDims& d, const T* q, const T* k,
                                       const T* v, const T* scale, T* out, T* probs) = 0;
  virtual void cross_attention_backward(const CrossAttnDims& d, const T* q, const T* k,
                                        const T* v, const T* scale, const T* probs,
                                        const T* dout, T* dq, T* dk, T* dv, T* dscale) = 0;

  // ---- model.md §4: ReLU -----------------------------------------------------------------
  virtual void relu_forward(const T* x, int64_t n, T* y) = 0;             // y may alias x
  virtual void relu_backward(const T* y, const T* dy, int64_t n, T* dx) = 0;  // dx = dy*(y>0); dx may alias dy

  // ---- model.md §5.3: gates ----------------------------------------------------------------
  // fixed: g = sigmoid(bias[d]); out = carry*g + u*(1-g). carry, u, out: [n, D].
  virtual void fixed_gate_forward(const T* carry, const T* u, const T* bias, int n, int D,
                                  T* out) = 0;
  virtual void fixed_gate_backward(const T* carry, const T* u, const T* bias, const T* dout,
                                   int n, int D, T* dcarry, T* du, T* dbias) = 0;
  // lstm: zf, zi are the pre-activations y*W_f + b_f and y*W_i + b_i (computed by the layer);
  // f = sigmoid(zf + 1), i = sigmoid(zi - 1), out = carry*f + u*i. f, i saved: [n, D].
  virtual void lstm_gate_forward(const T* carry, const T* u, const T* zf, const T* zi, int n,
                                 int D, T* out, T* f, T* i) = 0;
  // Accumulates dcarry, du, dzf, dzi.
  virtual void lstm_gate_backward(const T* carry, const T* u, const T* f, const T* i,
                                  const T* dout, int n, int D, T* dcarry, T* du, T* dzf,
                                  T* dzi) = 0;

  // ---- data movement (tensor parallelism's row reorderings, docs/parallelism.md) --------
  // For i < rows, j < cols: y[i*ldy + j] = x[i*ldx + j], or += with `accumulate`.
  // x and y must not overlap.
  virtual void copy_2d(const T* x, int64_t ldx, int rows, int64_t cols, T* y, int64_t ldy,
                       bool accumulate) = 0;

  // ---- model.md §1 under tensor parallelism: cross-entropy over logits split by vocabulary --
  // logits [n, V] are this rank's V columns; local_targets[r] is row r's target column here,
  // or -1 when another rank holds it. The per-row statistics are double; the caller sums
  // (or maxes) them over the TP group between the phases, so every rank finishes with the
  // whole vocabulary's log-sum-exp.
  // 1. row_max[r] = max_j logits[r, j].
  virtual void xent_split_max(const T* logits, int n, int V, double* row_max) = 0;
  // 2. sum_exp[r] = sum_j exp(logits[r, j] - row_max[r]) (row_max: the global max);
  //    target_logit[r] = logits[r, local_targets[r]] when mask[r] and the target is here, else 0.
  virtual void xent_split_sums(const T* logits, const int32_t* local_targets,
                               const uint8_t* mask, int n, int V, const double* row_max,
                               double* sum_exp, double* target_logit) = 0;
  // 3. With the global statistics: row_loss[r] = log(sum_exp) + row_max - target_logit
  //    (0 where mask[r] == 0); OVERWRITES dlogits = grad_scale * mask_r * (softmax -
  //    onehot(local target)) for these columns (may alias logits). Returns the sum of the
  //    row losses in double, in row order.
  virtual double xent_split_finish(const T* logits, const int32_t* local_targets,
                                   const uint8_t* mask, int n, int V, T grad_scale,
                                   const double* row_max, const double* sum_exp,
                                   const double* target_logit, T* dlogits, T* row_loss) = 0;

  // ---- model.md §1: softmax cross-entropy over logits [n, V] -------------------------------
  // For each row r with mask[r] != 0: loss_r = logsumexp(logits_r) - logits_r[target_r];
  // rows with mask 0 give loss 0. Writes per-row losses (nats) to row_loss[n] and
  // OVERWRITES dlogits = grad_scale * mask_r * (softmax(logits_r) - onehot(target_r)).
  // dlogits may alias logits. Returns the sum of row losses (accumulated in double).
  virtual double softmax_xent_forward_backward(const T* logits, const int32_t* targets,
                                               const uint8_t* mask, int n, int V, T grad_scale,
                                               T* dlogits, T* row_loss) = 0;
  // The same computation without waiting for it, for a CUDA graph to capture (launch/
  // step_graphs.h): grad_scale is one T in this backend's memory (staged before the graph, so
  // a replay may use another scale), and nothing is read back. result: two doubles in this
  // backend's memory, [0] the loss sum, [1] the first unmasked row whose target is outside
  // [0, V), or -1; the caller reads both when it needs the loss and, for a bad row, raises
  // bad_target_message() exactly as the waiting form does (core/model.cpp step_nats). The
  // default runs the waiting form (which raises at once).
  virtual void softmax_xent_forward_backward_deferred(const T* logits, const int32_t* targets,
                                                      const uint8_t* mask, int n, int V,
                                                      const T* grad_scale, T* dlogits,
                                                      T* row_loss, double* result) {
    T scale{};
    memory().to_host(&scale, grad_scale, sizeof scale);
    const double out[2] = {softmax_xent_forward_backward(logits, targets, mask, n, V, scale,
                                                         dlogits, row_loss),
                           -1.0};
    memory().from_host(result, out, sizeof out);
  }

  // ---- model.md §7: the BST SSM sublayer ------------------------------------------------------
  // A convolution planned for (length, channels) and any B <= max_batch, F <= max_features.
  // It owns its plans and scratch (allocated here: setup only, never in a step loop).
  virtual std::unique_ptr<FftConvolver<T>> make_fft_conv(int length, int channels, int max_batch,
                                                         int max_features) = 0;
  // dst[r·dst_stride + j] = src[r·src_stride + j] for r < rows, j < width: the gathers and
  // scatters of row blocks (MF block ends, [U_prev; U], zero-padded kernels). No overlap.
  virtual void copy_rows(const T* src, int64_t src_stride, int64_t rows, int64_t width, T* dst,
                         int64_t dst_stride) = 0;
  // S4D kernel generation (model.md §7.1 `s4d`; kernels/ssm/s4d_kernel.h: layouts and formulas):
  // K [R, L] from the parameters (overwrites), and its backward (accumulates into g, null
  // entries skipped). Parameters and gradients are the ParamStore's, in this backend's memory.
  virtual void s4d_kernel_forward(const ssm::S4dDims& d, const ssm::S4dParams<T>& p,
                                  T* kernel) = 0;
  virtual void s4d_kernel_backward(const ssm::S4dDims& d, const ssm::S4dParams<T>& p,
                                   const T* dkernel, const ssm::S4dGrads<T>& g) = 0;
  // The carried S4D state of model.md §7.3 (kernels/ssm/s4d_kernel.h: layouts and formulas). The
  // state is [B, C, Ds, M, 2] doubles in this backend's memory; parameters and gradients are
  // the ParamStore's, u/y/dy activations, active [B] (1: the stream continues a document).
  virtual void s4d_carry_update(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                const T* u, double* state) = 0;
  virtual void s4d_carry_apply(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                               const double* state, T* y) = 0;
  virtual void s4d_carry_apply_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                        const double* state, const uint8_t* active, const T* dy,
                                        const ssm::S4dGrads<T>& g) = 0;
  // Context parallelism's S4D state passing (kernels/ssm/s4d_state_passing.h: formulas). States
  // and their gradients [B, C, Ds, M, 2] doubles, u/dy/du activations, parameters and gradients
  // the ParamStore's, all in this backend's memory.
  virtual void s4d_state_advance(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                 const double* h, double* x, bool adjoint) = 0;
  virtual void s4d_state_apply_grad(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                    const T* dy, double* g) = 0;
  virtual void s4d_state_advance_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                          const double* x_prev, const double* gnext,
                                          const ssm::S4dGrads<T>& g) = 0;
  virtual void s4d_summary_backward(const ssm::S4dCarryDims& d, const ssm::S4dParams<T>& p,
                                    const T* u, const double* dh, T* du,
                                    const ssm::S4dGrads<T>& g) = 0;
  // The implicit filter network of model.md §7.1 `unstructured` (kernels/implicit_filter.h
  // composes it from these, gemm and the column sums), so it runs where its parameters live.
  // Its activation over a, s [n, O]: s[i, o] = sin(freq[o]·a[i, o]) (overwrites s).
  virtual void sine_forward(const T* a, const T* freq, int n, int O, T* s) = 0;
  // Accumulates da[i, o] += ds[i, o]·freq[o]·cos(freq[o]·a[i, o]) and
  // dfreq[o] += Σ_i ds[i, o]·a[i, o]·cos(freq[o]·a[i, o]) (summed in double, fixed order).
  virtual void sine_backward(const T* a, const T* freq, const T* ds, int n, int O, T* da,
                             T* dfreq) = 0;
  // The filters' fixed modulation, in place: x[r, l] *= exp(−(l / length)·rate[r]) for
  // x [filters, length], the factor evaluated in double (rate: |δ_r|, in this backend's memory).
  virtual void implicit_filter_decay(T* x, const double* rate, int filters, int length) = 0;
};

// The CPU backend (OpenBLAS for matrix products, OpenMP for the rest).
template <typename T>
std::unique_ptr<Backend<T>> make_cpu_backend();

}  // namespace brt::kernels
