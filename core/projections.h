// Small composable pieces shared by the layers: a pre-norm attention input (RMSNorm, optional
// learned IDs, Q/K/V projections with per-head L2 normalisation — MODEL.md §2, §3.1, §5.2) and
// the ReLU MLP (MODEL §4). Parameters and activations are separate so one set of parameters
// can serve several saved activations (the recurrent state side runs once per block).
#pragma once

#include <span>
#include <type_traits>
#include <string>
#include <vector>

#include "core/layer.h"
#include "core/param_store.h"
#include "core/tensor_parallel.h"

namespace brt::core {

using kernels::Backend;

struct AttnShape {
  int d_model;   // D
  int heads;     // H (under tensor parallelism: this rank's heads, H / TP)
  int head_dim;  // dh
  int width() const { return heads * head_dim; }
};

// Declares a [D] RMSNorm gain (init 1).
template <typename T>
int declare_norm(ParamStore<T>& store, const std::string& name, int d_model);
// Declares a [in, out] matrix, truncated normal with sigma = sqrt(gain/in)/0.8796 (MODEL §4).
// `shard`: this rank's tensor-parallel slice (default: replicated); the spec keeps the full shape.
template <typename T>
int declare_matrix(ParamStore<T>& store, const std::string& name, int in, int out,
                   double gain = 1.0, ShardSpec shard = {});
// Declares a tensor drawn from N(mean, stddev).
template <typename T>
int declare_normal(ParamStore<T>& store, const std::string& name, std::vector<int64_t> shape,
                   double stddev, ShardSpec shard = {}, double mean = 0.0);
// Declares a per-head scale [H], init 1 (MODEL §3.1).
template <typename T>
int declare_ones(ParamStore<T>& store, const std::string& name, std::vector<int64_t> shape,
                 ShardSpec shard = {});

// h = RMSNorm(x) (+ ids[row % id_rows]); out_j = h·W_j, L2-normalised per head if asked.
struct ProjectionParams {
  int norm = -1;
  int ids = -1;       // optional learned IDs added after the norm (state IDs P, MODEL §5.2)
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
// dout[j]: gradient w.r.t. out[j] (null: no gradient). Accumulates dx and parameter grads.
// scratch_a: [rows, A], scratch_d: [rows, D].
template <typename T>
void projections_backward(Backend<T>& be, ParamStore<T>& store, const ProjectionParams& p,
                          const AttnShape& s, const T* x, int rows,
                          const ProjectionActs<T>& acts, std::type_identity_t<std::span<const T* const>> dout,
                          T* dx, T* scratch_a, T* scratch_d);

// u = ReLU(RMSNorm(y)·W1)·W2 + beta·u (MODEL §4 without the residual). Under TP with beta = 1
// u must not be all-reduced by the caller: the row-parallel sum is formed here.
// Under TP: W1 column-parallel, W2 row-parallel; d_ff is this rank's F / TP hidden units and
// forward all-reduces m·W2 (MODEL §4 unchanged, Megatron's MLP split).
struct MlpParams {
  int norm = -1, w1 = -1, w2 = -1;
  int d_model = 0, d_ff = 0;
  TensorParallel tp;
};

template <typename T>
struct MlpActs {
  kernels::Buffer<T> h;     // [rows, D]
  kernels::Buffer<T> rstd;  // [rows]
  kernels::Buffer<T> m;     // [rows, F] after ReLU (F / TP under TP)
  kernels::Buffer<T> u;     // [rows, D] the row-parallel partial sum (TP > 1 only)
  void allocate(kernels::Memory& memory, const MlpParams& p, int rows);
  int64_t bytes() const;
};

template <typename T>
MlpParams declare_mlp(ParamStore<T>& store, const std::string& prefix_norm,
                      const std::string& prefix_w, int d_model, int d_ff,
                      const TensorParallel& tp = {});

template <typename T>
void mlp_forward(Backend<T>& be, ParamStore<T>& store, const MlpParams& p, const T* y, int rows,
                 MlpActs<T>& acts, T* u, T beta);
// du: gradient w.r.t. u; dm_extra (may be null): an extra gradient w.r.t. the hidden m
// (the dual state MLP's gate reads m, MODEL §5.3). Accumulates dy and parameter grads.
// scratch_f: [2, rows, F], scratch_d: [rows, D].
template <typename T>
void mlp_backward(Backend<T>& be, ParamStore<T>& store, const MlpParams& p, const T* y,
                  int rows, const MlpActs<T>& acts, const T* du, T* dy, T* scratch_f,
                  T* scratch_d, const T* dm_extra = nullptr);

// The output of a layer whose attention reads two sources (recurrent §5.2: window + state;
// BST §7.2: window + context): y = x + concat(a0, a1)·Wo with Wo [2A, D] — under TP this
// rank's rows of both halves, so the partial products are summed over TP before x is added —
// then out = y + MLP(y) (§4).
template <typename T>
void dual_output_forward(Backend<T>& be, ParamStore<T>& store, const TensorParallel& tp, int wo,
                         const MlpParams& mlp, MlpActs<T>& mlp_acts, const T* x, const T* a0,
                         const T* a1, int rows, int A, T* y, T* out);
// Its backward: accumulates dx and the Wo and MLP gradients, OVERWRITES da0, da1 [rows, A]
// (which must not be scratch.d_model, d_ff or d_norm: those it uses).
template <typename T>
void dual_output_backward(Backend<T>& be, ParamStore<T>& store, int wo, const MlpParams& mlp,
                          const MlpActs<T>& mlp_acts, const T* y, const T* a0, const T* a1,
                          int rows, int A, const T* dout, T* dx, BackwardScratch<T>& scratch,
                          T* da0, T* da1);

}  // namespace brt::core
