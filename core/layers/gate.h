// The gates of model.md §5.3 that update the recurrent state: 'fixed' (a learned per-channel
// EMA) and 'lstm' (input and forget gates computed from the gate input y).
#pragma once

#include <span>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include "core/model_config.h"
#include "core/param_store.h"
#include "core/sharding/sequence_parallel.h"
#include "core/sharding/tensor_parallel.h"
#include "kernels/backend.h"

namespace brt::core {

struct GateParams {
  GateKind kind = GateKind::kFixed;
  int bias = -1;                      // fixed: b [D]
  int wf = -1, wi = -1, bf = -1, bi = -1;  // lstm: W_f, W_i [in, D]; b_f, b_i [D]
  int in = 0;                         // width of the gate input y (this rank's part under TP)
  int d_model = 0;
  // Under TP the gate input y is split by columns (attention heads, MLP hidden units), so W_f
  // and W_i are row-parallel: the pre-activations y·W are all-reduced before the biases.
  TensorParallel tp;
  // Sequence parallelism (recurrent state): carry, u and out hold this rank's rows, y holds
  // every row; the pre-activations are reduce-scattered instead of all-reduced, and the
  // replicated biases' gradients summed over TP. Inactive: all rows everywhere.
  RowSplit seq;
};

// Declares prefix + {bias} or {wf, wi, bf, bi} (model.md §9 names, §5.3 inits). `in` is the full
// width; `in_pieces` says how many equally wide column blocks y is made of (2 for
// concat(A_ss, A_se)), each split over tp. `bias_mean`: the fixed gate's b ~ N(bias_mean, 0.1)
// (model.gate_bias_mean; model.md §5.3's 0 by default); the lstm gate keeps its own offsets.
template <typename T>
GateParams declare_gate(ParamStore<T>& store, const std::string& prefix, GateKind kind, int in,
                        int d_model, const TensorParallel& tp = {}, int in_pieces = 1,
                        double bias_mean = 0.0);

// The gate input y as consecutive column pieces (y = concat(pieces) along columns), so
// y = concat(A_ss, A_se) needs no copy: W_f's rows split the same way.
template <typename T>
using GateInput = std::type_identity_t<std::span<const std::pair<const T*, int>>>;  // (data [rows, width], width)

template <typename T>
struct GateActs {
  kernels::Buffer<T> f, i;  // [rows, D] (lstm only), in the backend's memory
  void allocate(kernels::Memory& memory, const GateParams& p, int rows);
  int64_t bytes() const { return static_cast<int64_t>(f.size() + i.size()) * sizeof(T); }
};

// out = Gate(carry, u, y). zf, zi: [rows, D] scratch (lstm only). `rows` counts carry's
// rows; under p.seq, y has p.seq.full_rows() rows and seq_scratch must be given (sized for
// full rows x D).
template <typename T>
void gate_forward(kernels::Backend<T>& be, ParamStore<T>& store, const GateParams& p,
                  const T* carry, const T* u, const GateInput<T>& y, int rows, T* out,
                  GateActs<T>& acts, T* zf, T* zi, RowSplitScratch<T>* seq_scratch = nullptr);

// Accumulates dcarry, du, dy pieces (lstm only; same split as y) and parameter grads.
// dzf, dzi: [rows, D] scratch.
template <typename T>
void gate_backward(kernels::Backend<T>& be, ParamStore<T>& store, const GateParams& p,
                   const T* carry, const T* u, const GateInput<T>& y, int rows,
                   const GateActs<T>& acts, const T* dout, T* dcarry, T* du,
                   std::type_identity_t<std::span<T* const>> dy, T* dzf, T* dzi,
                   RowSplitScratch<T>* seq_scratch = nullptr);

}  // namespace brt::core
