// The pre-norm attention input of model.md §3.1: h = RMSNorm(x) (§2), optionally plus learned
// IDs (the state IDs P of §5.2), then Q/K/V-style projections h·W_j, each L2-normalised per
// head where asked (V is not). A forward/backward pair with separate parameter and activation
// structs, so one set of parameters can serve several saved activations (the recurrent state
// side runs once per block).
#pragma once

#include <span>
#include <type_traits>
#include <vector>

#include "core/param_store.h"
#include "core/sharding/tensor_parallel.h"
#include "kernels/backend.h"

namespace brt::core {

using kernels::Backend;

struct AttnShape {
  int d_model;   // D
  int heads;     // H (under tensor parallelism: this rank's heads, H / TP)
  int head_dim;  // dh
  int width() const { return heads * head_dim; }
};

// h = RMSNorm(x) (+ ids[row % id_rows]); out_j = h·W_j, L2-normalised per head if asked.
struct ProjectionParams {
  int norm = -1;
  int ids = -1;       // optional learned IDs added after the norm (state IDs P, model.md §5.2)
  int id_rows = 0;
  std::vector<int> weights;      // [D, A] (column-parallel under TP: [D, A/TP] held)
  std::vector<bool> normalised;  // per weight
  // The weights are column-parallel over tp: backward all-reduces dh before the norm and the
  // IDs read it, so their gradients are complete and identical on every TP rank.
  TensorParallel tp;
};

// Activation buffers live in the backend's memory (`memory` below): kernels only.
template <typename T>
struct ProjectionActs {
  kernels::Buffer<T> h;                   // [rows, D]
  kernels::Buffer<T> rstd;                // [rows]
  std::vector<kernels::Buffer<T>> out;    // [rows, A] per projection (normalised where asked)
  std::vector<kernels::Buffer<T>> rnorm;  // [rows, H] per normalised projection (else empty)
  void allocate(kernels::Memory& memory, const ProjectionParams& p, const AttnShape& s, int rows);
  int64_t bytes() const;
};

template <typename T>
void projections_forward(Backend<T>& be, ParamStore<T>& store, const ProjectionParams& p,
                         const AttnShape& s, const T* x, int rows, ProjectionActs<T>& acts);
// dout[j]: gradient w.r.t. out[j] (null: no gradient). Accumulates parameter grads, and dx
// (or, without accumulate_dx, writes it); dx_residual (may be null: the residual path's
// gradient, y = x + attention(x)) is added in the norm's backward pass, before its own term (no
// add of its own). scratch_a: [rows, A], scratch_d: [rows, D].
template <typename T>
void projections_backward(Backend<T>& be, ParamStore<T>& store, const ProjectionParams& p,
                          const AttnShape& s, const T* x, int rows,
                          const ProjectionActs<T>& acts, std::type_identity_t<std::span<const T* const>> dout,
                          T* dx, T* scratch_a, T* scratch_d, std::type_identity_t<const T*> dx_residual = nullptr,
                          bool accumulate_dx = true);

}  // namespace brt::core
