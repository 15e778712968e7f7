// Shared layout logic of the sliding-window attention kernels (model.md §3.2).
//
// Tiling: block t of W queries is cut into panels of c consecutive query rows. Query q sees
// window keys [q, q+W-1] (window row j < W: previous block or cache, j >= W: block t), so a
// panel starting at row r0 needs exactly the band of window rows [r0, r0 + W + c - 1): one
// gemm of c x (W + c - 1) scores, of which only the two triangular corners are masked, so
// little work is wasted (c = W would compute the full W x 2W tile, half of it masked).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/backend.h"

namespace brt::kernels::cpu {

struct WindowGeometry {
  int B, N, W, blocks, H, dh, A;
  int panel;   // c: query rows per panel (divides W)
  int panels;  // W / c
  int band;    // W + c - 1: window rows a panel needs

  WindowGeometry(const WindowAttnDims& d, int wanted_panel, const char* who)
      : B(d.batch), N(d.seq), W(d.window), blocks(0), H(d.heads), dh(d.head_dim),
        A(d.width()) {
    if (B <= 0 || N <= 0 || W <= 0 || H <= 0 || dh <= 0 || N % W != 0) {
      throw std::runtime_error(std::string("kernels/cpu ") + who + ": invalid dims batch=" +
                               std::to_string(B) + " seq=" + std::to_string(N) +
                               " window=" + std::to_string(W) + " heads=" + std::to_string(H) +
                               " head_dim=" + std::to_string(dh) +
                               " (seq must be a positive multiple of window)");
    }
    blocks = N / W;
    panel = choose_panel(W, wanted_panel);
    panels = W / panel;
    band = W + panel - 1;
  }

  // Multiply-adds of one forward (both gemms over the bands): sizes the OpenMP decision.
  int64_t multiply_adds() const { return int64_t{B} * N * H * 2 * band * dh; }

  // Largest divisor of W not above `wanted`; W itself when the divisors are all far smaller
  // (then one panel per block, i.e. the plain W x 2W tile).
  static int choose_panel(int W, int wanted) {
    if (wanted <= 0 || wanted >= W) return W;
    for (int c = wanted; c >= 1; --c) {
      if (W % c == 0) return 4 * c >= wanted ? c : W;
    }
    return W;
  }

  // Element offset of row j of block t's key/value window (model.md §3.2) in its source: the
  // cache [B, W, A] when t == 0 and j < W, else the segment [B, N, A]. Head offset excluded.
  bool from_cache(int t, int j) const { return t == 0 && j < W; }
  int64_t window_row(int b, int t, int j) const {
    if (from_cache(t, j)) return (int64_t{b} * W + j) * A;
    return (int64_t{b} * N + int64_t{t - 1} * W + j) * A;
  }
  // Offset of query row r of block t in a [B, N, A] activation.
  int64_t query_row(int b, int t, int r) const { return (int64_t{b} * N + int64_t{t} * W + r) * A; }
  // Offset of the probs tile [W, 2W] of (b, t, h).
  int64_t probs_tile(int b, int t, int h) const {
    return ((int64_t{b} * blocks + t) * H + h) * int64_t{W} * (2 * W);
  }
};

// The window rows [j0, j1) of a panel, split where they cross from the cache into the
// segment (only in block 0): each part is contiguous in memory with row stride A.
struct BandParts {
  int count = 0;
  int begin[2] = {0, 0};
  int end[2] = {0, 0};
  bool cache[2] = {false, false};

  BandParts(const WindowGeometry& g, int t, int j0, int j1) {
    if (t == 0 && j0 < g.W && j1 > g.W) {
      add(j0, g.W, true);
      add(g.W, j1, false);
    } else {
      add(j0, j1, g.from_cache(t, j0));
    }
  }

 private:
  void add(int a, int b, bool from_cache) {
    begin[count] = a;
    end[count] = b;
    cache[count] = from_cache;
    ++count;
  }
};

}  // namespace brt::kernels::cpu
