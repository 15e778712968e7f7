// Context parallelism's S4D state passing on the device (kernels/cuda/ssm/s4d_state_passing.cu,
// formulas in kernels/ssm/s4d_state_passing.h) against the CPU backend on fresh random inputs:
// the scan's advance (and its adjoint), the response's state gradient, the advance's and the
// summary's backward (du and the Δ/A gradients accumulated into random values), at a short
// chunk and one past the CPU's 1024-tap re-anchoring of its power walk; and a bit-identical
// rerun. Contracts: the double states and state gradients to 1e-10 relative (the device takes
// powers by exp(l·ΔA), the CPU by walking them: rounding apart, in double); the float outputs
// to the fp32 tolerance.
#include <cmath>
#include <vector>

#include "tests/kernels/cuda/cuda_test_util.h"

namespace brt::kernels::cuda::test {
namespace {

double relative_error_d(const std::vector<double>& a, const std::vector<double>& e) {
  double diff = 0, ref = 0;
  for (std::size_t i = 0; i < e.size(); ++i) {
    diff += (a[i] - e[i]) * (a[i] - e[i]);
    ref += e[i] * e[i];
  }
  return std::isfinite(diff) ? std::sqrt(diff / ref) : INFINITY;
}

constexpr double kDoubleStateTolerance = 1e-10;

struct Inputs {
  std::vector<float> log_dt, a_re, a_im, c_re, c_im, dy, u, du;
  std::vector<double> h, x, gnext, x_prev, dh;
  std::vector<std::vector<float>> grads;  // log_dt, a_re, a_im, c_re, c_im
};

std::vector<double> doubles(Rng& rng, std::size_t n) {
  const auto f = rng.normal(n);
  return {f.begin(), f.end()};
}

Inputs make_inputs(Rng& rng, const ssm::S4dCarryDims& d) {
  const std::size_t R = std::size_t(d.filters()), RM = R * d.modes, S = std::size_t(d.batch) * RM * 2;
  Inputs in;
  in.log_dt.resize(R);
  const auto unit = rng.normal(R);
  for (std::size_t r = 0; r < R; ++r) in.log_dt[r] = -4.6f + 0.5f * std::tanh(unit[r]);
  in.a_re.assign(RM, std::log(0.5f));
  in.a_im.resize(RM);
  for (std::size_t i = 0; i < RM; ++i) in.a_im[i] = 3.14159265f * float(i % std::size_t(d.modes));
  in.c_re = rng.normal(RM);
  in.c_im = rng.normal(RM);
  in.dy = rng.normal(std::size_t(d.batch) * d.channels * d.length * d.features);
  in.u = rng.normal(std::size_t(d.batch) * d.length * d.features);
  in.du = rng.normal(in.u.size());
  in.h = doubles(rng, S);
  in.x = doubles(rng, S);
  in.gnext = doubles(rng, S);
  in.x_prev = doubles(rng, S);
  in.dh = doubles(rng, S);
  in.grads = {rng.normal(R), rng.normal(RM), rng.normal(RM), rng.normal(RM), rng.normal(RM)};
  return in;
}

// Every output of the four ops, one backend's.
struct Outputs {
  std::vector<double> advanced, adjoint, state_grad;
  std::vector<float> du;
  std::vector<std::vector<float>> grads;
};

class CudaS4dStatePassing : public CudaTest {
 protected:
  Outputs run(const Inputs& in, const ssm::S4dCarryDims& d) {
    const ssm::S4dParams<float> p{upload(in.log_dt), upload(in.a_re), upload(in.a_im), upload(in.c_re),
                                  upload(in.c_im)};
    Outputs out;
    double* x = upload(in.x);
    gpu_->s4d_state_advance(d, p, upload(in.h), x, false);
    out.advanced = download(x, in.x.size());
    x = upload(in.x);
    gpu_->s4d_state_advance(d, p, upload(in.h), x, true);
    out.adjoint = download(x, in.x.size());
    double* sg = upload(std::vector<double>(in.x.size(), NAN));  // overwritten, never read
    gpu_->s4d_state_apply_grad(d, p, upload(in.dy), sg);
    out.state_grad = download(sg, in.x.size());
    std::vector<float*> dg;
    for (const auto& v : in.grads) dg.push_back(upload(v));
    const ssm::S4dGrads<float> g{dg[0], dg[1], dg[2], dg[3], dg[4]};
    float* du = upload(in.du);
    gpu_->s4d_state_advance_backward(d, p, upload(in.x_prev), upload(in.gnext), g);
    gpu_->s4d_summary_backward(d, p, upload(in.u), upload(in.dh), du, g);
    out.du = download(du, in.du.size());
    for (size_t i = 0; i < dg.size(); ++i) out.grads.push_back(download(dg[i], in.grads[i].size()));
    return out;
  }

  // The CPU backend's outputs, then the device's twice.
  void check(const Inputs& in, const ssm::S4dCarryDims& d) {
    Backend<float>& cpu = *cpu_;
    Outputs want;
    const ssm::S4dParams<float> p{in.log_dt.data(), in.a_re.data(), in.a_im.data(), in.c_re.data(), in.c_im.data()};
    want.advanced = in.x;
    cpu.s4d_state_advance(d, p, in.h.data(), want.advanced.data(), false);
    want.adjoint = in.x;
    cpu.s4d_state_advance(d, p, in.h.data(), want.adjoint.data(), true);
    want.state_grad.assign(in.x.size(), 0.0);
    cpu.s4d_state_apply_grad(d, p, in.dy.data(), want.state_grad.data());
    want.grads = in.grads;
    want.du = in.du;
    const ssm::S4dGrads<float> g{want.grads[0].data(), want.grads[1].data(), want.grads[2].data(), want.grads[3].data(),
                                 want.grads[4].data()};
    cpu.s4d_state_advance_backward(d, p, in.x_prev.data(), in.gnext.data(), g);
    cpu.s4d_summary_backward(d, p, in.u.data(), in.dh.data(), want.du.data(), g);
    const Outputs got = run(in, d), again = run(in, d);
    EXPECT_LE(relative_error_d(got.advanced, want.advanced), kDoubleStateTolerance) << "advance";
    EXPECT_LE(relative_error_d(got.adjoint, want.adjoint), kDoubleStateTolerance) << "adjoint advance";
    EXPECT_LE(relative_error_d(got.state_grad, want.state_grad), kDoubleStateTolerance) << "apply_grad";
    EXPECT_REL_CLOSE(got.du, want.du, kFp32Tolerance, "summary du");
    const char* names[5] = {"dlog_dt", "da_re", "da_im", "dc_re (untouched)", "dc_im (untouched)"};
    for (int i = 0; i < 5; ++i) EXPECT_REL_CLOSE(got.grads[size_t(i)], want.grads[size_t(i)], kFp32Tolerance, names[i]);
    EXPECT_EQ(got.advanced, again.advanced);
    EXPECT_EQ(got.state_grad, again.state_grad);
    EXPECT_TRUE(bit_identical(got.du, again.du));
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(bit_identical(got.grads[size_t(i)], again.grads[size_t(i)])) << names[i];
  }
};

TEST_F(CudaS4dStatePassing, MatchesTheCpuAndRerunsBitIdentically) {
  SCOPED_TRACE(rng_.trace());
  for (const ssm::S4dCarryDims d : {ssm::S4dCarryDims{2, 3, 5, 4, 37}, ssm::S4dCarryDims{2, 1, 3, 4, 1100}}) {
    SCOPED_TRACE("L = " + std::to_string(d.length));
    const Inputs in = make_inputs(rng_, d);
    check(in, d);
  }
}

}  // namespace
}  // namespace brt::kernels::cuda::test
