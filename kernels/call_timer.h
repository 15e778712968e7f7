// Times a backend's calls by slot (a kernel class of kernels/counting_backend.h, the optimizer):
// the measured side of bench_cuda_train's predicted-beside-measured table (docs/gpu.md). A
// caller brackets each call with begin() and end(slot) and reads the sums with collect().
//
// Two clocks:
//  - SynchronizedCallTimer (any backend): the device synchronized before and after each call and
//    the host's steady clock between, so each call's time is its own but the step runs slower
//    than free-running (one host round trip per call);
//  - the CUDA backend's event timer (kernels/cuda/cuda_backend.h make_event_timer): a pair of
//    CUDA events recorded on the backend's stream around each call and read once at collect(),
//    so the step runs as it would (no wait between calls) and each call's time is the device's.
#pragma once

#include <chrono>
#include <vector>

#include "kernels/memory.h"

namespace brt::kernels {

class CallTimer {
 public:
  virtual ~CallTimer() = default;
  // Before a call is issued.
  virtual void begin() = 0;
  // After it was issued: its time belongs to `slot` (>= 0).
  virtual void end(int slot) = 0;
  // Waits for what was timed, adds each slot's seconds since the last collect() into
  // `seconds[slot]` (grown as needed) and starts afresh.
  virtual void collect(std::vector<double>& seconds) = 0;
  // "synchronized host clock", "CUDA events": how the table names its measured column.
  virtual const char* clock_name() const = 0;
};

class SynchronizedCallTimer final : public CallTimer {
 public:
  explicit SynchronizedCallTimer(Memory& memory) : memory_(memory) {}
  void begin() override {
    memory_.synchronize();
    start_ = std::chrono::steady_clock::now();
  }
  void end(int slot) override {
    memory_.synchronize();
    if (size_t(slot) >= pending_.size()) pending_.resize(size_t(slot) + 1, 0.0);
    pending_[size_t(slot)] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void collect(std::vector<double>& seconds) override {
    if (seconds.size() < pending_.size()) seconds.resize(pending_.size(), 0.0);
    for (size_t i = 0; i < pending_.size(); ++i) seconds[i] += pending_[i];
    pending_.assign(pending_.size(), 0.0);
  }
  const char* clock_name() const override { return "synchronized host clock"; }

 private:
  Memory& memory_;
  std::chrono::steady_clock::time_point start_{};
  std::vector<double> pending_;
};

}  // namespace brt::kernels
