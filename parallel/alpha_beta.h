// The α-β (latency-bandwidth) model of a collective: time = α + β · bytes, fitted by
// weighted least squares to measured times (bench/comm/) and reused by the layout planner.
#pragma once

#include <span>

namespace brt::parallel {

struct CommSample {
  double bytes = 0;    // payload per rank
  double seconds = 0;  // measured time of one collective
};

struct AlphaBeta {
  double alpha_seconds = 0;        // fixed cost per collective
  double beta_seconds_per_byte = 0;

  double predict(double bytes) const { return alpha_seconds + beta_seconds_per_byte * bytes; }
  // Asymptotic throughput in bytes per second (payload bytes, not wire bytes).
  double bandwidth() const { return beta_seconds_per_byte > 0 ? 1.0 / beta_seconds_per_byte : 0; }
};

enum class FitWeighting {
  // Minimise Σ (t - pred)²: the largest messages dominate.
  kAbsolute,
  // Minimise Σ ((t - pred) / t)²: every size counts equally, so α is fitted by the small
  // messages and β by the large ones (what a planner comparing ratios needs).
  kRelative,
};

// Needs at least two distinct sizes and positive times; throws std::invalid_argument
// otherwise.
AlphaBeta fit_alpha_beta(std::span<const CommSample> samples,
                         FitWeighting weighting = FitWeighting::kRelative);

// max over samples of |measured / predicted - 1|.
double max_relative_error(const AlphaBeta& model, std::span<const CommSample> samples);

}  // namespace brt::parallel
