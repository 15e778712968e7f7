// Kernel-class rates measured on the run's own backend (see plan_rates.h).
#include "launch/plan/plan_rates.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/flops.h"
#include "kernels/memory.h"

namespace brt::launch {

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call of `body`: one warm-up call, then calls until `seconds_each` has passed
// (at least 3), with the backend's memory synchronised before the clock starts and stops.
double seconds_per_call(kernels::Memory& memory, double seconds_each,
                        const std::function<void()>& body) {
  body();
  memory.synchronize();
  int calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    body();
    ++calls;
    if (calls % 4 == 0 || calls < 4) {
      memory.synchronize();
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    }
  } while (calls < 3 || elapsed < seconds_each);
  memory.synchronize();
  elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  return elapsed / calls;
}

void fill_pattern(kernels::Backend<float>& be, kernels::Buffer<float>& b, float value) {
  be.fill(b.data(), int64_t(b.size()), value);
}

}  // namespace

MeasuredRates measure_rates(kernels::Backend<float>& be, const core::ModelConfig& model_in,
                            int streams, double seconds_each) {
  core::ModelConfig m = model_in;
  m.resolve();
  const auto start = Clock::now();
  kernels::Memory& memory = be.memory();
  MeasuredRates r;
  const int64_t rows = int64_t(streams) * m.seq_len, D = m.d_model, F = m.d_ff, A = m.attn_width();
  {  // The MLP's first product, [B·N, D] × [D, F] (model.md §4): the bulk of a step's FLOPs.
    kernels::Buffer<float> x(memory, size_t(rows * D), "rates: gemm A"),
        w(memory, size_t(D * F), "rates: gemm B"), y(memory, size_t(rows * F), "rates: gemm C");
    fill_pattern(be, x, 0.01f);
    fill_pattern(be, w, 0.02f);
    const double s = seconds_per_call(memory, seconds_each, [&] {
      be.gemm(kernels::Trans::N, kernels::Trans::N, int(rows), int(F), int(D), 1.0f, x.data(),
              int(D), w.data(), int(F), 0.0f, y.data(), int(F));
    });
    r.gemm_gflops = 2.0 * double(rows) * double(F) * double(D) / s / 1e9;
  }
  {  // Window attention forward + backward (model.md §3.2/§3.3) at the config's B, N, W, H, dh.
    const kernels::WindowAttnDims d{streams, m.seq_len, m.window, m.heads, m.head_dim};
    const size_t act = size_t(rows * A), cache = size_t(streams) * m.window * A;
    const size_t probs = size_t(streams) * d.blocks() * m.heads * m.window * 2 * m.window;
    kernels::Buffer<float> q(memory, act, "rates: q"), k(memory, act, "rates: k"),
        v(memory, act, "rates: v"), kc(memory, cache, "rates: k cache"),
        vc(memory, cache, "rates: v cache"), bias(memory, size_t(m.heads) * kernels::kT5Buckets, "rates: bias"),
        scale(memory, size_t(m.heads), "rates: scale"), out(memory, act, "rates: out"),
        p(memory, probs, "rates: probs"), dout(memory, act, "rates: dout"), dq(memory, act, "rates: dq"),
        dk(memory, act, "rates: dk"), dv(memory, act, "rates: dv"),
        dbias(memory, bias.size(), "rates: dbias"), dscale(memory, scale.size(), "rates: dscale");
    // Unit-norm rows (q, k are L2-normalised in the model, model.md §3.1).
    const float unit = 1.0f / std::sqrt(float(m.head_dim));
    for (auto* b : {&q, &k, &kc}) fill_pattern(be, *b, unit);
    for (auto* b : {&v, &vc, &dout}) fill_pattern(be, *b, 0.5f);
    fill_pattern(be, bias, 0.0f);
    fill_pattern(be, scale, 1.0f);
    const double s = seconds_per_call(memory, seconds_each, [&] {
      be.window_attention_forward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(), bias.data(),
                                  scale.data(), out.data(), p.data());
      be.window_attention_backward(d, q.data(), k.data(), v.data(), kc.data(), vc.data(),
                                   bias.data(), scale.data(), p.data(), dout.data(), dq.data(),
                                   dk.data(), dv.data(), dbias.data(), dscale.data());
    });
    // model.md §10 counts 4·W·A forward FLOPs per token for this attention; training 3× that.
    r.attention_gflops = 3.0 * 4.0 * double(m.window) * double(A) * double(rows) / s / 1e9;
  }
  {  // Device memory bandwidth: a copy of 64 Mi floats (read + write).
    const size_t n = size_t{64} << 20;
    kernels::Buffer<float> a(memory, n, "rates: copy source"), b(memory, n, "rates: copy target");
    fill_pattern(be, a, 1.0f);
    const double s = seconds_per_call(memory, seconds_each, [&] { be.copy(a.data(), int64_t(n), b.data()); });
    r.memory_gbps = 2.0 * double(n) * sizeof(float) / s / 1e9;
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

std::string rates_cluster_toml(const MeasuredRates& r, const std::string& device,
                               double device_memory_gb, const std::string& config_path, int streams) {
  char text[2048];
  std::snprintf(text, sizeof text,
                "# Measured by `brt-dist plan --measure-rates` on %s\n"
                "# at the shapes of %s with %d stream(s) (launch/plan/plan_rates.h).\n"
                "# One device; intra_node_gbps and inter_node_gbps are placeholders, not measured:\n"
                "# set them (and gpus_per_node, nodes) for a multi-device cluster.\n"
                "gpus_per_node = 1\n"
                "nodes = 1\n"
                "gpu_memory_gb = %.1f\n"
                "peak_tflops = %.4f          # the measured matrix-product rate (MFU-style peak)\n"
                "gemm_tflops = %.4f          # [B*N, D] x [D, F], forward\n"
                "attention_tflops = %.4f     # window attention forward + backward, model.md §10 count\n"
                "memory_gbps = %.2f          # device copy, read + write\n"
                "intra_node_gbps = 100\n"
                "inter_node_gbps = 25\n",
                device.c_str(), config_path.c_str(), streams, device_memory_gb, r.gemm_gflops / 1e3,
                r.gemm_gflops / 1e3, r.attention_gflops / 1e3, r.memory_gbps);
  return text;
}

double median_tokens_per_s(const std::string& metrics_path, double skip_fraction) {
  std::ifstream in(metrics_path);
  if (!in) throw std::invalid_argument(metrics_path + ": cannot open the metrics file");
  std::vector<double> rates;
  std::string line;
  while (std::getline(in, line)) {  // one JSON record per line (launch/train/metrics_log.h)
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || record.value("event", "") != "train") continue;  // a cut-off line: not an object
    const auto rate = record.find("tokens_per_s");
    if (rate != record.end() && rate->is_number()) rates.push_back(rate->get<double>());
  }
  if (rates.empty())
    throw std::invalid_argument(metrics_path + ": no \"train\" records with tokens_per_s");
  const size_t skip = std::min(rates.size() - 1, size_t(double(rates.size()) * skip_fraction));
  std::vector<double> tail(rates.begin() + std::ptrdiff_t(skip), rates.end());
  std::sort(tail.begin(), tail.end());
  return tail[tail.size() / 2];
}

}  // namespace brt::launch
