// Straightforward float64 references for the optimizers, written from the text of model.md §10c
// (not from core/): one loop per formula, no chunking, no factor tricks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace brt::test {

struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<double> value, grad;
  int64_t numel() const { return static_cast<int64_t>(value.size()); }
  bool is_matrix() const { return shape.size() >= 2; }
};

// lr(t) per model.md §10c, written independently of core/optim/lr_schedule.
inline double ref_lr(double lr, double warmup, const char* schedule, double min_lr, double total, int64_t t) {
  const double s = static_cast<double>(t + 1);
  double f = warmup > 0 && s < warmup ? s / warmup : 1.0;
  const std::string kind = schedule;
  if (kind == "rsqrt") return lr * f * std::sqrt(warmup / std::max(s, warmup));
  if (kind == "cosine" && s > warmup) {
    const double p = std::min(1.0, (s - warmup) / (total - warmup));
    return min_lr + (lr - min_lr) * (1 + std::cos(M_PI * p)) / 2;
  }
  return lr * f;
}

inline double ref_global_norm(const std::vector<RefTensor>& ts) {
  double s = 0;
  for (const auto& t : ts)
    for (double g : t.grad) s += g * g;
  return std::sqrt(s);
}

// Multiplies all gradients by min(1, clip/norm) when clip > 0.
inline void ref_clip(std::vector<RefTensor>& ts, double clip) {
  const double norm = ref_global_norm(ts);
  if (clip <= 0 || norm <= clip) return;
  for (auto& t : ts)
    for (double& g : t.grad) g *= clip / norm;
}

// Adafactor of model.md §10c. A tensor is factored when its two largest dims are both >= 128; a
// rank-3 tensor [k, r, c] (factored axes r, c) has one (R, C) pair per leading index k.
class RefAdafactor {
 public:
  explicit RefAdafactor(const std::vector<RefTensor>& ts) {
    for (const auto& t : ts) {
      State s;
      const auto& sh = t.shape;
      if (sh.size() >= 2) {
        std::vector<int64_t> sorted = sh;
        std::sort(sorted.begin(), sorted.end());
        s.factored = sorted[sorted.size() - 2] >= 128;
      }
      if (s.factored) {
        s.k = sh.size() == 3 ? sh[0] : 1;
        s.r = sh[sh.size() - 2];
        s.c = sh[sh.size() - 1];
        s.R.assign(s.k * s.r, 0.0);
        s.C.assign(s.k * s.c, 0.0);
      } else {
        s.v.assign(t.value.size(), 0.0);
      }
      s.m.assign(t.value.size(), 0.0);
      states_.push_back(std::move(s));
    }
  }

  void step(std::vector<RefTensor>& ts, int64_t t, double lr) {
    const double rho = std::pow(double(t + 1), -0.8);
    for (size_t p = 0; p < ts.size(); ++p) {
      RefTensor& x = ts[p];
      State& s = states_[p];
      const int64_t n = x.numel();
      std::vector<double> y(n);
      if (s.factored) {
        for (int64_t k = 0; k < s.k; ++k) {
          auto G = [&](int64_t i, int64_t j) {
            const double g = x.grad[(k * s.r + i) * s.c + j];
            return g * g + 1e-30;
          };
          for (int64_t i = 0; i < s.r; ++i) {
            double mean = 0;
            for (int64_t j = 0; j < s.c; ++j) mean += G(i, j);
            s.R[k * s.r + i] = (1 - rho) * s.R[k * s.r + i] + rho * mean / s.c;
          }
          for (int64_t j = 0; j < s.c; ++j) {
            double mean = 0;
            for (int64_t i = 0; i < s.r; ++i) mean += G(i, j);
            s.C[k * s.c + j] = (1 - rho) * s.C[k * s.c + j] + rho * mean / s.r;
          }
          double mean_r = 0;
          for (int64_t i = 0; i < s.r; ++i) mean_r += s.R[k * s.r + i];
          mean_r /= s.r;
          for (int64_t i = 0; i < s.r; ++i)
            for (int64_t j = 0; j < s.c; ++j) {
              const int64_t e = (k * s.r + i) * s.c + j;
              y[e] = x.grad[e] / std::sqrt((s.R[k * s.r + i] / mean_r) * s.C[k * s.c + j]);
            }
        }
      } else {
        for (int64_t e = 0; e < n; ++e) {
          const double g = x.grad[e];
          s.v[e] = (1 - rho) * s.v[e] + rho * (g * g + 1e-30);
          y[e] = g / std::sqrt(s.v[e]);
        }
      }
      const double rms_y = rms(y);
      const double rms_p = rms(x.value);
      for (int64_t e = 0; e < n; ++e) {
        const double u = lr * std::max(rms_p, 1e-3) * y[e] / std::max(1.0, rms_y / 1.0);
        s.m[e] = 0.9 * s.m[e] + 0.1 * u;
        x.value[e] -= s.m[e];
      }
    }
  }

  // Row/column accumulators of tensor p (for comparing the exposed state).
  const std::vector<double>& R(size_t p) const { return states_[p].R; }
  const std::vector<double>& C(size_t p) const { return states_[p].C; }
  const std::vector<double>& v(size_t p) const { return states_[p].v; }
  const std::vector<double>& m(size_t p) const { return states_[p].m; }

 private:
  struct State {
    bool factored = false;
    int64_t k = 1, r = 0, c = 0;
    std::vector<double> R, C, v, m;
  };
  static double rms(const std::vector<double>& a) {
    double s = 0;
    for (double x : a) s += x * x;
    return std::sqrt(s / a.size());
  }
  std::vector<State> states_;
};

// AdamW of model.md §10c, decoupled weight decay lr*wd*param on matrices only.
class RefAdamW {
 public:
  RefAdamW(const std::vector<RefTensor>& ts, double wd) : wd_(wd) {
    for (const auto& t : ts) {
      m_.emplace_back(t.value.size(), 0.0);
      v_.emplace_back(t.value.size(), 0.0);
    }
  }
  void step(std::vector<RefTensor>& ts, int64_t t, double lr) {
    const double b1 = 0.9, b2 = 0.98, eps = 1e-8;
    for (size_t p = 0; p < ts.size(); ++p) {
      RefTensor& x = ts[p];
      for (int64_t e = 0; e < x.numel(); ++e) {
        const double g = x.grad[e];
        m_[p][e] = b1 * m_[p][e] + (1 - b1) * g;
        v_[p][e] = b2 * v_[p][e] + (1 - b2) * g * g;
        const double mhat = m_[p][e] / (1 - std::pow(b1, double(t + 1)));
        const double vhat = v_[p][e] / (1 - std::pow(b2, double(t + 1)));
        const double decay = x.is_matrix() ? wd_ * x.value[e] : 0.0;
        x.value[e] -= lr * (mhat / (std::sqrt(vhat) + eps) + decay);
      }
    }
  }
  const std::vector<double>& m(size_t p) const { return m_[p]; }
  const std::vector<double>& v(size_t p) const { return v_[p]; }

 private:
  double wd_;
  std::vector<std::vector<double>> m_, v_;
};

}  // namespace brt::test
