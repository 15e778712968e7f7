// The key/value side of a BST layer's cross-attention (model.md §7.2):
//   hc = RMSNorm_ctx(ctx) (+ E_ctx for MF);  K̂c = norm(hc·Wkc);  Vc = hc·Wvc
// over G groups of context rows: group g feeds attention heads [g·H/G, (g+1)·H/G) only. SH and
// MF use one group; MH uses G = H, head h's keys and values coming from its own context Ctx_h
// through its own columns of Wkc/Wvc.
// Under tensor parallelism Wkc/Wvc are column-parallel (this rank's heads; for MH the groups
// of this rank's heads): the norm runs over every group (replicated), only local groups are
// projected, and backward all-reduces the gradient w.r.t. hc before the norm and the IDs read
// it, so dctx and the replicated gains' gradients are whole and identical on every rank.
#pragma once

#include <vector>

#include "core/param_store.h"
#include "core/layers/projections.h"

namespace brt::core {

struct ContextProjParams {
  int norm = -1;     // attn.ctx_norm.scale [D]
  int ids = -1;      // MF: ssm.ctx_ids [S_ctx, D], added after the norm (else -1)
  int id_rows = 0;
  int wk = -1, wv = -1;  // attn.wkc, attn.wvc [D, A]
  int groups = 1;        // G over all heads (MH: H)
  TensorParallel tp;
  int local_groups() const { return groups > 1 ? groups / tp.size() : 1; }
  int first_group() const { return groups > 1 ? tp.rank() * local_groups() : 0; }
};

// In the backend's memory (docs/gpu.md, "Device residency").
template <typename T>
struct ContextProjActs {
  kernels::Buffer<T> h, rstd;  // [G·rows, D], [G·rows]
  kernels::Buffer<T> k, v;     // [rows, A] (k normalised per head; A, H: this rank's)
  kernels::Buffer<T> rnorm;    // [rows, H]
  void allocate(kernels::Memory& memory, const ContextProjParams& p, const AttnShape& s,
                int64_t rows);
  int64_t bytes() const;
};

// ctx: [G, rows, D].
template <typename T>
void context_proj_forward(kernels::Backend<T>& be, ParamStore<T>& store, const ContextProjParams& p,
                          const AttnShape& s, const T* ctx, int64_t rows, ContextProjActs<T>& acts);
// dk (w.r.t. the normalised keys) and dv: [rows, A]. Accumulates dctx [G, rows, D] and the
// parameter gradients. scratch_a: [rows, A]; scratch_h: [G·rows, D].
template <typename T>
void context_proj_backward(kernels::Backend<T>& be, ParamStore<T>& store,
                           const ContextProjParams& p, const AttnShape& s, const T* ctx,
                           int64_t rows, const ContextProjActs<T>& acts, const T* dk, const T* dv,
                           T* dctx, T* scratch_a, T* scratch_h);

}  // namespace brt::core
