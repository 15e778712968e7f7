// Test doubles for device residency (docs/gpu.md, "Device residency"): a memory whose pages
// the host cannot touch outside kernel calls, and backends that wrap the CPU backend around
// such a memory. Code that runs correctly on them never dereferences backend memory on the
// host, which is what the CUDA backend needs, and yet computes with the CPU kernels, so its
// results can be compared bit for bit with the plain CPU backend's.
//  - GuardedMemory: bump-allocates from one mmap'd region kept PROT_NONE except while a
//    kernel runs or one of its own copies (to_host / from_host / copy / fill_zero) runs.
//    A host access to its memory anywhere else is a SIGSEGV.
//  - ForwardingBackend<T>: forwards every Backend<T> call to an inner backend between
//    enter() and leave() hooks, and reports a memory of the caller's choice.
//  - GuardedBackend<T>: the CPU backend over a GuardedMemory (unprotect, run, protect).
//  - CountingMemory: host memory that counts the bytes it has handed out and not released
//    (for tests that compare a memory plan with what was allocated).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "kernels/backend.h"

namespace brt::testing {

class GuardedMemory final : public kernels::Memory {
 public:
  explicit GuardedMemory(std::size_t capacity_bytes = std::size_t{1} << 30)
      : page_(std::size_t(sysconf(_SC_PAGESIZE))), capacity_(round_up(capacity_bytes, page_)) {
    void* p = mmap(nullptr, capacity_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
      throw std::runtime_error("GuardedMemory: mmap of " + std::to_string(capacity_) +
                               " bytes failed");
    base_ = static_cast<unsigned char*>(p);
  }
  ~GuardedMemory() override { munmap(base_, capacity_); }
  GuardedMemory(const GuardedMemory&) = delete;
  GuardedMemory& operator=(const GuardedMemory&) = delete;

  std::string name() const override { return "guarded"; }
  bool host_accessible() const override { return false; }

  void* allocate(std::size_t bytes, const char* what) override {
    constexpr std::size_t kAlign = 64;
    const std::size_t begin = round_up(used_, kAlign);
    if (begin + bytes > capacity_)
      throw std::runtime_error(std::string("GuardedMemory: out of memory allocating ") + what +
                               " (" + std::to_string(bytes) + " bytes)");
    used_ = begin + bytes;
    // Fresh anonymous pages are zero and a bump allocator never reuses memory, so the block
    // is already zeroed as allocate() promises.
    return base_ + begin;
  }
  void release(void*) noexcept override {}  // bump allocator: freed with the region

  void to_host(void* dst, const void* src, std::size_t bytes) override {
    Open open(*this);
    std::memcpy(dst, src, bytes);
    host_transfer_bytes_ += bytes;
  }
  void from_host(void* dst, const void* src, std::size_t bytes) override {
    Open open(*this);
    std::memcpy(dst, src, bytes);
    host_transfer_bytes_ += bytes;
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    Open open(*this);
    std::memmove(dst, src, bytes);
  }
  void fill_zero(void* dst, std::size_t bytes) override {
    Open open(*this);
    std::memset(dst, 0, bytes);
  }
  void synchronize() override {}

  // Makes the allocated pages accessible until the matching protect() (calls nest).
  void unprotect() {
    if (open_++ == 0) set_access(PROT_READ | PROT_WRITE);
  }
  void protect() {
    if (--open_ == 0) set_access(PROT_NONE);
  }
  bool contains(const void* p) const {
    const auto* c = static_cast<const unsigned char*>(p);
    return c >= base_ && c < base_ + capacity_;
  }

 private:
  struct Open {
    explicit Open(GuardedMemory& m) : memory(m) { memory.unprotect(); }
    ~Open() { memory.protect(); }
    GuardedMemory& memory;
  };
  static std::size_t round_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }
  void set_access(int prot) {
    const std::size_t span = round_up(used_, page_);
    if (span > 0 && mprotect(base_, span, prot) != 0)
      throw std::runtime_error("GuardedMemory: mprotect failed");
  }

  std::size_t page_, capacity_;
  unsigned char* base_ = nullptr;
  std::size_t used_ = 0;

 public:
  // Bytes handed out so far (the bump pointer): constant across steps when a model allocates
  // nothing in its step loop.
  std::size_t bytes_allocated() const { return used_; }
  // Bytes copied between the host and this memory so far (to_host + from_host): what a step
  // moves over PCIe on a GPU.
  std::size_t host_transfer_bytes() const { return host_transfer_bytes_; }

 private:
  int open_ = 0;
  std::size_t host_transfer_bytes_ = 0;
};

// Host memory that counts the bytes it has handed out and not released.
class CountingMemory final : public kernels::Memory {
 public:
  std::string name() const override { return "host (counting)"; }
  bool host_accessible() const override { return true; }
  void* allocate(std::size_t bytes, const char* what) override {
    void* p = host_.allocate(bytes, what);
    sizes_[p] = bytes;
    live_ += int64_t(bytes);
    return p;
  }
  void release(void* p) noexcept override {
    auto it = sizes_.find(p);
    if (it != sizes_.end()) {
      live_ -= int64_t(it->second);
      sizes_.erase(it);
    }
    host_.release(p);
  }
  void to_host(void* d, const void* s, std::size_t n) override { host_.to_host(d, s, n); }
  void from_host(void* d, const void* s, std::size_t n) override { host_.from_host(d, s, n); }
  void copy(void* d, const void* s, std::size_t n) override { host_.copy(d, s, n); }
  void fill_zero(void* d, std::size_t n) override { host_.fill_zero(d, n); }
  void synchronize() override {}
  int64_t live_bytes() const { return live_; }

 private:
  kernels::Memory& host_ = kernels::host_memory();
  std::unordered_map<void*, std::size_t> sizes_;
  int64_t live_ = 0;
};

// Every Backend<T> call: check(kernel, p) for each pointer argument, enter(); the inner
// backend's; leave() (also when it throws).
template <typename T>
class ForwardingBackend : public kernels::Backend<T> {
 public:
  ForwardingBackend(kernels::Backend<T>& inner, kernels::Memory& memory)
      : inner_(inner), memory_(memory) {}
  const char* name() const override { return "forwarding"; }
  kernels::Memory& memory() override { return memory_; }

  using Trans = kernels::Trans;
  void gemm(Trans ta, Trans tb, int M, int N, int K, T alpha, const T* A, int lda, const T* B,
            int ldb, T beta, T* C, int ldc) override {
    Call c(*this, "gemm", {A, B, C});
    inner_.gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  void linear_forward_shared(const T* x, int n, int in, int count, const T* const* w, int out,
                             T* const* y) override {
    for (int j = 0; j < count; ++j) check("linear_forward_shared", w[j]), check("linear_forward_shared", y[j]);
    Call c(*this, "linear_forward_shared", {x});
    inner_.linear_forward_shared(x, n, in, count, w, out, y);
  }
  void linear_forward_residual(const T* x, int n, int in, const T* w, int out, const T* residual, T* y) override {
    Call c(*this, "linear_forward_residual", {x, w, residual, y});
    inner_.linear_forward_residual(x, n, in, w, out, residual, y);
  }
  void linear_relu_forward(const T* x, int n, int in, const T* w, int out, T* y, void* mask,
                           bool y_for_products) override {
    Call c(*this, "linear_relu_forward", {x, w, y, mask});
    inner_.linear_relu_forward(x, n, in, w, out, y, mask, y_for_products);
  }
  void mlp_products_backward(const T* x, const T* w1, const T* m, const void* mask, int n, int in, int hidden,
                             const T* w2, int out, const T* du, const T* dm_extra, T* dm, T* dx, T* dw1,
                             T* dw2) override {
    Call c(*this, "mlp_products_backward", {x, w1, m, mask, w2, du, dm_extra, dm, dx, dw1, dw2});
    inner_.mlp_products_backward(x, w1, m, mask, n, in, hidden, w2, out, du, dm_extra, dm, dx, dw1, dw2);
  }
  void relu_linear_backward(const T* x, const void* mask, int n, int in, const T* w, int out, const T* dy,
                            const T* dx_add, T* dx, T* dw) override {
    Call c(*this, "relu_linear_backward", {x, mask, w, dy, dx_add, dx, dw});
    inner_.relu_linear_backward(x, mask, n, in, w, out, dy, dx_add, dx, dw);
  }
  void weights_fixed(const T* values, int64_t n) override {
    Call c(*this, "weights_fixed", {values});
    inner_.weights_fixed(values, n);
  }
  void fill(T* x, int64_t n, T value) override {
    Call c(*this, "fill", {x});
    inner_.fill(x, n, value);
  }
  void copy(const T* x, int64_t n, T* y) override {
    Call c(*this, "copy", {x, y});
    inner_.copy(x, n, y);
  }
  void add_inplace(T* y, const T* x, int64_t n) override {
    Call c(*this, "add_inplace", {y, x});
    inner_.add_inplace(y, x, n);
  }
  void scale_inplace(T* x, int64_t n, T alpha) override {
    Call c(*this, "scale_inplace", {x});
    inner_.scale_inplace(x, n, alpha);
  }
  void column_sum_accumulate(const T* dz, int n, int D, T* db) override {
    Call c(*this, "column_sum_accumulate", {dz, db});
    inner_.column_sum_accumulate(dz, n, D, db);
  }
  void add_rows_broadcast(T* out, const T* table, int rows_out, int rows_table, int D) override {
    Call c(*this, "add_rows_broadcast", {out, table});
    inner_.add_rows_broadcast(out, table, rows_out, rows_table, D);
  }
  void embedding_forward(const int32_t* tokens, int n, const T* table, int D, T* out) override {
    Call c(*this, "embedding_forward", {tokens, table, out});
    inner_.embedding_forward(tokens, n, table, D, out);
  }
  void embedding_backward(const int32_t* tokens, int n, const T* dout, int D,
                          T* dtable) override {
    Call c(*this, "embedding_backward", {tokens, dout, dtable});
    inner_.embedding_backward(tokens, n, dout, D, dtable);
  }
  void rmsnorm_forward(const T* x, const T* gamma, int n, int D, T* y, T* rstd) override {
    Call c(*this, "rmsnorm_forward", {x, gamma, y, rstd});
    inner_.rmsnorm_forward(x, gamma, n, D, y, rstd);
  }
  void rmsnorm_forward_for_products(const T* x, const T* gamma, int n, int D, T* y, T* rstd) override {
    Call c(*this, "rmsnorm_forward_for_products", {x, gamma, y, rstd});
    inner_.rmsnorm_forward_for_products(x, gamma, n, D, y, rstd);
  }
  void rmsnorm_backward(const T* x, const T* gamma, const T* rstd, const T* dy, int n, int D,
                        T* dx, T* dgamma) override {
    Call c(*this, "rmsnorm_backward", {x, gamma, rstd, dy, dx, dgamma});
    inner_.rmsnorm_backward(x, gamma, rstd, dy, n, D, dx, dgamma);
  }
  void rmsnorm_backward_residual(const T* x, const T* gamma, const T* rstd, const T* dy, const T* residual,
                                 bool accumulate, int n, int D, T* dx, T* dgamma) override {
    Call c(*this, "rmsnorm_backward_residual", {x, gamma, rstd, dy, residual, dx, dgamma});
    inner_.rmsnorm_backward_residual(x, gamma, rstd, dy, residual, accumulate, n, D, dx, dgamma);
  }
  void head_l2norm_forward(const T* x, int n, int H, int dh, T* y, T* rnorm) override {
    Call c(*this, "head_l2norm_forward", {x, y, rnorm});
    inner_.head_l2norm_forward(x, n, H, dh, y, rnorm);
  }
  void head_l2norm_backward(const T* y, const T* rnorm, const T* dy, int n, int H, int dh,
                            T* dx) override {
    Call c(*this, "head_l2norm_backward", {y, rnorm, dy, dx});
    inner_.head_l2norm_backward(y, rnorm, dy, n, H, dh, dx);
  }
  void head_l2norm_backward_for_product(const T* y, const T* rnorm, const T* dy, int n, int H, int dh,
                                        T* dx) override {
    Call c(*this, "head_l2norm_backward_for_product", {y, rnorm, dy, dx});
    inner_.head_l2norm_backward_for_product(y, rnorm, dy, n, H, dh, dx);
  }
  void window_attention_forward(const kernels::WindowAttnDims& d, const T* q, const T* k,
                                const T* v, const T* k_cache, const T* v_cache,
                                const T* rel_bias, const T* scale, T* out, T* probs) override {
    Call c(*this, "window_attention_forward",
           {q, k, v, k_cache, v_cache, rel_bias, scale, out, probs});
    inner_.window_attention_forward(d, q, k, v, k_cache, v_cache, rel_bias, scale, out, probs);
  }
  void window_attention_forward_for_products(const kernels::WindowAttnDims& d, const T* q, const T* k, const T* v,
                                             const T* k_cache, const T* v_cache, const T* rel_bias,
                                             const T* scale, T* out, T* probs) override {
    Call c(*this, "window_attention_forward_for_products", {q, k, v, k_cache, v_cache, rel_bias, scale, out, probs});
    inner_.window_attention_forward_for_products(d, q, k, v, k_cache, v_cache, rel_bias, scale, out, probs);
  }
  void window_attention_backward(const kernels::WindowAttnDims& d, const T* q, const T* k,
                                 const T* v, const T* k_cache, const T* v_cache,
                                 const T* rel_bias, const T* scale, const T* probs,
                                 const T* dout, T* dq, T* dk, T* dv, T* drel_bias,
                                 T* dscale) override {
    Call c(*this, "window_attention_backward",
           {q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout, dq, dk, dv, drel_bias, dscale});
    inner_.window_attention_backward(d, q, k, v, k_cache, v_cache, rel_bias, scale, probs, dout,
                                     dq, dk, dv, drel_bias, dscale);
  }
  void cross_attention_forward(const kernels::CrossAttnDims& d, const T* q, const T* k,
                               const T* v, const T* scale, T* out, T* probs) override {
    Call c(*this, "cross_attention_forward", {q, k, v, scale, out, probs});
    inner_.cross_attention_forward(d, q, k, v, scale, out, probs);
  }
  void cross_attention_backward(const kernels::CrossAttnDims& d, const T* q, const T* k,
                                const T* v, const T* scale, const T* probs, const T* dout, T* dq,
                                T* dk, T* dv, T* dscale) override {
    Call c(*this, "cross_attention_backward",
           {q, k, v, scale, probs, dout, dq, dk, dv, dscale});
    inner_.cross_attention_backward(d, q, k, v, scale, probs, dout, dq, dk, dv, dscale);
  }
  void relu_forward(const T* x, int64_t n, T* y) override {
    Call c(*this, "relu_forward", {x, y});
    inner_.relu_forward(x, n, y);
  }
  void relu_backward(const T* y, const T* dy, int64_t n, T* dx) override {
    Call c(*this, "relu_backward", {y, dy, dx});
    inner_.relu_backward(y, dy, n, dx);
  }
  void fixed_gate_forward(const T* carry, const T* u, const T* bias, int n, int D,
                          T* out) override {
    Call c(*this, "fixed_gate_forward", {carry, u, bias, out});
    inner_.fixed_gate_forward(carry, u, bias, n, D, out);
  }
  void fixed_gate_backward(const T* carry, const T* u, const T* bias, const T* dout, int n,
                           int D, T* dcarry, T* du, T* dbias) override {
    Call c(*this, "fixed_gate_backward", {carry, u, bias, dout, dcarry, du, dbias});
    inner_.fixed_gate_backward(carry, u, bias, dout, n, D, dcarry, du, dbias);
  }
  void lstm_gate_forward(const T* carry, const T* u, const T* zf, const T* zi, int n, int D,
                         T* out, T* f, T* i) override {
    Call c(*this, "lstm_gate_forward", {carry, u, zf, zi, out, f, i});
    inner_.lstm_gate_forward(carry, u, zf, zi, n, D, out, f, i);
  }
  void lstm_gate_backward(const T* carry, const T* u, const T* f, const T* i, const T* dout,
                          int n, int D, T* dcarry, T* du, T* dzf, T* dzi) override {
    Call c(*this, "lstm_gate_backward", {carry, u, f, i, dout, dcarry, du, dzf, dzi});
    inner_.lstm_gate_backward(carry, u, f, i, dout, n, D, dcarry, du, dzf, dzi);
  }
  void copy_2d(const T* x, int64_t ldx, int rows, int64_t cols, T* y, int64_t ldy,
               bool accumulate) override {
    Call c(*this, "copy_2d", {x, y});
    inner_.copy_2d(x, ldx, rows, cols, y, ldy, accumulate);
  }
  void xent_split_max(const T* logits, int n, int V, double* row_max) override {
    Call c(*this, "xent_split_max", {logits, row_max});
    inner_.xent_split_max(logits, n, V, row_max);
  }
  void xent_split_sums(const T* logits, const int32_t* local_targets, const uint8_t* mask, int n,
                       int V, const double* row_max, double* sum_exp,
                       double* target_logit) override {
    Call c(*this, "xent_split_sums", {logits, local_targets, mask, row_max, sum_exp, target_logit});
    inner_.xent_split_sums(logits, local_targets, mask, n, V, row_max, sum_exp, target_logit);
  }
  double xent_split_finish(const T* logits, const int32_t* local_targets, const uint8_t* mask,
                           int n, int V, T grad_scale, const double* row_max,
                           const double* sum_exp, const double* target_logit, T* dlogits,
                           T* row_loss) override {
    Call c(*this, "xent_split_finish",
           {logits, local_targets, mask, row_max, sum_exp, target_logit, dlogits, row_loss});
    return inner_.xent_split_finish(logits, local_targets, mask, n, V, grad_scale, row_max,
                                    sum_exp, target_logit, dlogits, row_loss);
  }
  double softmax_xent_forward_backward(const T* logits, const int32_t* targets,
                                       const uint8_t* mask, int n, int V, T grad_scale,
                                       T* dlogits, T* row_loss) override {
    Call c(*this, "softmax_xent_forward_backward",
           {logits, targets, mask, dlogits, row_loss});
    return inner_.softmax_xent_forward_backward(logits, targets, mask, n, V, grad_scale,
                                                dlogits, row_loss);
  }
  // A kernel reading the scale from and writing the sum into backend memory (no host copy:
  // what the CUDA backend does).
  void softmax_xent_forward_backward_deferred(const T* logits, const int32_t* targets,
                                              const uint8_t* mask, int n, int V, const T* grad_scale,
                                              T* dlogits, T* row_loss, double* result) override {
    Call c(*this, "softmax_xent_forward_backward_deferred",
           {logits, targets, mask, grad_scale, dlogits, row_loss, result});
    result[0] = inner_.softmax_xent_forward_backward(logits, targets, mask, n, V, *grad_scale,
                                                     dlogits, row_loss);
    result[1] = -1.0;
  }
  // The convolver's calls are kernel calls too: wrapped like the others.
  std::unique_ptr<kernels::FftConvolver<T>> make_fft_conv(int length, int channels, int max_batch,
                                                          int max_features) override {
    return std::make_unique<Convolver>(*this,
                                       inner_.make_fft_conv(length, channels, max_batch, max_features));
  }
  void copy_rows(const T* src, int64_t src_stride, int64_t rows, int64_t width, T* dst,
                 int64_t dst_stride) override {
    Call c(*this, "copy_rows", {src, dst});
    inner_.copy_rows(src, src_stride, rows, width, dst, dst_stride);
  }
  void s4d_kernel_forward(const kernels::ssm::S4dDims& d, const kernels::ssm::S4dParams<T>& p,
                          T* kernel) override {
    Call c(*this, "s4d_kernel_forward", {p.log_dt, p.log_neg_a_re, p.a_im, p.c_re, p.c_im, kernel});
    inner_.s4d_kernel_forward(d, p, kernel);
  }
  void s4d_kernel_backward(const kernels::ssm::S4dDims& d, const kernels::ssm::S4dParams<T>& p,
                           const T* dkernel, const kernels::ssm::S4dGrads<T>& g) override {
    Call c(*this, "s4d_kernel_backward", {p.log_dt, p.log_neg_a_re, p.a_im, p.c_re, p.c_im, dkernel,
                                          g.log_dt, g.log_neg_a_re, g.a_im, g.c_re, g.c_im});
    inner_.s4d_kernel_backward(d, p, dkernel, g);
  }
  void s4d_carry_update(const kernels::ssm::S4dCarryDims& d, const kernels::ssm::S4dParams<T>& p,
                        const T* u, double* state) override {
    Call c(*this, "s4d_carry_update",
           {p.log_dt, p.log_neg_a_re, p.a_im, p.c_re, p.c_im, u, state});
    inner_.s4d_carry_update(d, p, u, state);
  }
  void s4d_carry_apply(const kernels::ssm::S4dCarryDims& d, const kernels::ssm::S4dParams<T>& p,
                       const double* state, T* y) override {
    Call c(*this, "s4d_carry_apply", {p.log_dt, p.log_neg_a_re, p.a_im, p.c_re, p.c_im, state, y});
    inner_.s4d_carry_apply(d, p, state, y);
  }
  void s4d_carry_apply_backward(const kernels::ssm::S4dCarryDims& d,
                                const kernels::ssm::S4dParams<T>& p, const double* state,
                                const uint8_t* active, const T* dy,
                                const kernels::ssm::S4dGrads<T>& g) override {
    Call c(*this, "s4d_carry_apply_backward",
           {p.log_dt, p.log_neg_a_re, p.a_im, p.c_re, p.c_im, state, active, dy, g.log_dt,
            g.log_neg_a_re, g.a_im, g.c_re, g.c_im});
    inner_.s4d_carry_apply_backward(d, p, state, active, dy, g);
  }
  void s4d_state_advance(const kernels::ssm::S4dCarryDims& d, const kernels::ssm::S4dParams<T>& p,
                         const double* h, double* x, bool adjoint) override {
    Call c(*this, "s4d_state_advance", {p.log_dt, p.log_neg_a_re, p.a_im, h, x});
    inner_.s4d_state_advance(d, p, h, x, adjoint);
  }
  void s4d_state_apply_grad(const kernels::ssm::S4dCarryDims& d,
                            const kernels::ssm::S4dParams<T>& p, const T* dy, double* g) override {
    Call c(*this, "s4d_state_apply_grad", {p.log_dt, p.log_neg_a_re, p.a_im, p.c_re, p.c_im, dy, g});
    inner_.s4d_state_apply_grad(d, p, dy, g);
  }
  void s4d_state_advance_backward(const kernels::ssm::S4dCarryDims& d,
                                  const kernels::ssm::S4dParams<T>& p, const double* x_prev,
                                  const double* gnext, const kernels::ssm::S4dGrads<T>& g) override {
    Call c(*this, "s4d_state_advance_backward",
           {p.log_dt, p.log_neg_a_re, p.a_im, x_prev, gnext, g.log_dt, g.log_neg_a_re, g.a_im});
    inner_.s4d_state_advance_backward(d, p, x_prev, gnext, g);
  }
  void s4d_summary_backward(const kernels::ssm::S4dCarryDims& d,
                            const kernels::ssm::S4dParams<T>& p, const T* u, const double* dh,
                            T* du, const kernels::ssm::S4dGrads<T>& g) override {
    Call c(*this, "s4d_summary_backward",
           {p.log_dt, p.log_neg_a_re, p.a_im, u, dh, du, g.log_dt, g.log_neg_a_re, g.a_im});
    inner_.s4d_summary_backward(d, p, u, dh, du, g);
  }
  void sine_forward(const T* a, const T* freq, int n, int O, T* s) override {
    Call c(*this, "sine_forward", {a, freq, s});
    inner_.sine_forward(a, freq, n, O, s);
  }
  void sine_backward(const T* a, const T* freq, const T* ds, int n, int O, T* da,
                     T* dfreq) override {
    Call c(*this, "sine_backward", {a, freq, ds, da, dfreq});
    inner_.sine_backward(a, freq, ds, n, O, da, dfreq);
  }
  void implicit_filter_decay(T* x, const double* rate, int filters, int length) override {
    Call c(*this, "implicit_filter_decay", {x, rate});
    inner_.implicit_filter_decay(x, rate, filters, length);
  }

 protected:
  virtual void check(const char* /*kernel*/, const void* /*pointer*/) {}
  virtual void enter() {}
  virtual void leave() {}

 private:
  struct Call {
    Call(ForwardingBackend& b, const char* kernel, std::initializer_list<const void*> pointers)
        : backend(b) {
      for (const void* p : pointers)
        if (p != nullptr) backend.check(kernel, p);
      backend.enter();
    }
    ~Call() { backend.leave(); }
    ForwardingBackend& backend;
  };
  class Convolver final : public kernels::FftConvolver<T> {
   public:
    Convolver(ForwardingBackend& backend, std::unique_ptr<kernels::FftConvolver<T>> inner)
        : backend_(backend), inner_(std::move(inner)) {}
    void forward(const kernels::ssm::FftConvDims& d, const T* k, const T* u, const T* dskip,
                 T* y) override {
      Call c(backend_, "fft_conv forward", {k, u, dskip, y});
      inner_->forward(d, k, u, dskip, y);
    }
    void backward(const kernels::ssm::FftConvDims& d, const T* k, const T* u, const T* dskip,
                  const T* dy, T* du, T* dk, T* ddskip) override {
      Call c(backend_, "fft_conv backward", {k, u, dskip, dy, du, dk, ddskip});
      inner_->backward(d, k, u, dskip, dy, du, dk, ddskip);
    }

   private:
    ForwardingBackend& backend_;
    std::unique_ptr<kernels::FftConvolver<T>> inner_;
  };
  kernels::Backend<T>& inner_;
  kernels::Memory& memory_;
};

// The CPU backend over a GuardedMemory: kernels see their buffers, nothing else does. Every
// pointer a kernel is given must lie in the guarded memory (as on a GPU, where a host pointer
// would be invalid): anything else throws std::logic_error naming the kernel.
template <typename T>
class GuardedBackend final : public ForwardingBackend<T> {
 public:
  explicit GuardedBackend(std::size_t capacity_bytes = std::size_t{1} << 30)
      : GuardedBackend(kernels::make_cpu_backend<T>(),
                       std::make_unique<GuardedMemory>(capacity_bytes)) {}
  const char* name() const override { return "guarded-cpu"; }
  GuardedMemory& guarded_memory() { return *memory_; }

 protected:
  void check(const char* kernel, const void* pointer) override {
    if (!memory_->contains(pointer))
      throw std::logic_error(std::string("GuardedBackend: kernel ") + kernel +
                             " was given a pointer outside the backend's memory");
  }
  void enter() override { memory_->unprotect(); }
  void leave() override { memory_->protect(); }

 private:
  GuardedBackend(std::unique_ptr<kernels::Backend<T>> cpu, std::unique_ptr<GuardedMemory> memory)
      : ForwardingBackend<T>(*cpu, *memory), cpu_(std::move(cpu)), memory_(std::move(memory)) {}
  std::unique_ptr<kernels::Backend<T>> cpu_;
  std::unique_ptr<GuardedMemory> memory_;
};

}  // namespace brt::testing
