// Kernels must not allocate in steady state (backend.h): after a first call has grown the
// backend's workspace, repeating the same calls performs no C++ heap allocation. Counted by
// replacing the global operator new for this test binary.
#include <atomic>
#include <cstdlib>
#include <new>

#include "window_attention_fixture.h"

#include "tests/common/allocation_counter.h"

namespace brt::kernels::test {
namespace {

TEST(NoAllocation, SteadyStateCallsDoNotAllocate) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const WindowAttnDims d{2, 512, 128, 2, 16};
  const auto cast = [](const std::vector<double>& x) { return cast_to<float>(x); };
  const WindowInputs in = make_window_inputs(rng, d, false);
  const auto q = cast(in.q), k = cast(in.k), v = cast(in.v), kc = cast(in.k_cache),
             vc = cast(in.v_cache), rb = cast(in.rel_bias), s = cast(in.scale);
  std::vector<float> out(q.size()), probs(window_probs_size(d)), dq(q.size()), dk(q.size()),
      dv(q.size()), drb(rb.size()), ds(s.size());
  const CrossAttnDims cd{2, 128, 96, 2, 16, 128 * 32, 96 * 32, true};
  std::vector<float> cprobs(2 * 2 * 128 * 96);
  const int n = 256, V = 300;
  const auto logits = cast(rng.normal(static_cast<std::size_t>(n) * V, 1.0));
  std::vector<float> dlogits(logits.size()), row_loss(n), rstd(n);
  std::vector<int32_t> targets(n, 3);
  std::vector<uint8_t> mask(n, 1);
  std::vector<float> gamma(V, 1.0f), y(logits.size()), dx(logits.size()), dgamma(V);

  auto be = make_cpu_backend<float>();
  const auto run_all = [&] {
    be->window_attention_forward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), rb.data(),
                                 s.data(), out.data(), probs.data());
    be->window_attention_backward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(),
                                  rb.data(), s.data(), probs.data(), out.data(), dq.data(),
                                  dk.data(), dv.data(), drb.data(), ds.data());
    be->cross_attention_forward(cd, q.data(), k.data(), v.data(), s.data(), out.data(),
                                cprobs.data());
    be->cross_attention_backward(cd, q.data(), k.data(), v.data(), s.data(), cprobs.data(),
                                 out.data(), dq.data(), dk.data(), dv.data(), ds.data());
    be->softmax_xent_forward_backward(logits.data(), targets.data(), mask.data(), n, V, 1.0f,
                                      dlogits.data(), row_loss.data());
    be->rmsnorm_forward(logits.data(), gamma.data(), n, V, y.data(), rstd.data());
    be->rmsnorm_backward(logits.data(), gamma.data(), rstd.data(), y.data(), n, V, dx.data(),
                         dgamma.data());
  };
  const long start = brt::testing::heap_allocations().load();
  run_all();  // grows the workspace
  const long before = brt::testing::heap_allocations().load();
  EXPECT_GT(before - start, 0) << "the counter should see the workspace grow on first use";
  run_all();
  run_all();
  EXPECT_EQ(brt::testing::heap_allocations().load() - before, 0);
}

}  // namespace
}  // namespace brt::kernels::test
