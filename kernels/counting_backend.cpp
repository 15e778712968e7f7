#include "kernels/counting_backend.h"

#include <cmath>
#include <cstdint>

#include "kernels/cuda/weight_shadow.h"

namespace brt::kernels {

const char* kernel_class_name(KernelClass c) {
  switch (c) {
    case KernelClass::kGemm: return "dense GEMMs";
    case KernelClass::kWindowAttention: return "window attention";
    case KernelClass::kCrossAttention: return "cross-attention";
    case KernelClass::kElementwise: return "elementwise";
    case KernelClass::kCrossEntropy: return "cross-entropy";
    case KernelClass::kSsm: return "SSM";
  }
  return "?";
}

template <typename T>
KernelCounts CountingBackend<T>::total() const {
  KernelCounts t;
  for (const KernelCounts& c : counts_) {
    t.flops += c.flops;
    t.bytes_read += c.bytes_read;
    t.bytes_written += c.bytes_written;
    t.launches += c.launches;
  }
  return t;
}

template <typename T>
void CountingBackend<T>::add(KernelClass c, double flops, double elems_read, double elems_written) {
  KernelCounts& k = counts_[size_t(c)];
  k.flops += flops;
  k.bytes_read += elems_read * double(sizeof(T));
  k.bytes_written += elems_written * double(sizeof(T));
  k.launches += 1;
}

namespace {
// The ReLU bit-mask: a bit per element, in elements of T.
template <typename T>
double mask_elems(int n, int out) {
  return double(relu_mask_bytes(n, out)) / double(sizeof(T));
}

// Elements of T that `n` doubles take (the split loss's row statistics).
template <typename T>
double as_elems(double doubles) {
  return doubles * 8.0 / double(sizeof(T));
}
constexpr KernelClass kGemm = KernelClass::kGemm, kWindow = KernelClass::kWindowAttention,
                      kCross = KernelClass::kCrossAttention, kElem = KernelClass::kElementwise,
                      kXent = KernelClass::kCrossEntropy;
}  // namespace

template <typename T>
void CountingBackend<T>::gemm(Trans ta, Trans tb, int M, int N, int K, T alpha, const T* A, int lda, const T* B,
                              int ldb, T beta, T* C, int ldc) {
  const double m = M, n = N, k = K;
  add(kGemm, 2.0 * m * n * k, m * k + k * n + (beta != T(0) ? m * n : 0.0), m * n);
  if (M > 0 && N > 0 && K > 0) {
    operand(A, ta == Trans::N ? m : k, ta == Trans::N ? k : m, lda);
    operand(B, tb == Trans::N ? k : n, tb == Trans::N ? n : k, ldb);
  }
  run(kGemm, [&] { inner_->gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); });
}

template <typename T>
void CountingBackend<T>::operand(const T* p, double rows, double cols, int ld) {
  if (bf16_activations_.holds(p, int64_t(rows), int64_t(cols), ld)) return;
  if (cuda::weight_shadow_offset(weights_, weights_n_, p, int64_t(rows), int64_t(cols), ld, sizeof(T)) < 0)
    converted(rows * cols);
}

template <typename T>
void CountingBackend<T>::output_gradient(const T* dy, double rows, double cols) {
  if (bf16_activations_.holds(dy, int64_t(rows), int64_t(cols), int(cols)))
    bf16_activations_.release(dy);  // head_l2norm_backward_for_product's, read once
  else
    converted(rows * cols);
}

template <typename T>
void CountingBackend<T>::weights_fixed(const T* values, int64_t n) {
  weights_ = n > 0 ? values : nullptr;
  weights_n_ = weights_ != nullptr ? n : 0;
  if (weights_ == nullptr) bf16_activations_.release_all();  // the model's end
  conversions_.elements += double(weights_n_);
  conversions_.launches += cuda::weight_shadow_launches(weights_n_);
  run(kGemm, [&] { inner_->weights_fixed(values, n); });
}

template <typename T>
void CountingBackend<T>::linear_backward(const T* x, int n, int in, const T* w, int out, const T* dy, T* dx, T* dw,
                                         T dx_beta) {
  const double rows = n, a = in, b = out;
  if (dx != nullptr) add(kGemm, 2.0 * rows * a * b, rows * b + a * b + (dx_beta != T(0) ? rows * a : 0.0), rows * a);
  add(kGemm, 2.0 * rows * a * b, rows * a + rows * b + a * b, a * b);
  if (n > 0 && in > 0 && out > 0) {
    output_gradient(dy, rows, b);                         // dy, once
    if (dx != nullptr) operand(w, a, b, out);             // w
    operand(x, rows, a, in);                              // x
  }
  run(kGemm, [&] { inner_->linear_backward(x, n, in, w, out, dy, dx, dw, dx_beta); });
}

template <typename T>
void CountingBackend<T>::linear_forward_shared(const T* x, int n, int in, int count, const T* const* w, int out,
                                               T* const* y) {
  const double rows = n, a = in, b = out;
  for (int j = 0; j < count; ++j) add(kGemm, 2.0 * rows * a * b, rows * a + a * b, rows * b);
  if (n > 0 && in > 0 && out > 0 && count > 0) {
    operand(x, rows, a, in);
    for (int j = 0; j < count; ++j) operand(w[j], a, b, out);
  }
  run(kGemm, [&] { inner_->linear_forward_shared(x, n, in, count, w, out, y); });
}

template <typename T>
void CountingBackend<T>::linear_relu_forward(const T* x, int n, int in, const T* w, int out, T* y, void* mask,
                                             bool y_for_products) {
  const double rows = n, a = in, b = out;
  const double y_elems = y_for_products ? rows * b * 2.0 / double(sizeof(T)) : rows * b;  // bf16: 2 bytes each
  add(kGemm, 2.0 * rows * a * b, rows * a + a * b, y_elems + mask_elems<T>(n, out));
  if (n > 0 && in > 0 && out > 0) {
    operand(x, rows, a, in);
    operand(w, a, b, out);
  }
  if (y_for_products && n > 0 && out > 0) bf16_activations_.hold(y, n, out);
  else bf16_activations_.release(y);
  run(kGemm, [&] { inner_->linear_relu_forward(x, n, in, w, out, y, mask, y_for_products); });
}

// One product reading the residual as its C (CUDA in bf16: cuBLASLt), no copy.
template <typename T>
void CountingBackend<T>::linear_forward_residual(const T* x, int n, int in, const T* w, int out, const T* residual,
                                                 T* y) {
  const double rows = n, a = in, b = out;
  add(kGemm, 2.0 * rows * a * b, rows * a + a * b + rows * b, rows * b);
  if (n > 0 && in > 0 && out > 0) {
    operand(x, rows, a, in);
    operand(w, a, b, out);
  }
  run(kGemm, [&] { inner_->linear_forward_residual(x, n, in, w, out, residual, y); });
}

template <typename T>
void CountingBackend<T>::mlp_products_backward(const T* x, const T* w1, const T* m, const void* mask, int n, int in,
                                               int hidden, const T* w2, int out, const T* du, const T* dm_extra,
                                               T* dm, T* dx, T* dw1, T* dw2) {
  const double rows = n, a = in, f = hidden, b = out;
  const bool dm_bf16 = dm_extra == nullptr;
  const double dm_elems = dm_bf16 ? rows * f * 2.0 / double(sizeof(T)) : rows * f;  // as written and read
  add(kGemm, 2.0 * rows * f * b, rows * b + f * b + mask_elems<T>(n, hidden) + (dm_bf16 ? 0.0 : rows * f), dm_elems);
  add(kGemm, 2.0 * rows * f * b, rows * f + rows * b + f * b, f * b);      // dw2 += mᵀ·du
  add(kGemm, 2.0 * rows * a * f, dm_elems + a * f, rows * a);              // dx = dm·w1ᵀ
  add(kGemm, 2.0 * rows * a * f, rows * a + dm_elems + a * f, a * f);      // dw1 += xᵀ·dm
  if (n > 0 && in > 0 && hidden > 0 && out > 0) {
    converted(rows * b);  // du, once
    operand(w2, f, b, out);
    operand(m, rows, f, hidden);
    if (!dm_bf16) converted(rows * f);  // dm, once, for its two products
    operand(w1, a, f, hidden);
    operand(x, rows, a, in);
  }
  run(kGemm, [&] { inner_->mlp_products_backward(x, w1, m, mask, n, in, hidden, w2, out, du, dm_extra, dm, dx, dw1, dw2); });
}

template <typename T>
void CountingBackend<T>::relu_linear_backward(const T* x, const void* mask, int n, int in, const T* w, int out,
                                              const T* dy, const T* dx_add, T* dx, T* dw) {
  const double rows = n, a = in, b = out;
  add(kGemm, 2.0 * rows * a * b, rows * b + a * b + mask_elems<T>(n, in) + (dx_add != nullptr ? rows * a : 0.0),
      rows * a);
  add(kGemm, 2.0 * rows * a * b, rows * a + rows * b + a * b, a * b);
  if (n > 0 && in > 0 && out > 0) {
    output_gradient(dy, rows, b);  // dy, once
    operand(w, a, b, out);
    operand(x, rows, a, in);
  }
  run(kGemm, [&] { inner_->relu_linear_backward(x, mask, n, in, w, out, dy, dx_add, dx, dw); });
}

template <typename T>
void CountingBackend<T>::fill(T* x, int64_t n, T value) {
  add(kElem, 0, 0, double(n));
  run(kElem, [&] { inner_->fill(x, n, value); });
}

template <typename T>
void CountingBackend<T>::copy(const T* x, int64_t n, T* y) {
  add(kElem, 0, double(n), double(n));
  run(kElem, [&] { inner_->copy(x, n, y); });
}

template <typename T>
void CountingBackend<T>::add_inplace(T* y, const T* x, int64_t n) {
  add(kElem, double(n), 2.0 * double(n), double(n));
  run(kElem, [&] { inner_->add_inplace(y, x, n); });
}

template <typename T>
void CountingBackend<T>::scale_inplace(T* x, int64_t n, T alpha) {
  add(kElem, double(n), double(n), double(n));
  run(kElem, [&] { inner_->scale_inplace(x, n, alpha); });
}

template <typename T>
void CountingBackend<T>::column_sum_accumulate(const T* dz, int n, int D, T* db) {
  add(kElem, double(n) * D, double(n) * D + D, double(D));
  run(kElem, [&] { inner_->column_sum_accumulate(dz, n, D, db); });
}

template <typename T>
void CountingBackend<T>::add_rows_broadcast(T* out, const T* table, int rows_out, int rows_table, int D) {
  add(kElem, double(rows_out) * D, double(rows_out + rows_table) * D, double(rows_out) * D);
  run(kElem, [&] { inner_->add_rows_broadcast(out, table, rows_out, rows_table, D); });
}

template <typename T>
void CountingBackend<T>::embedding_forward(const int32_t* tokens, int n, const T* table, int D, T* out) {
  add(kElem, 0, double(n) * D, double(n) * D);
  run(kElem, [&] { inner_->embedding_forward(tokens, n, table, D, out); });
}

template <typename T>
void CountingBackend<T>::embedding_backward(const int32_t* tokens, int n, const T* dout, int D, T* dtable) {
  add(kElem, double(n) * D, 2.0 * n * D, double(n) * D);
  run(kElem, [&] { inner_->embedding_backward(tokens, n, dout, D, dtable); });
}

template <typename T>
void CountingBackend<T>::rmsnorm_forward(const T* x, const T* gamma, int n, int D, T* y, T* rstd) {
  add(kElem, 4.0 * n * D, double(n) * D + D, double(n) * D + n);
  run(kElem, [&] { inner_->rmsnorm_forward(x, gamma, n, D, y, rstd); });
  bf16_activations_.release(y);
}

template <typename T>
void CountingBackend<T>::rmsnorm_forward_for_products(const T* x, const T* gamma, int n, int D, T* y, T* rstd) {
  add(kElem, 4.0 * n * D, double(n) * D + D, double(n) * D * 2.0 / double(sizeof(T)) + n);  // y in bf16
  if (n > 0 && D > 0) bf16_activations_.hold(y, n, D);
  run(kElem, [&] { inner_->rmsnorm_forward_for_products(x, gamma, n, D, y, rstd); });
}

template <typename T>
void CountingBackend<T>::rmsnorm_backward(const T* x, const T* gamma, const T* rstd, const T* dy, int n, int D,
                                          T* dx, T* dgamma) {
  add(kElem, 8.0 * n * D, 3.0 * n * D + D + n, double(n) * D + D);  // x, dy and dx (accumulated) read
  run(kElem, [&] { inner_->rmsnorm_backward(x, gamma, rstd, dy, n, D, dx, dgamma); });
}

// One pass: x, dy, the residual and (accumulating) dx read, dx written.
template <typename T>
void CountingBackend<T>::rmsnorm_backward_residual(const T* x, const T* gamma, const T* rstd, const T* dy,
                                                   const T* residual, bool accumulate, int n, int D, T* dx,
                                                   T* dgamma) {
  const double nd = double(n) * D;
  const double rows_read = 2.0 + (residual != nullptr ? 1.0 : 0.0) + (accumulate ? 1.0 : 0.0);
  add(kElem, 8.0 * nd, rows_read * nd + D + n, nd + D);
  run(kElem, [&] { inner_->rmsnorm_backward_residual(x, gamma, rstd, dy, residual, accumulate, n, D, dx, dgamma); });
}

template <typename T>
void CountingBackend<T>::head_l2norm_forward(const T* x, int n, int H, int dh, T* y, T* rnorm) {
  const double a = double(n) * H * dh;
  add(kElem, 3.0 * a, a, a + double(n) * H);
  run(kElem, [&] { inner_->head_l2norm_forward(x, n, H, dh, y, rnorm); });
}

template <typename T>
void CountingBackend<T>::head_l2norm_backward(const T* y, const T* rnorm, const T* dy, int n, int H, int dh,
                                              T* dx) {
  const double a = double(n) * H * dh;
  add(kElem, 6.0 * a, 2.0 * a + double(n) * H, a);  // y, dy read; dx written
  run(kElem, [&] { inner_->head_l2norm_backward(y, rnorm, dy, n, H, dh, dx); });
}

template <typename T>
void CountingBackend<T>::head_l2norm_backward_for_product(const T* y, const T* rnorm, const T* dy, int n, int H,
                                                          int dh, T* dx) {
  const double a = double(n) * H * dh;
  add(kElem, 6.0 * a, 2.0 * a + double(n) * H, a * 2.0 / double(sizeof(T)));  // dx in bf16
  if (a > 0) bf16_activations_.hold(dx, n, int64_t(H) * dh);
  run(kElem, [&] { inner_->head_l2norm_backward_for_product(y, rnorm, dy, n, H, dh, dx); });
}

// Every query scores the whole band of 2W keys (its block and the previous one, masked).
template <typename T>
void CountingBackend<T>::window_attention_forward(const WindowAttnDims& d, const T* q, const T* k, const T* v,
                                                  const T* k_cache, const T* v_cache, const T* rel_bias,
                                                  const T* scale, T* out, T* probs) {
  const double rows = double(d.batch) * d.seq, A = d.width(), band = 2.0 * d.window;
  const double scores = rows * d.heads * band;
  add(kWindow, 4.0 * rows * band * A + 5.0 * scores, 3.0 * rows * A + 2.0 * d.batch * d.window * A,
      rows * A + scores);
  run(kWindow, [&] { inner_->window_attention_forward(d, q, k, v, k_cache, v_cache, rel_bias, scale, out, probs); });
}

// The same work, out written in bf16 and held for the products (as CUDA in bf16 does).
template <typename T>
void CountingBackend<T>::window_attention_forward_for_products(const WindowAttnDims& d, const T* q, const T* k,
                                                               const T* v, const T* k_cache, const T* v_cache,
                                                               const T* rel_bias, const T* scale, T* out, T* probs) {
  const double rows = double(d.batch) * d.seq, A = d.width(), band = 2.0 * d.window;
  const double scores = rows * d.heads * band;
  add(kWindow, 4.0 * rows * band * A + 5.0 * scores, 3.0 * rows * A + 2.0 * d.batch * d.window * A,
      rows * A * 2.0 / double(sizeof(T)) + scores);
  if (rows > 0 && A > 0) bf16_activations_.hold(out, int64_t(rows), int64_t(A));
  run(kWindow, [&] {
    inner_->window_attention_forward_for_products(d, q, k, v, k_cache, v_cache, rel_bias, scale, out, probs);
  });
}

// Reads q, k, v, dout, the cache and the probabilities; writes (or adds to) dq, dk, dv.
template <typename T>
void CountingBackend<T>::count_window_backward(const WindowAttnDims& d) {
  const double rows = double(d.batch) * d.seq, A = d.width(), band = 2.0 * d.window;
  const double scores = rows * d.heads * band;
  add(kWindow, 8.0 * rows * band * A + 5.0 * scores, 4.0 * rows * A + 2.0 * d.batch * d.window * A + scores,
      3.0 * rows * A);
}

template <typename T>
void CountingBackend<T>::window_attention_backward(const WindowAttnDims& d, const T* q, const T* k, const T* v,
                                                   const T* k_cache, const T* v_cache, const T* rel_bias,
                                                   const T* scale, const T* probs, const T* dout, T* dq, T* dk,
                                                   T* dv, T* drel_bias, T* dscale) {
  count_window_backward(d);
  run(kWindow, [&] {
    inner_->window_attention_backward(d, q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout, dq, dk, dv,
                                      drel_bias, dscale);
  });
}

template <typename T>
void CountingBackend<T>::window_attention_backward_write(const WindowAttnDims& d, const T* q, const T* k,
                                                         const T* v, const T* k_cache, const T* v_cache,
                                                         const T* rel_bias, const T* scale, const T* probs,
                                                         const T* dout, T* dq, T* dk, T* dv, T* drel_bias,
                                                         T* dscale) {
  count_window_backward(d);
  run(kWindow, [&] {
    inner_->window_attention_backward_write(d, q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout, dq, dk,
                                            dv, drel_bias, dscale);
  });
}

// The same work, dv written in bf16 and held for its product (as CUDA in bf16 does).
template <typename T>
void CountingBackend<T>::window_attention_backward_write_dv_for_product(
    const WindowAttnDims& d, const T* q, const T* k, const T* v, const T* k_cache, const T* v_cache, const T* rel_bias,
    const T* scale, const T* probs, const T* dout, T* dq, T* dk, T* dv, T* drel_bias, T* dscale) {
  const double rows = double(d.batch) * d.seq, A = d.width(), band = 2.0 * d.window;
  const double scores = rows * d.heads * band;
  add(kWindow, 8.0 * rows * band * A + 5.0 * scores, 4.0 * rows * A + 2.0 * d.batch * d.window * A + scores,
      2.0 * rows * A + rows * A * 2.0 / double(sizeof(T)));
  if (rows > 0 && A > 0) bf16_activations_.hold(dv, int64_t(rows), int64_t(A));
  run(kWindow, [&] {
    inner_->window_attention_backward_write_dv_for_product(d, q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout,
                                                           dq, dk, dv, drel_bias, dscale);
  });
}

template <typename T>
void CountingBackend<T>::cross_attention_forward(const CrossAttnDims& d, const T* q, const T* k, const T* v,
                                                 const T* scale, T* out, T* probs) {
  const double nq = double(d.batch) * d.queries, nk = double(d.batch) * d.keys, A = d.width();
  const double scores = nq * d.heads * d.keys;
  add(kCross, 4.0 * nq * d.keys * A + 5.0 * scores, nq * A + 2.0 * nk * A, nq * A + scores);
  run(kCross, [&] { inner_->cross_attention_forward(d, q, k, v, scale, out, probs); });
}

template <typename T>
void CountingBackend<T>::cross_attention_backward(const CrossAttnDims& d, const T* q, const T* k, const T* v,
                                                  const T* scale, const T* probs, const T* dout, T* dq, T* dk,
                                                  T* dv, T* dscale) {
  const double nq = double(d.batch) * d.queries, nk = double(d.batch) * d.keys, A = d.width();
  const double scores = nq * d.heads * d.keys;
  add(kCross, 8.0 * nq * d.keys * A + 5.0 * scores, 2.0 * nq * A + 2.0 * nk * A + scores, nq * A + 2.0 * nk * A);
  run(kCross, [&] { inner_->cross_attention_backward(d, q, k, v, scale, probs, dout, dq, dk, dv, dscale); });
}

template <typename T>
void CountingBackend<T>::relu_forward(const T* x, int64_t n, T* y) {
  add(kElem, double(n), double(n), double(n));
  run(kElem, [&] { inner_->relu_forward(x, n, y); });
}

template <typename T>
void CountingBackend<T>::relu_backward(const T* y, const T* dy, int64_t n, T* dx) {
  add(kElem, double(n), 2.0 * double(n), double(n));
  run(kElem, [&] { inner_->relu_backward(y, dy, n, dx); });
}

template <typename T>
void CountingBackend<T>::fixed_gate_forward(const T* carry, const T* u, const T* bias, int n, int D, T* out) {
  const double e = double(n) * D;
  add(kElem, 4.0 * e, 2.0 * e + D, e);
  run(kElem, [&] { inner_->fixed_gate_forward(carry, u, bias, n, D, out); });
}

template <typename T>
void CountingBackend<T>::fixed_gate_backward(const T* carry, const T* u, const T* bias, const T* dout, int n,
                                             int D, T* dcarry, T* du, T* dbias) {
  const double e = double(n) * D;
  add(kElem, 6.0 * e, 3.0 * e + D, 2.0 * e + D);
  run(kElem, [&] { inner_->fixed_gate_backward(carry, u, bias, dout, n, D, dcarry, du, dbias); });
}

template <typename T>
void CountingBackend<T>::lstm_gate_forward(const T* carry, const T* u, const T* zf, const T* zi, int n, int D,
                                           T* out, T* f, T* i) {
  const double e = double(n) * D;
  add(kElem, 10.0 * e, 4.0 * e, 3.0 * e);
  run(kElem, [&] { inner_->lstm_gate_forward(carry, u, zf, zi, n, D, out, f, i); });
}

template <typename T>
void CountingBackend<T>::lstm_gate_backward(const T* carry, const T* u, const T* f, const T* i, const T* dout,
                                            int n, int D, T* dcarry, T* du, T* dzf, T* dzi) {
  const double e = double(n) * D;
  add(kElem, 14.0 * e, 5.0 * e, 4.0 * e);
  run(kElem, [&] { inner_->lstm_gate_backward(carry, u, f, i, dout, n, D, dcarry, du, dzf, dzi); });
}

template <typename T>
void CountingBackend<T>::copy_2d(const T* x, int64_t ldx, int rows, int64_t cols, T* y, int64_t ldy,
                                 bool accumulate) {
  const double e = double(rows) * double(cols);
  add(kElem, accumulate ? e : 0.0, accumulate ? 2.0 * e : e, e);
  run(kElem, [&] { inner_->copy_2d(x, ldx, rows, cols, y, ldy, accumulate); });
}

template <typename T>
void CountingBackend<T>::xent_split_max(const T* logits, int n, int V, double* row_max) {
  add(kXent, double(n) * V, double(n) * V, as_elems<T>(n));
  run(kXent, [&] { inner_->xent_split_max(logits, n, V, row_max); });
}

template <typename T>
void CountingBackend<T>::xent_split_sums(const T* logits, const int32_t* local_targets, const uint8_t* mask,
                                         int n, int V, const double* row_max, double* sum_exp,
                                         double* target_logit) {
  add(kXent, 3.0 * n * V, double(n) * V + as_elems<T>(n), as_elems<T>(2.0 * n));
  run(kXent, [&] { inner_->xent_split_sums(logits, local_targets, mask, n, V, row_max, sum_exp, target_logit); });
}

template <typename T>
double CountingBackend<T>::xent_split_finish(const T* logits, const int32_t* local_targets, const uint8_t* mask,
                                             int n, int V, T grad_scale, const double* row_max,
                                             const double* sum_exp, const double* target_logit, T* dlogits,
                                             T* row_loss) {
  add(kXent, 4.0 * n * V, double(n) * V + as_elems<T>(3.0 * n), double(n) * V + n);
  double sum = 0.0;
  run(kXent, [&] {
    sum = inner_->xent_split_finish(logits, local_targets, mask, n, V, grad_scale, row_max, sum_exp, target_logit,
                                    dlogits, row_loss);
  });
  return sum;
}

template <typename T>
double CountingBackend<T>::softmax_xent_forward_backward(const T* logits, const int32_t* targets,
                                                         const uint8_t* mask, int n, int V, T grad_scale,
                                                         T* dlogits, T* row_loss) {
  add(kXent, 7.0 * n * V, 2.0 * n * V, double(n) * V + n);
  double sum = 0.0;
  run(kXent, [&] {
    sum = inner_->softmax_xent_forward_backward(logits, targets, mask, n, V, grad_scale, dlogits, row_loss);
  });
  return sum;
}

template <typename T>
void CountingBackend<T>::softmax_xent_forward_backward_deferred(const T* logits, const int32_t* targets,
                                                                const uint8_t* mask, int n, int V,
                                                                const T* grad_scale, T* dlogits, T* row_loss,
                                                                double* result) {
  add(kXent, 7.0 * n * V, 2.0 * n * V, double(n) * V + n);
  run(kXent, [&] {
    inner_->softmax_xent_forward_backward_deferred(logits, targets, mask, n, V, grad_scale, dlogits, row_loss,
                                                   result);
  });
}

template class CountingBackend<float>;
template class CountingBackend<double>;

}  // namespace brt::kernels
