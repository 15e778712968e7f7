// Host emulation check (tests/cuda_emulation/run.sh): the attention, norm, gate and xent
// kernels of kernels/cuda (and the element-wise, column-sum and embedding ones, the implicit
// filter network's sine and decay ops, and tensor
// parallelism's: embedding with -1 tokens, copy_2d, the split cross-entropy), run by the
// emulator, against the CPU backend (float; the float64 backend for the dscale diagnostic).
// Pass any argument for the larger dscale-only cases.
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "kernels/backend.h"
#include "compare.h"
#include "kernels/cuda/launchers.h"
#include "kernels/cuda/device/device_arena.h"
#include "t5_table.h"
using namespace brt::kernels;
using namespace brt::kernels::cuda;
static std::mt19937 gen(1234);
std::vector<float> normal(size_t n, float sd = 1) { std::normal_distribution<float> d(0, sd); std::vector<float> v(n); for (auto& x : v) x = d(gen); return v; }
using emu_check::rel;
void report(const char* what, const std::vector<float>& a, const std::vector<float>& b) { emu_check::report(what, rel(a, b)); }

void window(WindowAttnDims d) {
  std::printf("window B=%d N=%d W=%d H=%d dh=%d\n", d.batch, d.seq, d.window, d.heads, d.head_dim);
  auto cpu = make_cpu_backend<float>();
  DeviceArena scratch(64 << 20, "scratch");
  size_t act = size_t(d.batch) * d.seq * d.width(), cache = size_t(d.batch) * d.window * d.width();
  size_t probs = size_t(d.batch) * d.blocks() * d.heads * d.window * 2 * d.window;
  auto q = normal(act, .4f), k = normal(act, .4f), v = normal(act), kc = normal(cache, .4f), vc = normal(cache);
  auto bias = normal(d.heads * 32, .5f), scale = normal(d.heads, .5f); for (auto& s : scale) s += 1.5f;
  auto dout = normal(act);
  auto dq = normal(act), dk = normal(act), dv = normal(act), db = normal(bias.size()), ds = normal(d.heads);
  auto gdq = dq, gdk = dk, gdv = dv, gdb = db, gds = ds; auto ds0 = ds;
  std::vector<float> out(act), p(probs), gout(act, NAN), gp(probs, NAN);
  cpu->window_attention_forward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(), scale.data(), out.data(), p.data());
  cpu->window_attention_backward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(), scale.data(), p.data(), dout.data(), dq.data(), dk.data(), dv.data(), db.data(), ds.data());
  launch_window_attention_forward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(), scale.data(), gout.data(), gp.data(), emu_t5_buckets(), scratch, nullptr);
  scratch.reset();
  launch_window_attention_backward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(), scale.data(), gp.data(), dout.data(), gdq.data(), gdk.data(), gdv.data(), gdb.data(), gds.data(), true, emu_t5_buckets(), scratch, nullptr);
  report("  out", gout, out); report("  dq", gdq, dq); report("  dk", gdk, dk); report("  dv", gdv, dv); report("  drel_bias", gdb, db); report("  dscale", gds, ds);
  { // Written instead of accumulated (Backend::window_attention_backward_write): NaN on entry, the
    // values of an accumulation into zeros, exactly.
    std::vector<float> zq(act, 0.0f), zk(act, 0.0f), zv(act, 0.0f), wq(act, NAN), wk(act, NAN), wv(act, NAN);
    std::vector<float> b1(db.size()), s1(d.heads), b2(db.size()), s2(d.heads);
    cudaDeviceSynchronize(); scratch.reset();
    launch_window_attention_backward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(), scale.data(), gp.data(), dout.data(), zq.data(), zk.data(), zv.data(), b1.data(), s1.data(), true, emu_t5_buckets(), scratch, nullptr);
    cudaDeviceSynchronize(); scratch.reset();
    launch_window_attention_backward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(), scale.data(), gp.data(), dout.data(), wq.data(), wk.data(), wv.data(), b2.data(), s2.data(), false, emu_t5_buckets(), scratch, nullptr);
    cudaDeviceSynchronize();
    int differ = 0;
    for (size_t i = 0; i < act; ++i) differ += !(wq[i] == zq[i]) + !(wk[i] == zk[i]) + !(wv[i] == zv[i]);
    emu_check::report("  dq, dk, dv written == accumulated into zeros", differ, 0.5); }
  { auto c64 = make_cpu_backend<double>(); auto D = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
    auto q8 = D(q), k8 = D(k), v8 = D(v), kc8 = D(kc), vc8 = D(vc), b8 = D(bias), s8 = D(scale), do8 = D(dout);
    std::vector<double> o8(act), p8(probs), dq8(act), dk8(act), dv8(act), db8(bias.size()), ds8(d.heads);
    c64->window_attention_forward(d, q8.data(), k8.data(), v8.data(), kc8.data(), vc8.data(), b8.data(), s8.data(), o8.data(), p8.data());
    c64->window_attention_backward(d, q8.data(), k8.data(), v8.data(), kc8.data(), vc8.data(), b8.data(), s8.data(), p8.data(), do8.data(), dq8.data(), dk8.data(), dv8.data(), db8.data(), ds8.data());
    for (int h = 0; h < d.heads; ++h) std::printf("  dscale increment h%d: f64 %.9g cpu %.9g gpu %.9g\n", h, ds8[h], double(ds[h]) - ds0[h], double(gds[h]) - ds0[h]);
    std::vector<float> ref_b(db.size()); }
}

void cross(int batch, int nq, int nk, int H, int dh, bool causal, int qpad, int kvpad, bool shared) {
  std::printf("cross batch=%d nq=%d nk=%d causal=%d shared=%d\n", batch, nq, nk, causal, shared);
  auto cpu = make_cpu_backend<float>();
  DeviceArena scratch(64 << 20, "scratch");
  int A = H * dh;
  CrossAttnDims d{batch, nq, nk, H, dh, int64_t(nq + qpad) * A, shared ? 0 : int64_t(nk + kvpad) * A, causal};
  size_t qs = size_t(batch) * d.q_stride, kvs = shared ? size_t(nk) * A : size_t(batch) * d.kv_stride, probs = size_t(batch) * H * nq * nk;
  auto q = normal(qs, .4f), k = normal(kvs, .4f), v = normal(kvs), dout = normal(qs);
  auto scale = normal(H, .5f); for (auto& s : scale) s += 1.5f;
  auto out = normal(qs); auto gout = out;
  auto dq = normal(qs), dk = normal(kvs), dv = normal(kvs), ds = normal(H);
  auto gdq = dq, gdk = dk, gdv = dv, gds = ds;
  std::vector<float> p(probs), gp(probs, NAN);
  cpu->cross_attention_forward(d, q.data(), k.data(), v.data(), scale.data(), out.data(), p.data());
  cpu->cross_attention_backward(d, q.data(), k.data(), v.data(), scale.data(), p.data(), dout.data(), dq.data(), dk.data(), dv.data(), ds.data());
  launch_cross_attention_forward(d, q.data(), k.data(), v.data(), scale.data(), gout.data(), gp.data(), nullptr);
  launch_cross_attention_backward(d, q.data(), k.data(), v.data(), scale.data(), gp.data(), dout.data(), gdq.data(), gdk.data(), gdv.data(), gds.data(), scratch, nullptr);
  report("  out", gout, out); report("  dq", gdq, dq); report("  dk", gdk, dk); report("  dv", gdv, dv); report("  dscale", gds, ds);
}

void others() {
  auto cpu = make_cpu_backend<float>();
  DeviceArena scratch(64 << 20, "scratch");
  { // The implicit filter network's ops (model.md §7.1 unstructured): sine fwd/bwd and the decay.
    int n = 700, O = 64, R = 6, L = 300; auto a = normal(size_t(n) * O, 2), f = normal(O, .3f), ds = normal(a.size());
    for (auto& w : f) w += 1.0f;
    std::vector<float> s(a.size()), gs(a.size(), NAN); auto da = normal(a.size()), df = normal(O); auto gda = da, gdf = df;
    cpu->sine_forward(a.data(), f.data(), n, O, s.data()); cpu->sine_backward(a.data(), f.data(), ds.data(), n, O, da.data(), df.data());
    launch_sine_forward(a.data(), f.data(), n, O, gs.data(), nullptr); launch_sine_backward(a.data(), f.data(), ds.data(), n, O, gda.data(), gdf.data(), scratch, nullptr); scratch.reset();
    report("sine fwd", gs, s); report("sine bwd da", gda, da); report("sine bwd dfreq", gdf, df);
    std::vector<double> rate(R); for (int r = 0; r < R; ++r) rate[r] = 3.0 + 2.5 * r;
    auto x = normal(size_t(R) * L); auto gx = x;
    cpu->implicit_filter_decay(x.data(), rate.data(), R, L); launch_implicit_filter_decay(gx.data(), rate.data(), R, L, nullptr);
    report("implicit_filter_decay", gx, x); }
  { int n = 700, D = 45; auto dz = normal(size_t(n) * D), db = normal(D); auto gdb = db;
    cpu->column_sum_accumulate(dz.data(), n, D, db.data()); launch_column_sum_accumulate(dz.data(), n, D, gdb.data(), scratch, nullptr); scratch.reset();
    report("column_sum", gdb, db);
    auto out = normal(size_t(n) * D), table = normal(size_t(7) * D); auto gout = out;
    cpu->add_rows_broadcast(out.data(), table.data(), n, 7, D); launch_add_rows_broadcast(gout.data(), table.data(), n, 7, D, nullptr);
    report("add_rows_broadcast", gout, out);
    std::vector<float> r(dz.size()), gr(dz.size(), NAN); auto dr = normal(dz.size()); auto gdr = dr; auto g = normal(dz.size());
    cpu->relu_forward(dz.data(), dz.size(), r.data()); cpu->relu_backward(r.data(), g.data(), dz.size(), dr.data());
    launch_relu_forward(dz.data(), dz.size(), gr.data(), nullptr); launch_relu_backward(gr.data(), g.data(), dz.size(), gdr.data(), nullptr);
    report("relu fwd", gr, r); report("relu bwd", gdr, dr); }
  { int V = 40, D = 33, n = 500; std::vector<int32_t> tok(n); for (int i = 0; i < n; ++i) tok[i] = (i * 7919 + i / 3) % V;
    auto table = normal(size_t(V) * D), dout = normal(size_t(n) * D), dt = normal(size_t(V) * D); auto gdt = dt;
    std::vector<float> out(size_t(n) * D), gout(out.size(), NAN);
    cpu->embedding_forward(tok.data(), n, table.data(), D, out.data()); cpu->embedding_backward(tok.data(), n, dout.data(), D, dt.data());
    launch_embedding_forward(tok.data(), n, table.data(), D, gout.data(), nullptr); launch_embedding_backward(tok.data(), n, dout.data(), D, gdt.data(), scratch, nullptr); scratch.reset();
    report("embedding fwd", gout, out); report("embedding bwd", gdt, dt);
    if (std::memcmp(gdt.data(), dt.data(), dt.size() * 4) != 0) { ++emu_check::failures(); std::printf("embedding bwd not bit-identical to CPU\n"); } }
  { int n = 37, D = 333; auto x = normal(size_t(n) * D, 2), g = normal(D), dy = normal(x.size()), dx = normal(x.size()), dg = normal(D);
    auto gdx = dx, gdg = dg; std::vector<float> y(x.size()), r(n), gy(x.size(), NAN), gr(n, NAN);
    cpu->rmsnorm_forward(x.data(), g.data(), n, D, y.data(), r.data()); cpu->rmsnorm_backward(x.data(), g.data(), r.data(), dy.data(), n, D, dx.data(), dg.data());
    launch_rmsnorm_forward(x.data(), g.data(), n, D, gy.data(), gr.data(), nullptr); launch_rmsnorm_backward(x.data(), g.data(), gr.data(), dy.data(), n, D, gdx.data(), gdg.data(), scratch, nullptr); scratch.reset();
    report("rmsnorm y", gy, y); report("rmsnorm rstd", gr, r); report("rmsnorm dx", gdx, dx); report("rmsnorm dgamma", gdg, dg); }
  { int n = 30, H = 3, dh = 40; size_t s = size_t(n) * H * dh; auto x = normal(s), dy = normal(s), dx = normal(s); auto gdx = dx;
    std::vector<float> y(s), r(n * H), gy(s, NAN), gr(n * H, NAN);
    cpu->head_l2norm_forward(x.data(), n, H, dh, y.data(), r.data()); cpu->head_l2norm_backward(y.data(), r.data(), dy.data(), n, H, dh, dx.data());
    launch_head_l2norm_forward(x.data(), n, H, dh, gy.data(), gr.data(), nullptr); launch_head_l2norm_backward(gy.data(), gr.data(), dy.data(), n, H, dh, gdx.data(), nullptr);
    report("l2 y", gy, y); report("l2 rnorm", gr, r); report("l2 dx", gdx, dx);
    // For its projection (head_l2norm_backward_for_product): the same dx, rounded to nearest even.
    std::vector<uint16_t> dx16(s);
    launch_head_l2norm_backward_bf16(gy.data(), gr.data(), dy.data(), n, H, dh, dx16.data(), nullptr);
    cudaDeviceSynchronize();
    int off = 0;
    for (size_t i = 0; i < s; ++i) { uint32_t u; std::memcpy(&u, &gdx[i], 4); off += dx16[i] != uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }
    if (off != 0) { ++emu_check::failures(); std::printf("l2 dx in bf16: %d values not the fp32 dx rounded\n", off); } }
  { int n = 300, D = 70; size_t s = size_t(n) * D; auto c = normal(s), u = normal(s), b = normal(D), dout = normal(s), dc = normal(s), du = normal(s), db = normal(D);
    auto gdc = dc, gdu = du, gdb = db; std::vector<float> out(s), gout(s, NAN);
    cpu->fixed_gate_forward(c.data(), u.data(), b.data(), n, D, out.data()); cpu->fixed_gate_backward(c.data(), u.data(), b.data(), dout.data(), n, D, dc.data(), du.data(), db.data());
    launch_fixed_gate_forward(c.data(), u.data(), b.data(), n, D, gout.data(), nullptr); launch_fixed_gate_backward(c.data(), u.data(), b.data(), dout.data(), n, D, gdc.data(), gdu.data(), gdb.data(), scratch, nullptr); scratch.reset();
    report("fixed out", gout, out); report("fixed dcarry", gdc, dc); report("fixed du", gdu, du); report("fixed dbias", gdb, db); }
  { int n = 9, V = 3001; auto x = normal(size_t(n) * V, 3); std::vector<int32_t> t(n); for (int r = 0; r < n; ++r) t[r] = (r * 977) % V; std::vector<uint8_t> m(n, 1); m[3] = 0;
    std::vector<float> dl(x.size()), loss(n), gloss(n, NAN); auto gx = x;
    double ct = cpu->softmax_xent_forward_backward(x.data(), t.data(), m.data(), n, V, 0.25f, dl.data(), loss.data());
    const double* res = launch_softmax_xent(gx.data(), t.data(), m.data(), n, V, 0.25f, nullptr, gx.data(), gloss.data(), scratch, nullptr); scratch.reset();
    report("xent dlogits (aliased)", gx, dl); report("xent loss", gloss, loss); std::printf("xent total cpu %.9g gpu %.9g bad_row %g\n", ct, res[0], res[1]);
    if (std::abs(ct - res[0]) > 1e-5 * std::abs(ct) || res[1] != -1.0) ++emu_check::failures(); }
}

// Tensor parallelism's kernels (backend.h: embedding with -1 tokens, copy_2d, xent_split_*).
void tensor_parallel() {
  auto cpu = make_cpu_backend<float>();
  DeviceArena scratch(64 << 20, "scratch");
  auto bits = [](const char* what, const std::vector<float>& a, const std::vector<float>& b) {
    report(what, a, b);
    if (std::memcmp(a.data(), b.data(), b.size() * 4) != 0) { ++emu_check::failures(); std::printf("%s not bit-identical to CPU\n", what); } };
  { int V = 40, D = 33, n = 300; std::vector<int32_t> tok(n); for (int i = 0; i < n; ++i) tok[i] = (i * 7919 + i / 3) % (V + 1) - 1;
    auto table = normal(size_t(V) * D), dout = normal(size_t(n) * D), dt = normal(size_t(V) * D); auto gdt = dt;
    std::vector<float> out(size_t(n) * D), gout(out.size(), NAN);
    cpu->embedding_forward(tok.data(), n, table.data(), D, out.data()); cpu->embedding_backward(tok.data(), n, dout.data(), D, dt.data());
    launch_embedding_forward(tok.data(), n, table.data(), D, gout.data(), nullptr); launch_embedding_backward(tok.data(), n, dout.data(), D, gdt.data(), scratch, nullptr); scratch.reset();
    bits("embedding fwd, -1 tokens", gout, out); bits("embedding bwd, -1 tokens", gdt, dt); }
  for (bool acc : {false, true}) { int rows = 7; int64_t cols = 50, ldx = 61, ldy = 130; auto x = normal(size_t(rows) * ldx), y = normal(size_t(rows) * ldy); auto gy = y;
    cpu->copy_2d(x.data(), ldx, rows, cols, y.data(), ldy, acc); launch_copy_2d(x.data(), ldx, rows, cols, gy.data(), ldy, acc, nullptr);
    bits(acc ? "copy_2d accumulate" : "copy_2d", gy, y); }
  { int n = 9, V = 1001; auto x = normal(size_t(n) * V, 3); std::vector<int32_t> t(n); for (int r = 0; r < n; ++r) t[r] = (r * 977) % (V + 1) - 1;
    std::vector<uint8_t> m(n, 1); m[3] = 0;
    std::vector<double> mx(n), gmx(n, NAN), sm(n), gsm(n, NAN), tl(n), gtl(n, NAN);
    cpu->xent_split_max(x.data(), n, V, mx.data()); launch_xent_split_max(x.data(), n, V, gmx.data(), nullptr);
    cpu->xent_split_sums(x.data(), t.data(), m.data(), n, V, mx.data(), sm.data(), tl.data());
    launch_xent_split_sums(x.data(), t.data(), m.data(), n, V, mx.data(), gsm.data(), gtl.data(), nullptr);
    cudaDeviceSynchronize();  // the streams run only when waited for
    auto f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
    report("xent_split max", f(gmx), f(mx)); report("xent_split sum_exp", f(gsm), f(sm)); report("xent_split target", f(gtl), f(tl));
    std::vector<float> dl(x.size()), loss(n), gloss(n, NAN); auto gx = x;
    double ct = cpu->xent_split_finish(x.data(), t.data(), m.data(), n, V, 0.25f, mx.data(), sm.data(), tl.data(), dl.data(), loss.data());
    const double* gt = launch_xent_split_finish(gx.data(), t.data(), m.data(), n, V, 0.25f, mx.data(), sm.data(), tl.data(), gx.data(), gloss.data(), scratch, nullptr); scratch.reset();
    report("xent_split dlogits (aliased)", gx, dl); report("xent_split loss", gloss, loss); std::printf("xent_split total cpu %.12g gpu %.12g\n", ct, *gt);
    if (std::abs(ct - *gt) > 1e-9 * std::abs(ct)) ++emu_check::failures(); }
}

int main(int argc, char**) {
  if (argc > 1) { window({1, 256, 128, 1, 64}); window({2, 256, 128, 2, 64}); return 0; }
  others();
  tensor_parallel();
  window({2, 32, 16, 2, 16});
  window({1, 24, 24, 1, 40});
  window({1, 256, 128, 1, 64});
  cross(3, 12, 20, 2, 16, false, 0, 0, false);
  cross(2, 17, 17, 1, 40, true, 5, 3, false);
  cross(3, 10, 6, 2, 16, false, 0, 0, true);
  std::printf("failures: %d\n", emu_check::failures());
  return emu_check::failures() != 0;
}
