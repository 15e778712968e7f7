#include "launch/train/step_guard.h"

#include <cmath>
#include <stdexcept>

namespace brt::launch {

const char* verdict_reason(StepVerdict v) {
  switch (v) {
    case StepVerdict::kApply: return "applied";
    case StepVerdict::kSkipNonFinite: return "non-finite loss or gradient norm";
    case StepVerdict::kSkipLossSpike: return "loss spike (train.skip_loss_z)";
    case StepVerdict::kSkipGradSpike: return "gradient-norm spike (train.skip_grad_z)";
  }
  return "?";
}

double ZWindow::z(double x) const {
  if (count_ < kMinHistory) return 0;
  const int n = count_ < kWindow ? count_ : kWindow;
  double mean = 0;
  for (int i = 0; i < n; ++i) mean += values_[size_t(i)];
  mean /= n;
  double var = 0;
  for (int i = 0; i < n; ++i) var += (values_[size_t(i)] - mean) * (values_[size_t(i)] - mean);
  const double sd = std::sqrt(var / n);
  return sd > 0 ? (x - mean) / sd : 0;
}

void ZWindow::push(double x) {
  values_[size_t(position_)] = x;
  position_ = (position_ + 1) % kWindow;
  ++count_;
}

void ZWindow::save(std::vector<int64_t>& ints, std::vector<double>& doubles) const {
  ints.push_back(count_);
  ints.push_back(position_);
  doubles.insert(doubles.end(), values_.begin(), values_.end());
}

void ZWindow::restore(const int64_t* ints, const double* doubles) {
  count_ = int(ints[0]);
  position_ = int(ints[1]);
  if (count_ < 0 || position_ < 0 || position_ >= kWindow)
    throw std::invalid_argument("step guard window out of range");
  for (int i = 0; i < kWindow; ++i) values_[size_t(i)] = doubles[i];
}

StepVerdict StepGuard::judge(int64_t step, double loss, double grad_norm) {
  StepVerdict v = StepVerdict::kApply;
  if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
    v = StepVerdict::kSkipNonFinite;
    reset_pending_ = true;
  } else if (settings_.skip_loss_z > 0 && loss_.z(loss) > settings_.skip_loss_z) {
    v = StepVerdict::kSkipLossSpike;
  } else if (settings_.skip_grad_z > 0 && grad_.z(grad_norm) > settings_.skip_grad_z) {
    v = StepVerdict::kSkipGradSpike;
  }
  if (v == StepVerdict::kApply) {
    loss_.push(loss);
    grad_.push(grad_norm);
    consecutive_ = 0;
    recent_.clear();
  } else {
    ++consecutive_;
    ++total_skipped_;
    recent_.push_back(step);
  }
  return v;
}

namespace {
constexpr size_t kScalarCounters = 4;  // consecutive, total skipped, reset pending, rollbacks
}

std::vector<int64_t> StepGuard::counters() const {
  std::vector<int64_t> c = {consecutive_, total_skipped_, reset_pending_ ? 1 : 0, rollbacks_};
  std::vector<double> unused;
  loss_.save(c, unused);
  grad_.save(c, unused);
  c.insert(c.end(), recent_.begin(), recent_.end());
  return c;
}

std::vector<double> StepGuard::windows() const {
  std::vector<int64_t> unused;
  std::vector<double> w;
  loss_.save(unused, w);
  grad_.save(unused, w);
  return w;
}

void StepGuard::restore(const std::vector<int64_t>& counters, const std::vector<double>& windows,
                        const std::vector<int64_t>& skip_batches) {
  if (counters.size() < kScalarCounters + 4 || windows.size() != 2 * size_t(ZWindow::kWindow))
    throw std::invalid_argument("step guard state has " + std::to_string(counters.size()) + " counters and " +
                                std::to_string(windows.size()) + " window values");
  consecutive_ = int(counters[0]);
  total_skipped_ = counters[1];
  reset_pending_ = counters[2] != 0;
  rollbacks_ = int(counters[3]);
  loss_.restore(counters.data() + kScalarCounters, windows.data());
  grad_.restore(counters.data() + kScalarCounters + 2, windows.data() + ZWindow::kWindow);
  recent_.assign(counters.begin() + kScalarCounters + 4, counters.end());
  if (int(recent_.size()) != consecutive_) throw std::invalid_argument("step guard: skip history does not match its count");
  skip_batches_ = {skip_batches.begin(), skip_batches.end()};
}

}  // namespace brt::launch
