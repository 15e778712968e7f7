// Host emulation check (tests/cuda_emulation/run.sh): the optimizer kernels of kernels/cuda
// (optimizer.cu), run by the emulator behind core's AdamW and Adafactor, against the same
// optimizers on the CPU kernels: values, every state tensor and the gradient norms over
// several steps (factored, unfactored, rank-3 and r > c tensors; clipping active), plus
// clip_gradients through the emulated sum of squares and scale.
#include <cmath>
#include <cstring>
#include <cstdio>
#include <random>
#include <vector>
#include "core/optim/grad_clip.h"
#include "core/optim/optimizer.h"
#include "kernels/cuda/optim/optimizer_launchers.h"
#include "compare.h"
using namespace brt;
using namespace brt::kernels;
using namespace brt::kernels::cuda;

// Host memory stands for device memory here, which core reads directly: each call waits for
// the emulated device (whose streams otherwise run only when waited for).
class EmulatedCudaKernels final : public OptimizerKernels<float> {
 public:
  const char* name() const override { return "emulated-cuda"; }
  Memory& memory() override { return host_memory(); }
  using Scalars = OptimStepScalars<float>;
  void sum_squares(OptimField f, const OptimChunk* c, int64_t n, const OptimTensor<float>* t, double* p) override { launch_optim_sum_squares(f, c, n, t, p, nullptr); cudaDeviceSynchronize(); }
  void grad_norm_finish(int32_t n, const int64_t* first, double* p, double clip, const double* loss, Scalars* step) override { launch_grad_norm_finish(n, first, p, clip, loss, step, nullptr); cudaDeviceSynchronize(); }
  void segment_sums(int32_t n, const int64_t* first, const double* p, double* sums) override { launch_segment_sums(n, first, p, sums, nullptr); cudaDeviceSynchronize(); }
  void gather_stats(int64_t n, const int64_t* index, const double* from, double* to) override { launch_move_stats(n, index, from, to, false, nullptr); cudaDeviceSynchronize(); }
  void scatter_stats(int64_t n, const int64_t* index, const double* from, double* to) override { launch_move_stats(n, index, from, to, true, nullptr); cudaDeviceSynchronize(); }
  void scale(float* x, int64_t n, float s) override { launch_optim_scale(x, n, s, nullptr); cudaDeviceSynchronize(); }
  void adamw_update(const AdamWStep<float>& s, const Scalars* step, const OptimChunk* c, int64_t n, const OptimTensor<float>* t) override { launch_adamw_update(s, step, c, n, t, nullptr); cudaDeviceSynchronize(); }
  void adafactor_second_moment(const OptimChunk* c, int64_t n, const OptimTensor<float>* t, const Scalars* step, float eps, double* psq, double* ysq) override { launch_adafactor_second_moment(c, n, t, step, eps, psq, ysq, nullptr); cudaDeviceSynchronize(); }
  void adafactor_gradient_sums(const OptimTensor<float>& t, const Scalars* step, float eps, double* r, double* c, double* s) override { launch_adafactor_gradient_sums(t, step, eps, r, c, s, nullptr); cudaDeviceSynchronize(); }
  int64_t adafactor_sums_scratch(const OptimTensor<float>& t) const override { return adafactor_sums_tiling(t).scratch(); }
  void adafactor_update_factors(const OptimTensor<float>& t, const Scalars* step, const double* r, const double* c, double* m) override { launch_adafactor_update_factors(t, step, r, c, m, nullptr); cudaDeviceSynchronize(); }
  void adafactor_compute_factors(const OptimTensor<float>& t, const double* m) override { launch_adafactor_compute_factors(t, m, nullptr); cudaDeviceSynchronize(); }
  void adafactor_factored_update_squares(const OptimChunk* c, int64_t n, const OptimTensor<float>* t, const Scalars* step, double* ysq) override { launch_adafactor_factored_update_squares(c, n, t, step, ysq, nullptr); cudaDeviceSynchronize(); }
  void adafactor_coefficients(int32_t n, const int64_t* first, const int64_t* count, const double* psq, const double* ysq, const AdafactorScalars& s, const Scalars* step, float* coef) override { launch_adafactor_coefficients(n, first, count, psq, ysq, s, step, coef, nullptr); cudaDeviceSynchronize(); }
  void adafactor_apply(const OptimChunk* c, int64_t n, const OptimTensor<float>* t, const float* coef, const Scalars* step, float b1, float omb1) override { launch_adafactor_apply(c, n, t, coef, step, b1, omb1, nullptr); cudaDeviceSynchronize(); }
};

using emu_check::rel;
void report(const std::string& what, double e, double tol = 1e-5) { emu_check::report("  " + what, e, tol, 36); }

void declare(core::ParamStore<float>& s) {
  const std::vector<std::vector<int64_t>> shapes = {{200, 260}, {200, 130}, {2, 130, 150}, {140, 3, 300}, {50}, {300, 7}, {40000}};
  for (size_t i = 0; i < shapes.size(); ++i) { core::ParamSpec p; char nm[16]; std::snprintf(nm, sizeof nm, "p%d", int(i)); p.name = nm; p.shape = shapes[i]; p.init = {core::InitKind::kNormal, 0.5, 1.0, 0}; s.declare(p); }
  s.finalize(); s.initialize(5);
}

void compare(core::OptimKind kind, double grad_sd) {
  std::printf("%s grad sd %g\n", kind == core::OptimKind::kAdamW ? "adamw" : "adafactor", grad_sd);
  core::ParamStore<float> a, b;
  declare(a); declare(b);
  core::OptimConfig c; c.kind = kind; c.lr = 0.02; c.warmup = 2; c.total_steps = 10; c.clip_norm = 100.0;
  if (kind == core::OptimKind::kAdamW) c.weight_decay = 0.1;
  EmulatedCudaKernels emu;
  auto cpu = core::make_optimizer(c, a);
  auto gpu = core::make_optimizer(c, b, {}, &emu);
  std::mt19937 gen(42);
  std::normal_distribution<float> nd(0, float(grad_sd));
  for (int t = 0; t < 3; ++t) {
    for (int64_t i = 0; i < a.total_numel(); ++i) a.grads()[i] = b.grads()[i] = nd(gen);
    const auto sa = cpu->step(), sb = gpu->step();
    report("step " + std::to_string(t) + " grad norm", std::fabs(sa.grad_norm - sb.grad_norm) / sa.grad_norm, 1e-12);
    if (t == 0) std::printf("  (clip scale %.6g)\n", sa.clip_scale);
  }
  report("values", rel(b.values(), a.values(), a.total_numel()));
  const auto s1 = cpu->state(), s2 = gpu->state();
  for (size_t k = 0; k < s1.size(); ++k) report(s1[k].name, rel(s2[k].data, s1[k].data, s1[k].numel()));
}

// The step enqueued without waiting for its norm (Optimizer::stage_step / enqueue_step /
// finish_step: the norm, clip scale and skip made by the emulated grad_norm_finish) against
// step() on the same emulated kernels: bit-identical values and state; step 1's NaN gradient
// is skipped by every kernel (step() is not called for it, as the trainer's guard would not).
void device_steps(core::OptimKind kind) {
  std::printf("%s enqueued steps\n", kind == core::OptimKind::kAdamW ? "adamw" : "adafactor");
  core::ParamStore<float> a, b;
  declare(a); declare(b);
  core::OptimConfig c; c.kind = kind; c.lr = 0.02; c.warmup = 2; c.total_steps = 10; c.clip_norm = 100.0;
  EmulatedCudaKernels emu;
  auto host = core::make_optimizer(c, a, {}, &emu);
  auto dev = core::make_optimizer(c, b, {}, &emu);
  std::mt19937 gen(9);
  std::normal_distribution<float> nd;
  int differ = 0;
  for (int t = 0; t < 4; ++t) {
    for (int64_t i = 0; i < a.total_numel(); ++i) a.grads()[i] = b.grads()[i] = nd(gen);
    if (t == 1) a.grads()[77] = b.grads()[77] = NAN;
    dev->stage_step();
    dev->enqueue_step();
    const auto sb = dev->finish_step();
    const double norm = host->grad_norm();
    if (t != 1) host->apply(norm);
    differ += (sb.applied != (t != 1)) + (t != 1 && sb.grad_norm != norm);
  }
  differ += std::memcmp(a.values(), b.values(), size_t(a.total_numel()) * sizeof(float)) != 0;
  const auto s1 = host->state(), s2 = dev->state();
  for (size_t k = 0; k < s1.size(); ++k) differ += std::memcmp(s1[k].data, s2[k].data, size_t(s1[k].numel()) * sizeof(float)) != 0;
  differ += host->step_count() != dev->step_count();
  report("differences from step() (bit for bit)", differ, 0.5);
}

void clip() {
  std::printf("clip_gradients\n");
  core::ParamStore<float> a, b;
  declare(a); declare(b);
  std::mt19937 gen(3);
  std::normal_distribution<float> nd;
  for (int64_t i = 0; i < a.total_numel(); ++i) a.grads()[i] = b.grads()[i] = nd(gen);
  EmulatedCudaKernels emu;
  core::GradNorm<float> na(a), nb(b, nullptr, &emu);
  const double ca = core::clip_gradients(a, na, 10.0), cb = core::clip_gradients(b, nb, 10.0);
  report("norm", std::fabs(ca - cb) / ca, 1e-12);
  report("clipped gradients", rel(b.grads(), a.grads(), a.total_numel()));
}

// The statistics' moves (StatKernels, behind a reducer that sums on the device) against the CPU
// kernels on seeded random partials: per-segment totals (empty segments included) in the host's
// order, gather and scatter by a permutation; bit for bit.
void stat_moves() {
  std::printf("statistics' moves\n");
  EmulatedCudaKernels emu;
  auto cpu = make_cpu_optimizer_kernels<float>();
  std::mt19937 gen(13);
  std::normal_distribution<double> nd;
  std::vector<double> partial(1000);
  for (double& x : partial) x = nd(gen);
  std::vector<int64_t> first = {0};
  for (int64_t f : {7, 7, 300, 301, 999, 1000}) first.push_back(f);
  const auto n_seg = int32_t(first.size() - 1);
  std::vector<double> a(first.size()), b(first.size());
  cpu->segment_sums(n_seg, first.data(), partial.data(), a.data());
  emu.segment_sums(n_seg, first.data(), partial.data(), b.data());
  int differ = std::memcmp(a.data(), b.data(), size_t(n_seg) * sizeof(double)) != 0;
  std::vector<int64_t> index(partial.size());
  for (size_t i = 0; i < index.size(); ++i) index[i] = int64_t((i * 337) % index.size());
  std::vector<double> run_a(index.size()), run_b(index.size()), back(partial.size(), 0.0);
  cpu->gather_stats(int64_t(index.size()), index.data(), partial.data(), run_a.data());
  emu.gather_stats(int64_t(index.size()), index.data(), partial.data(), run_b.data());
  differ += run_a != run_b;
  emu.scatter_stats(int64_t(index.size()), index.data(), run_b.data(), back.data());
  differ += back != partial;
  report("differences from the CPU (bit for bit)", differ, 0.5);
}

int main() {
  compare(core::OptimKind::kAdamW, 1.0);
  compare(core::OptimKind::kAdafactor, 1.0);
  compare(core::OptimKind::kAdafactor, 1e-3);  // tiny gradients: the eps floor matters
  device_steps(core::OptimKind::kAdamW);
  device_steps(core::OptimKind::kAdafactor);
  clip();
  stat_moves();
  std::printf("failures: %d\n", emu_check::failures());
  return emu_check::failures() != 0;
}
