// Host emulation check of the planner's launch counts (launch/plan/counted_step.h,
// kernels/cuda_launches.h): one training step of a micro model of each variant on the emulated
// CudaBackend, in fp32 and bf16, wrapped in the counting backend with a "timer" that counts the
// emulator's launches (every kernel, cuBLAS and cuFFT call, copy and fill the stream runs) per
// kernel class instead of time; the optimizer's launches likewise. Prints, per class, the
// backend calls the counting backend sees and the device launches they made, and fails when a
// class's launches differ from what the planner predicts from the calls by more than 25%, or when
// a non-BST step's dense-GEMM FLOPs are not model.md §10's matrix products × 3 exactly
// (core/flops.h; §10 counts BST's SSM side in its own way, and tests/core/model/
// test_step_counts.cpp checks every variant's counts against §10 within the band's excess).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/flops.h"
#include "core/model.h"
#include "core/optim/adafactor.h"
#include "core/optim/optim_stats.h"
#include "core/optim/optimizer.h"
#include "kernels/call_timer.h"
#include "kernels/counting_backend.h"
#include "kernels/cuda_launches.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/optim/cuda_optimizer_kernels.h"
#include "kernels/cuda_optimizer_launches.h"
#include <cuda_runtime.h>  // the emulator's runtime header: its launch counts
#include "training_common.h"

using namespace brt;

namespace {

// A CallTimer whose "seconds" are the emulator's launches between begin() and end(slot).
class LaunchCounter final : public kernels::CallTimer {
 public:
  void begin() override { at_begin_ = total(); }
  void end(int slot) override {
    if (size_t(slot) >= pending_.size()) pending_.resize(size_t(slot) + 1, 0.0);
    pending_[size_t(slot)] += double(total() - at_begin_);
  }
  void collect(std::vector<double>& out) override {
    if (out.size() < pending_.size()) out.resize(pending_.size(), 0.0);
    for (size_t i = 0; i < pending_.size(); ++i) out[i] += pending_[i];
    pending_.assign(pending_.size(), 0.0);
  }
  const char* clock_name() const override { return "emulated launches"; }

 private:
  static long total() {
    long n = 0;
    for (const auto& c : emu::launch_counts()) n += c.count;
    return n;
  }
  long at_begin_ = 0;
  std::vector<double> pending_;
};

// One step of `variant` in `precision`; prints its classes; returns the worst relative
// difference of a class's launches from the calls × the planner's launches per call.
double check_variant(const std::string& variant, kernels::cuda::Precision precision) {
  const core::ModelConfig cfg = emu_check::micro_model(variant, 8);
  const int streams = 2;
  kernels::cuda::CudaOptions options;
  options.precision = precision;
  options.workspace_bytes = size_t(16) << 20;
  auto backend = kernels::cuda::make_cuda_backend(options);
  LaunchCounter counter;
  kernels::CountingBackend<float> counted(*backend, counter);
  core::Model<float> model(cfg, streams, counted);
  model.params().initialize(11);
  auto optimizer_kernels = kernels::cuda::make_cuda_optimizer_kernels(*backend);
  core::OptimConfig optim;
  optim.kind = core::OptimKind::kAdafactor;
  optim.total_steps = 10;
  optim.min_dim_to_factor = 8;  // the micro model's matrices factored, as a real model's are
  auto adafactor = core::make_optimizer(optim, model.params(), {}, optimizer_kernels.get());
  const int64_t optim_min_dim = optim.min_dim_to_factor;
  optim.kind = core::OptimKind::kAdamW;
  auto adamw = core::make_optimizer(optim, model.params(), {}, optimizer_kernels.get());
  std::vector<double> launches;
  counter.collect(launches);  // the initialisation's
  launches.clear();
  counted.reset();
  const emu_check::Step s = emu_check::make_step(cfg, streams, 0, 5u, 0);
  const int64_t count = model.stage_step({s.inputs.data(), s.targets.data(), s.mask.data(), s.doc_start.data()});
  model.device_step(1.0f / float(count));
  model.step_nats();
  const int kAdafactorSlot = kernels::kKernelClasses, kAdamWSlot = kAdafactorSlot + 1;
  counter.begin();
  adafactor->step();
  counter.end(kAdafactorSlot);
  counter.begin();
  adamw->step();
  counter.end(kAdamWSlot);
  counter.collect(launches);
  launches.resize(size_t(kAdamWSlot) + 1, 0.0);
  const bool bf16 = precision == kernels::cuda::Precision::kBf16;
  std::printf("%s %s: class, backend calls, device launches (per call), planner's launches\n", variant.c_str(),
              kernels::cuda::precision_name(precision));
  double worst = 0;
  for (int k = 0; k <= kAdamWSlot; ++k) {
    const bool opt = k >= kAdafactorSlot;  // an optimizer step: one call
    const auto c = kernels::KernelClass(opt ? 0 : k);
    const double calls = opt ? 1.0 : double(counted.counts(c).launches);
    const double predicted =
        opt ? double(kernels::cuda_optimizer_step_launches(
                         core::optimizer_layouts(model.params(), k == kAdafactorSlot, optim_min_dim),
                         core::ChunkTable(model.params()).size(), k == kAdafactorSlot)
                         .size())
            : calls * kernels::cuda_launches_per_call(c, bf16) +
                  (bf16 && c == kernels::KernelClass::kGemm ? double(counted.bf16_conversions().launches) : 0.0);
    const double got = launches[size_t(k)];
    const double rel = predicted > 0 ? std::fabs(got - predicted) / predicted : (got > 0 ? 1.0 : 0.0);
    // The optimizer's list is exact, and so are bf16's GEMMs: a product each, its operands'
    // conversions, the MLP's ReLU in its epilogues and the residual as a product's C (a
    // fallback's ReLU or copy kernels fail it). fp32 runs the MLP's ReLU and the residual's copy
    // as kernels of those calls, which the counts (bf16's) leave out.
    const bool exact = opt || (bf16 && c == kernels::KernelClass::kGemm);
    worst = std::max(worst, exact && rel > 0 ? 1.0 : rel);
    const char* name = k == kAdafactorSlot ? "adafactor step" : k == kAdamWSlot ? "adamw step" : kernels::kernel_class_name(c);
    std::printf("  %-16s %6.0f %8.0f (%5.2f) %8.1f%s\n", name, calls, got, calls > 0 ? got / calls : 0.0, predicted,
                rel > 0.25 ? "   <-- off by more than 25%" : "");
  }
  // model.md §10: the products of a step are 3 × (forward − attention) per token.
  const core::FlopBreakdown f = core::flops_per_token(cfg);
  const double tokens = double(streams) * cfg.seq_len;
  const double products = 3.0 * (f.forward() - f.attention) * tokens;
  const double gemm = counted.counts(kernels::KernelClass::kGemm).flops;
  if (variant.rfind("bst:", 0) == 0) return worst;
  std::printf("  dense-GEMM FLOPs %.6g, model.md §10 products x3 %.6g%s\n", gemm, products,
              gemm == products ? "" : "   <-- differ");
  return gemm == products ? worst : std::max(worst, 1.0);
}

}  // namespace

int main() {
  double worst = 0;
  for (const char* variant : {"slide", "rec:fixed:skip", "rec:lstm:dual", "bst:sh:s4d", "bst:mf:unstructured"})
    for (const auto precision : {kernels::cuda::Precision::kFp32, kernels::cuda::Precision::kBf16})
      worst = std::max(worst, check_variant(variant, precision));
  std::printf("launches: worst class %.0f%% from the planner's launches per call (bound 25%%): %s\n", 100 * worst,
              worst <= 0.25 ? "ok" : "FAILED");
  return worst <= 0.25 ? 0 : 1;
}
