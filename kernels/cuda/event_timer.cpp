// The CUDA-event CallTimer (kernels/cuda/cuda_backend.h make_event_timer): a pair of events
// around each timed call on the backend's stream, read at collect(), so a timed step runs as
// an untimed one does (no host wait between calls) and each call's time is the device's.
#include <cuda_runtime.h>

#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"

namespace brt::kernels::cuda {

namespace {

class EventTimer final : public CallTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {}
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  ~EventTimer() override {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  void begin() override {
    if (open_) throw std::logic_error("EventTimer: begin() twice without end()");
    BRT_CUDA_CHECK(cudaEventRecord(next_event(), stream_));
    open_ = true;
  }
  void end(int slot) override {
    if (!open_) throw std::logic_error("EventTimer: end() without begin()");
    BRT_CUDA_CHECK(cudaEventRecord(next_event(), stream_));
    slots_.push_back(slot);
    open_ = false;
  }
  void collect(std::vector<double>& seconds) override {
    if (open_) throw std::logic_error("EventTimer: collect() inside a timed call");
    if (!slots_.empty()) BRT_CUDA_CHECK(cudaEventSynchronize(events_[2 * slots_.size() - 1]));
    for (size_t i = 0; i < slots_.size(); ++i) {
      float ms = 0;
      BRT_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]));
      const size_t slot = size_t(slots_[i]);
      if (seconds.size() <= slot) seconds.resize(slot + 1, 0.0);
      seconds[slot] += double(ms) * 1e-3;
    }
    slots_.clear();
    used_ = 0;
  }
  const char* clock_name() const override { return "CUDA events"; }

 private:
  cudaEvent_t next_event() {
    if (used_ == events_.size()) {
      cudaEvent_t e = nullptr;
      BRT_CUDA_CHECK(cudaEventCreate(&e));
      events_.push_back(e);
    }
    return events_[used_++];
  }

  cudaStream_t stream_;
  std::vector<cudaEvent_t> events_;  // 2i, 2i + 1: the i-th timed call's start and end
  std::vector<int> slots_;           // the i-th timed call's slot
  size_t used_ = 0;
  bool open_ = false;
};

}  // namespace

std::unique_ptr<CallTimer> make_event_timer(Backend<float>& backend) {
  return std::make_unique<EventTimer>(stream_handle(backend));
}

}  // namespace brt::kernels::cuda
