// Host emulation check of a whole training step on the CUDA backend (tests/cuda_emulation,
// docs/gpu.md): the CudaBackend class (its cuBLAS operand mapping, device memory, scratch
// arena) and every kernel a model step launches, run by the emulator, against the CPU backend
// — a micro model of a variant (BST ones: variant names as core/model_config.h, e.g.
// bst:sh:s4d, bst:mf:unstructured): forward loss, every parameter gradient, and (with
// the optimizer) the weights after two optimizer steps and the next loss. fp32 ≤ 1e-5
// relative; bf16 gemm ≤ 1e-2. And bf16's weight shadow and ReLU epilogues against their
// unfused paths, bit for bit.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/optim/optimizer.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/optim/cuda_optimizer_kernels.h"
#include "compare.h"
#include "training_common.h"

using namespace brt;

namespace {

using emu_check::rel;
using emu_check::Trace;

void check(const std::string& what, double err, double tol) { emu_check::report("  " + what, err, tol, 46); }

Trace run(const core::ModelConfig& cfg, int streams, kernels::Backend<float>& backend,
          const core::OptimConfig& optim, int steps) {
  core::Model<float> model(cfg, streams, backend);
  model.params().initialize(7);
  std::unique_ptr<kernels::OptimizerKernels<float>> device_kernels;
  if (std::string(backend.name()) == "cuda") device_kernels = kernels::cuda::make_cuda_optimizer_kernels(backend);
  auto optimizer = core::make_optimizer(optim, model.params(), {}, device_kernels.get());
  return emu_check::record_steps(model, *optimizer, streams, steps, 1000, 0);
}

void compare(const std::string& variant, const std::string& optimizer, bool bf16) {
  const core::ModelConfig cfg = emu_check::micro_model(variant, variant == "xl" ? 32 : 16);
  core::OptimConfig optim;
  optim.kind = optimizer == "adamw" ? core::OptimKind::kAdamW : core::OptimKind::kAdafactor;
  optim.lr = optimizer == "adamw" ? 1e-2 : 0.05;
  optim.warmup = 0;
  optim.total_steps = 10;
  optim.min_dim_to_factor = 16;  // so the micro model has factored Adafactor tensors
  const int streams = 2, steps = 3;
  std::printf("%s, %s%s\n", variant.c_str(), optimizer.c_str(), bf16 ? ", bf16 gemm" : "");
  auto cpu = kernels::make_cpu_backend<float>();
  const Trace ref = run(cfg, streams, *cpu, optim, steps);
  kernels::cuda::CudaOptions options;
  options.precision = bf16 ? kernels::cuda::Precision::kBf16 : kernels::cuda::Precision::kFp32;
  options.workspace_bytes = size_t(16) << 20;
  auto gpu = kernels::cuda::make_cuda_backend(options);
  const Trace emu = run(cfg, streams, *gpu, optim, steps);
  const double tol = bf16 ? 1e-2 : 1e-5;
  for (int i = 0; i < steps; ++i)
    check("loss step " + std::to_string(i + 1) + " (" + std::to_string(ref.losses[size_t(i)]) + ")",
          std::fabs(emu.losses[size_t(i)] - ref.losses[size_t(i)]) / ref.losses[size_t(i)], tol);
  double worst_grad = 0, worst_weight = 0;
  std::vector<std::pair<double, size_t>> by_param;
  for (size_t p = 0; p < ref.grads.size(); ++p) by_param.push_back({rel(emu.grads[p], ref.grads[p]), p});
  std::sort(by_param.rbegin(), by_param.rend());
  {  // the parameters with the largest gradient differences, by name
    core::Model<float> names(cfg, streams, *cpu);
    std::printf("  largest gradient differences:");
    for (size_t i = 0; i < by_param.size() && i < 4; ++i)
      std::printf(" %s %.3g", names.params().params()[by_param[i].second].spec.name.c_str(), by_param[i].first);
    std::printf("\n");
  }
  for (size_t p = 0; p < ref.grads.size(); ++p) {
    worst_grad = std::max(worst_grad, rel(emu.grads[p], ref.grads[p]));
    worst_weight = std::max(worst_weight, rel(emu.weights[p], ref.weights[p]));
  }
  check("worst parameter gradient, step 1", worst_grad, bf16 ? 5e-2 : 1e-4);
  check("worst weight after " + std::to_string(steps) + " steps", worst_weight, bf16 ? 1e-2 : 1e-5);
}

// Two bf16 runs that must be bit-identical, losses, gradients and weights after three optimizer
// steps (the steps in between show that each forward reads the weights it should):
//  - weight_shadow: the weights rounded once per forward (CudaOptions::bf16_weight_shadow)
//    against each weight operand rounded per product;
//  - epilogues: the products through cuBLASLt (the MLP's ReLU in its epilogues, the residual
//    adds as the products' C) against the products and the ReLU, copy and add kernels
//    (EMU_CUBLASLT_NO_EPILOGUE=all for the second run: the emulated cuBLASLt finds no
//    algorithm). Bit for bit where no gradient is added before the ReLU (dx_add: dual variants).
void compare_bf16_runs(const std::string& which, const std::string& variant) {
  const core::ModelConfig cfg = emu_check::micro_model(variant, variant == "xl" ? 32 : 16);
  core::OptimConfig optim;
  optim.lr = 0.05;
  optim.warmup = 0;
  optim.total_steps = 10;
  optim.min_dim_to_factor = 16;
  const int streams = 2, steps = 3;
  const bool shadow_case = which == "weight_shadow";
  std::printf("%s, adafactor, bf16 gemm: %s\n", variant.c_str(),
              shadow_case ? "the weight shadow against rounding per product"
                          : "products through cuBLASLt (ReLU epilogues, residual C) against the kernels");
  Trace t[2];
  for (int run_index = 0; run_index < 2; ++run_index) {
    kernels::cuda::CudaOptions options;
    options.precision = kernels::cuda::Precision::kBf16;
    options.workspace_bytes = size_t(16) << 20;
    options.bf16_weight_shadow = !shadow_case || run_index == 1;
    if (!shadow_case && run_index == 1) setenv("EMU_CUBLASLT_NO_EPILOGUE", "all", 1);
    auto gpu = kernels::cuda::make_cuda_backend(options);
    t[run_index] = run(cfg, streams, *gpu, optim, steps);
    unsetenv("EMU_CUBLASLT_NO_EPILOGUE");
  }
  auto none_differ = [](const std::string& what, int differing, size_t of) {
    if (differing > 0) ++emu_check::failures();
    std::printf("  %-44s %d of %zu %s\n", what.c_str(), differing, of, differing > 0 ? "FAIL" : "ok");
  };
  int losses = 0;
  for (int i = 0; i < steps; ++i) losses += t[0].losses[size_t(i)] != t[1].losses[size_t(i)];
  none_differ("losses differing in any bit", losses, size_t(steps));
  for (const auto member : {&Trace::grads, &Trace::weights}) {
    int tensors = 0;  // vector<float>'s == compares the values; -0/+0 and NaN aside, bit for bit
    for (size_t p = 0; p < (t[0].*member).size(); ++p) tensors += (t[0].*member)[p] != (t[1].*member)[p];
    none_differ(member == &Trace::grads ? "gradients (step 1) differing" : "weights (last step) differing", tensors,
                (t[0].*member).size());
  }
}

}  // namespace

// No arguments: every case below (slow: each emulated block starts its threads anew). Or one
// case: training VARIANT adafactor|adamw fp32|bf16, or training weight_shadow|epilogues VARIANT.
int main(int argc, char** argv) try {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // progress is visible while it runs
  if (argc == 4) {
    compare(argv[1], argv[2], std::string(argv[3]) == "bf16");
  } else if (argc == 3 && (std::string(argv[1]) == "weight_shadow" || std::string(argv[1]) == "epilogues")) {
    compare_bf16_runs(argv[1], argv[2]);
  } else {
    for (const char* v : {"rec:fixed:skip", "rec:lstm:dual", "slide", "xl"}) compare(v, "adafactor", false);
    compare("rec:fixed:skip", "adamw", false);
    compare("rec:fixed:skip", "adafactor", true);
    for (const char* v : {"bst:sh:s4d", "bst:mf:unstructured"}) compare(v, "adafactor", false);
  }
  std::printf("%s (%d failures)\n", emu_check::failures() ? "FAILED" : "all training checks ok",
              emu_check::failures());
  return emu_check::failures() ? 1 : 0;
} catch (const std::exception& e) {
  std::printf("FAILED: %s\n", e.what());
  return 1;
}
