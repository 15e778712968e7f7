// Inputs and runners shared by the window-attention tests.
#pragma once

#include <cstring>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "reference.h"

namespace brt::kernels::test {

struct WindowInputs {
  std::vector<double> q, k, v, k_cache, v_cache, rel_bias, scale;
};

inline WindowInputs make_window_inputs(Rng& rng, const WindowAttnDims& d, bool zero_cache) {
  const std::size_t act = static_cast<std::size_t>(d.batch) * d.seq * d.width();
  const std::size_t cache = static_cast<std::size_t>(d.batch) * d.window * d.width();
  WindowInputs in;
  in.q = rng.normal(act, 0.5);
  in.k = rng.normal(act, 0.5);
  in.v = rng.normal(act, 1.0);
  in.k_cache = zero_cache ? std::vector<double>(cache, 0.0) : rng.normal(cache, 0.5);
  in.v_cache = zero_cache ? std::vector<double>(cache, 0.0) : rng.normal(cache, 1.0);
  in.rel_bias = rng.normal(static_cast<std::size_t>(d.heads) * kT5Buckets, 0.5);
  in.scale = rng.uniform(d.heads, 0.5, 2.0);
  return in;
}

// Rounds every input through T, so a reference on the result sees exactly what T sees.
template <typename T>
WindowInputs round_through(const WindowInputs& in) {
  auto r = [](const std::vector<double>& x) {
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = static_cast<double>(static_cast<T>(x[i]));
    return y;
  };
  return {r(in.q), r(in.k), r(in.v), r(in.k_cache), r(in.v_cache), r(in.rel_bias), r(in.scale)};
}

inline std::size_t window_probs_size(const WindowAttnDims& d) {
  return static_cast<std::size_t>(d.batch) * d.blocks() * d.heads * d.window * 2 * d.window;
}

template <typename T>
struct WindowForward {
  std::vector<T> out, probs;
};

template <typename T>
WindowForward<T> run_window_forward(Backend<T>& be, const WindowAttnDims& d,
                                    const WindowInputs& in) {
  const auto q = cast_to<T>(in.q), k = cast_to<T>(in.k), v = cast_to<T>(in.v);
  const auto kc = cast_to<T>(in.k_cache), vc = cast_to<T>(in.v_cache);
  const auto rb = cast_to<T>(in.rel_bias), s = cast_to<T>(in.scale);
  WindowForward<T> f;
  f.out.assign(q.size(), T(7));  // forward must overwrite
  f.probs.assign(window_probs_size(d), T(7));
  be.window_attention_forward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), rb.data(),
                              s.data(), f.out.data(), f.probs.data());
  return f;
}

template <typename T>
struct WindowGrads {
  std::vector<T> dq, dk, dv, drel_bias, dscale;
  bool operator==(const WindowGrads& o) const {
    auto same = [](const std::vector<T>& a, const std::vector<T>& b) {
      return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
    };
    return same(dq, o.dq) && same(dk, o.dk) && same(dv, o.dv) && same(drel_bias, o.drel_bias) &&
           same(dscale, o.dscale);
  }
};

template <typename T>
WindowGrads<T> zero_window_grads(const WindowAttnDims& d) {
  const std::size_t act = static_cast<std::size_t>(d.batch) * d.seq * d.width();
  return {std::vector<T>(act), std::vector<T>(act), std::vector<T>(act),
          std::vector<T>(static_cast<std::size_t>(d.heads) * kT5Buckets),
          std::vector<T>(d.heads)};
}

// Runs backward (accumulating into *g) after a forward on the same backend.
template <typename T>
void run_window_backward(Backend<T>& be, const WindowAttnDims& d, const WindowInputs& in,
                         const std::vector<double>& dout, WindowGrads<T>* g) {
  const auto q = cast_to<T>(in.q), k = cast_to<T>(in.k), v = cast_to<T>(in.v);
  const auto kc = cast_to<T>(in.k_cache), vc = cast_to<T>(in.v_cache);
  const auto rb = cast_to<T>(in.rel_bias), s = cast_to<T>(in.scale);
  const auto dO = cast_to<T>(dout);
  const WindowForward<T> f = run_window_forward(be, d, in);
  be.window_attention_backward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), rb.data(),
                               s.data(), f.probs.data(), dO.data(), g->dq.data(), g->dk.data(),
                               g->dv.data(), g->drel_bias.data(), g->dscale.data());
}

template <typename T>
std::unique_ptr<Backend<T>> backend_with_panel(int attention_panel_rows) {
  cpu::CpuOptions opt;
  opt.attention_panel_rows = attention_panel_rows;
  opt.cross_panel_rows = attention_panel_rows;
  return std::make_unique<cpu::CpuBackend<T>>(opt);
}

}  // namespace brt::kernels::test
