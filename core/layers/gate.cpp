#include "core/layers/gate.h"

#include "core/layers/linear.h"

namespace brt::core {

template <typename T>
GateParams declare_gate(ParamStore<T>& store, const std::string& prefix, GateKind kind, int in,
                        int d_model, const TensorParallel& tp, int in_pieces, double bias_mean) {
  GateParams p;
  p.kind = kind;
  p.in = tp.local(in, prefix + "in (gate input width)");
  p.d_model = d_model;
  p.tp = tp;
  if (kind == GateKind::kFixed) {
    p.bias = declare_normal(store, prefix + "bias", {d_model}, 0.1, {}, bias_mean);
  } else {
    // model.md §5.3: kernels truncated normal with gain 0.1, biases N(0, 0.1).
    p.wf = declare_matrix(store, prefix + "wf", in, d_model, 0.1, tp.rows(in_pieces));
    p.wi = declare_matrix(store, prefix + "wi", in, d_model, 0.1, tp.rows(in_pieces));
    p.bf = declare_normal(store, prefix + "bf", {d_model}, 0.1);
    p.bi = declare_normal(store, prefix + "bi", {d_model}, 0.1);
  }
  return p;
}

template <typename T>
void GateActs<T>::allocate(kernels::Memory& memory, const GateParams& p, int rows) {
  if (p.kind != GateKind::kLSTM) return;
  f.allocate(memory, static_cast<size_t>(rows) * p.d_model, "lstm forget gate f");
  i.allocate(memory, static_cast<size_t>(rows) * p.d_model, "lstm input gate i");
}

namespace {

// z = y·W + b, with y given as column pieces and W's rows split to match. Under TP the
// products are partial sums: all-reduced, or under sequence parallelism formed over every row
// (in scratch->full) and reduce-scattered to this rank's rows.
template <typename T>
void gate_preactivation(kernels::Backend<T>& be, const GateParams& p, const T* w, const T* b,
                        const GateInput<T>& y, int rows, int D, T* z,
                        RowSplitScratch<T>* scratch) {
  const bool split = p.seq.active();
  T* target = split ? scratch->full.data() : z;
  const int y_rows = split ? p.seq.full_rows() : rows;
  int row = 0;
  T beta = T(0);
  for (const auto& [data, width] : y) {
    linear_forward(be, data, y_rows, width, w + static_cast<int64_t>(row) * D, D, target, beta);
    row += width;
    beta = T(1);
  }
  if (split)
    p.seq.reduce_scatter(be, target, z, D, scratch->staging.data());
  else
    p.tp.reduce_output(z, static_cast<int64_t>(rows) * D);
  be.add_rows_broadcast(z, b, rows, 1, D);
}

template <typename T>
void gate_preactivation_backward(kernels::Backend<T>& be, const T* w, T* dw, T* db,
                                 const GateInput<T>& y, int rows, int D, const T* dz,
                                 std::span<T* const> dy) {
  int row = 0;
  for (size_t k = 0; k < y.size(); ++k) {
    const auto& [data, width] = y[k];
    const int64_t off = static_cast<int64_t>(row) * D;
    linear_backward(be, data, rows, width, w + off, D, dz, dy[k], dw + off);
    row += width;
  }
  be.column_sum_accumulate(dz, rows, D, db);
}

}  // namespace

template <typename T>
void gate_forward(kernels::Backend<T>& be, ParamStore<T>& store, const GateParams& p,
                  const T* carry, const T* u, const GateInput<T>& y, int rows, T* out,
                  GateActs<T>& acts, T* zf, T* zi, RowSplitScratch<T>* seq_scratch) {
  const int D = p.d_model;
  if (p.kind == GateKind::kFixed) {
    be.fixed_gate_forward(carry, u, store[p.bias].value, rows, D, out);
    return;
  }
  gate_preactivation(be, p, store[p.wf].value, store[p.bf].value, y, rows, D, zf, seq_scratch);
  gate_preactivation(be, p, store[p.wi].value, store[p.bi].value, y, rows, D, zi, seq_scratch);
  be.lstm_gate_forward(carry, u, zf, zi, rows, D, out, acts.f.data(), acts.i.data());
}

template <typename T>
void gate_backward(kernels::Backend<T>& be, ParamStore<T>& store, const GateParams& p,
                   const T* carry, const T* u, const GateInput<T>& y, int rows,
                   const GateActs<T>& acts, const T* dout, T* dcarry, T* du,
                   std::type_identity_t<std::span<T* const>> dy, T* dzf, T* dzi,
                   RowSplitScratch<T>* seq_scratch) {
  const int D = p.d_model;
  if (p.kind == GateKind::kFixed) {
    if (!p.seq.active()) {
      be.fixed_gate_backward(carry, u, store[p.bias].value, dout, rows, D, dcarry, du,
                             store[p.bias].grad);
      return;
    }
    // The replicated bias saw only this rank's rows: sum this contribution over TP.
    T* contribution = seq_scratch->full.data();
    be.fill(contribution, D, T(0));
    be.fixed_gate_backward(carry, u, store[p.bias].value, dout, rows, D, dcarry, du, contribution);
    p.seq.tp().all_reduce_sum(contribution, D);
    be.add_inplace(store[p.bias].grad, contribution, D);
    return;
  }
  const int64_t n = static_cast<int64_t>(rows) * D;
  be.fill(dzf, n, T(0));
  be.fill(dzi, n, T(0));
  be.lstm_gate_backward(carry, u, acts.f.data(), acts.i.data(), dout, rows, D, dcarry, du, dzf,
                        dzi);
  if (!p.seq.active()) {
    gate_preactivation_backward(be, store[p.wf].value, store[p.wf].grad, store[p.bf].grad, y,
                                rows, D, dzf, dy);
    gate_preactivation_backward(be, store[p.wi].value, store[p.wi].grad, store[p.bi].grad, y,
                                rows, D, dzi, dy);
    return;
  }
  // Sequence parallel: the products read every row of y, so gather dz's rows first; the
  // gathered dz also gives the biases their complete gradient on every rank.
  const int full = p.seq.full_rows();
  T* dz_full = seq_scratch->full.data();
  p.seq.all_gather(be, dzf, dz_full, D, seq_scratch->staging.data());
  gate_preactivation_backward(be, store[p.wf].value, store[p.wf].grad, store[p.bf].grad, y, full,
                              D, dz_full, dy);
  p.seq.all_gather(be, dzi, dz_full, D, seq_scratch->staging.data());
  gate_preactivation_backward(be, store[p.wi].value, store[p.wi].grad, store[p.bi].grad, y, full,
                              D, dz_full, dy);
}

#define BRT_INSTANTIATE_GATE(T)                                                              \
  template GateParams declare_gate<T>(ParamStore<T>&, const std::string&, GateKind, int, int,  \
                                      const TensorParallel&, int, double);                   \
  template struct GateActs<T>;                                                               \
  template void gate_forward<T>(kernels::Backend<T>&, ParamStore<T>&, const GateParams&,     \
                                const T*, const T*, const GateInput<T>&, int, T*,            \
                                GateActs<T>&, T*, T*, RowSplitScratch<T>*);                  \
  template void gate_backward<T>(kernels::Backend<T>&, ParamStore<T>&, const GateParams&,    \
                                 const T*, const T*, const GateInput<T>&, int,               \
                                 const GateActs<T>&, const T*, T*, T*, std::span<T* const>,     \
                                 T*, T*, RowSplitScratch<T>*);

BRT_INSTANTIATE_GATE(float)
BRT_INSTANTIATE_GATE(double)

}  // namespace brt::core
