#include "core/diagnostics.h"

#include "kernels/memory.h"

namespace brt::core {

const char* carry_ablation_name(CarryAblation a) {
  switch (a) {
    case CarryAblation::kNone: return "none";
    case CarryAblation::kSegment: return "segment";
    case CarryAblation::kBlock: return "block";
  }
  return "?";
}

std::vector<double*> LayerDiagnostics::sums() {
  std::vector<double*> out;
  for (MomentSums* m : {&gate, &gate_input, &gate2, &gate2_input, &state_share})
    for (double* v : {&m->sum, &m->sum_sq, &m->count}) out.push_back(v);
  return out;
}

template <typename T>
void accumulate_state_share(kernels::Backend<T>& be, const T* a_self, const T* a_state,
                            const T* wo, int rows, int A, int D, const uint8_t* mask,
                            T* scratch_a, T* scratch_b, MomentSums& share) {
  using kernels::Trans;
  // The two halves of Y − X = concat(A_self, A_state)·Wo (model.md §5.2, §7.2), separately.
  be.gemm(Trans::N, Trans::N, rows, D, A, T(1), a_self, A, wo, D, T(0), scratch_a, D);
  be.gemm(Trans::N, Trans::N, rows, D, A, T(1), a_state, A, wo + int64_t(A) * D, D, T(0),
          scratch_b, D);
  const auto self_part = kernels::copy_to_host(be.memory(), scratch_a, size_t(rows) * D);
  const auto state_part = kernels::copy_to_host(be.memory(), scratch_b, size_t(rows) * D);
  for (int r = 0; r < rows; ++r) {
    if (!mask[r]) continue;
    double ns = 0, nt = 0;
    for (int d = 0; d < D; ++d) {
      const double s = self_part[size_t(r) * D + d], t = state_part[size_t(r) * D + d];
      ns += s * s;
      nt += t * t;
    }
    ns = std::sqrt(ns);
    nt = std::sqrt(nt);
    if (ns + nt > 0) share.add(nt / (ns + nt));
  }
}

template void accumulate_state_share<float>(kernels::Backend<float>&, const float*, const float*,
                                            const float*, int, int, int, const uint8_t*, float*,
                                            float*, MomentSums&);
template void accumulate_state_share<double>(kernels::Backend<double>&, const double*,
                                             const double*, const double*, int, int, int,
                                             const uint8_t*, double*, double*, MomentSums&);

}  // namespace brt::core
