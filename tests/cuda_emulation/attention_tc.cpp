// Host emulation check of the bf16 tensor-core attentions (kernels/cuda/attention/attention_tc.cu, window;
// cross_attention_tc.cu;
// tests/cuda_emulation/run.sh <build> tc, and ctest's cuda_emulated_tensor_core_attention):
// forward and backward against the fp32 CPU backend at bf16's tolerance, and every cuBLAS call
// it makes inspected as the emulated cuBLAS recorded it — strided-batched, bf16 × bf16 operands,
// fp32 output and CUBLAS_COMPUTE_32F, one call per product over all B·T·H problems.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>
#include "kernels/backend.h"
#include "compare.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/device/device_arena.h"
#include "t5_table.h"
using namespace brt::kernels;
using namespace brt::kernels::cuda;
static std::mt19937 gen(4321);
std::vector<float> normal(size_t n, float sd = 1) { std::normal_distribution<float> d(0, sd); std::vector<float> v(n); for (auto& x : v) x = d(gen); return v; }
using emu_check::rel;

// The bf16 tensor-core window attention (attention_tc.cu) against the fp32 CPU backend: every
// product goes through the emulated cublasGemmStridedBatchedEx, which records its types.
void window_tc(WindowAttnDims d) {
  std::printf("window (tensor cores, bf16) B=%d N=%d W=%d H=%d dh=%d\n", d.batch, d.seq, d.window, d.heads, d.head_dim);
  auto cpu = make_cpu_backend<float>();
  DeviceArena scratch(window_attention_tc_scratch_bytes(d) + (4 << 20), "scratch");
  cublasHandle_t handle; cublasCreate(&handle);
  size_t act = size_t(d.batch) * d.seq * d.width(), cache = size_t(d.batch) * d.window * d.width();
  size_t probs = size_t(d.batch) * d.blocks() * d.heads * d.window * 2 * d.window;
  // Unit-norm-like q, k rows (the model L2-normalises them, model.md §3.1) and scales near 1.5.
  const float qs = 1.0f / std::sqrt(float(d.head_dim));
  auto q = normal(act, qs), k = normal(act, qs), v = normal(act), kc = normal(cache, qs), vc = normal(cache);
  auto bias = normal(d.heads * 32, .5f), scale = normal(d.heads, .3f); for (auto& s : scale) s += 4.0f;
  auto dout = normal(act);
  // Gradients from zero, so the comparison is of the increments themselves.
  std::vector<float> dq(act), dk(act), dv(act), db(bias.size()), ds(d.heads);
  auto gdq = dq, gdk = dk, gdv = dv, gdb = db, gds = ds;
  std::vector<float> out(act), p(probs), gout(act, NAN), gp(probs, NAN);
  cpu->window_attention_forward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(), scale.data(), out.data(), p.data());
  cpu->window_attention_backward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(), scale.data(), p.data(), dout.data(), dq.data(), dk.data(), dv.data(), db.data(), ds.data());
  const size_t calls0 = emu::batched_gemm_calls().size();
  launch_window_attention_forward_tc(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(), scale.data(), gout.data(), gp.data(), emu_t5_buckets(), handle, scratch, nullptr);
  scratch.reset();
  launch_window_attention_backward_tc(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(), scale.data(), gp.data(), dout.data(), gdq.data(), gdk.data(), gdv.data(), gdb.data(), gds.data(), true, emu_t5_buckets(), handle, scratch, nullptr);
  // bf16 operands (8 significant bits): ~1e-2 relative is the expected size of the difference.
  const double tol = 3e-2;
  emu_check::report("  out", rel(gout, out), tol);
  emu_check::report("  dq", rel(gdq, dq), tol); emu_check::report("  dk", rel(gdk, dk), tol); emu_check::report("  dv", rel(gdv, dv), tol);
  emu_check::report("  drel_bias", rel(gdb, db), tol); emu_check::report("  dscale", rel(gds, ds), tol);
  int wrong = 0, n = 0;
  for (size_t c = calls0; c < emu::batched_gemm_calls().size(); ++c, ++n) {
    const auto& r = emu::batched_gemm_calls()[c];
    if (r.a != CUDA_R_16BF || r.b != CUDA_R_16BF || r.c != CUDA_R_32F || r.compute != CUBLAS_COMPUTE_32F ||
        r.batch != d.batch * d.blocks() * d.heads) ++wrong;
  }
  std::printf("  %d strided-batched cuBLAS calls, bf16 x bf16 -> fp32, compute 32F, batch B*T*H = %d: %s\n", n,
              d.batch * d.blocks() * d.heads, wrong == 0 && n == 6 ? "ok" : "FAIL");
  if (wrong != 0 || n != 6) ++emu_check::failures();  // forward S, O; backward dP, dQ, dK, dV
  // Written instead of accumulated (Backend::window_attention_backward_write): NaN on entry, and
  // the values of the accumulation into zeros above, exactly.
  std::vector<float> wdq(act, NAN), wdk(act, NAN), wdv(act, NAN), wdb(bias.size()), wds(d.heads);
  scratch.reset();
  launch_window_attention_backward_tc(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(), scale.data(), gp.data(), dout.data(), wdq.data(), wdk.data(), wdv.data(), wdb.data(), wds.data(), false, emu_t5_buckets(), handle, scratch, nullptr);
  cudaDeviceSynchronize();  // the emulated stream runs its work when waited for
  int differ = 0;
  for (size_t i = 0; i < act; ++i) differ += !(wdq[i] == gdq[i]) + !(wdk[i] == gdk[i]) + !(wdv[i] == gdv[i]);
  emu_check::report("  dq, dk, dv written == accumulated into zeros", differ, 0.5);
  cublasDestroy(handle);
}

// The bf16 tensor-core cross-attention (cross_attention_tc.cu) against the fp32 CPU backend,
// with padded strides, the causal mask and K/V shared by the batch (kv_stride 0).
void cross_tc(int batch, int nq, int nk, int H, int dh, bool causal, int qpad, int kvpad, bool shared) {
  std::printf("cross (tensor cores, bf16) batch=%d nq=%d nk=%d H=%d dh=%d causal=%d shared=%d\n", batch, nq, nk, H, dh, causal, shared);
  auto cpu = make_cpu_backend<float>();
  const int A = H * dh;
  CrossAttnDims d{batch, nq, nk, H, dh, int64_t(nq + qpad) * A, shared ? 0 : int64_t(nk + kvpad) * A, causal};
  DeviceArena scratch(cross_attention_tc_scratch_bytes(d) + (4 << 20), "scratch");
  cublasHandle_t handle; cublasCreate(&handle);
  const size_t qs = size_t(batch) * d.q_stride, kvs = shared ? size_t(nk) * A : size_t(batch) * d.kv_stride;
  const size_t probs = size_t(batch) * H * nq * nk;
  const float unit = 1.0f / std::sqrt(float(dh));
  auto q = normal(qs, unit), k = normal(kvs, unit), v = normal(kvs), dout = normal(qs);
  auto scale = normal(H, .3f); for (auto& s : scale) s += 4.0f;
  std::vector<float> out(qs), gout(qs), dq(qs), dk(kvs), dv(kvs), ds(H), p(probs), gp(probs, NAN);
  auto gdq = dq, gdk = dk, gdv = dv, gds = ds;
  cpu->cross_attention_forward(d, q.data(), k.data(), v.data(), scale.data(), out.data(), p.data());
  cpu->cross_attention_backward(d, q.data(), k.data(), v.data(), scale.data(), p.data(), dout.data(), dq.data(), dk.data(), dv.data(), ds.data());
  const size_t calls0 = emu::batched_gemm_calls().size();
  launch_cross_attention_forward_tc(d, q.data(), k.data(), v.data(), scale.data(), gout.data(), gp.data(), handle, scratch, nullptr);
  scratch.reset();
  launch_cross_attention_backward_tc(d, q.data(), k.data(), v.data(), scale.data(), gp.data(), dout.data(), gdq.data(), gdk.data(), gdv.data(), gds.data(), handle, scratch, nullptr);
  const double tol = 3e-2;
  emu_check::report("  out", rel(gout, out), tol); emu_check::report("  dq", rel(gdq, dq), tol);
  emu_check::report("  dk", rel(gdk, dk), tol); emu_check::report("  dv", rel(gdv, dv), tol);
  emu_check::report("  dscale", rel(gds, ds), tol);
  int wrong = 0, n = 0;
  for (size_t c = calls0; c < emu::batched_gemm_calls().size(); ++c, ++n) {
    const auto& r = emu::batched_gemm_calls()[c];
    if (r.a != CUDA_R_16BF || r.b != CUDA_R_16BF || r.c != CUDA_R_32F || r.compute != CUBLAS_COMPUTE_32F) ++wrong;
  }
  // Uniform strides: one call per product (6); shared K/V: 4 products per head + 2.
  const int want = shared && batch > 1 ? 4 * H + 2 : 6;
  std::printf("  %d strided-batched cuBLAS calls (want %d), all bf16 x bf16 -> fp32, compute 32F: %s\n", n, want,
              wrong == 0 && n == want ? "ok" : "FAIL");
  if (wrong != 0 || n != want) ++emu_check::failures();
  cublasDestroy(handle);
}

int main() {
  window_tc({2, 32, 16, 2, 16});
  window_tc({1, 48, 24, 3, 40});
  window_tc({1, 64, 64, 1, 32});  // one block (Transformer-XL's shape)
  cross_tc(3, 12, 20, 2, 16, false, 0, 0, false);
  cross_tc(2, 17, 17, 1, 40, true, 5, 3, false);  // causal (BST SH/MH), padded strides
  cross_tc(3, 10, 6, 2, 16, false, 0, 0, true);   // K/V shared by the batch
  std::printf("failures: %d\n", emu_check::failures());
  return emu_check::failures() != 0;
}
