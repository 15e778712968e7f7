// DocumentStreams: the background thread that keeps the next batches ready so that reading
// overlaps compute.
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "data/streams.h"

namespace brt::data {

namespace {
constexpr size_t kPrefetchDepth = 2;
}

struct DocumentStreams::Prefetcher {
  struct Ready {
    Batch batch;
    bool has_data = false;
    StreamCursor cursor_after;
  };

  explicit Prefetcher(std::unique_ptr<StreamSet> set)
      : set(std::move(set)), consumed_cursor(this->set->cursor()), worker([this] { run(); }) {}

  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    worker.join();
  }

  void run() {
    try {
      while (true) {
        Ready ready;
        ready.has_data = set->next(ready.batch);
        ready.cursor_after = set->cursor();
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [this] { return stopping || queue.size() < kPrefetchDepth; });
        if (stopping) return;
        queue.push_back(std::move(ready));
        changed.notify_all();
        if (!queue.back().has_data) return;  // single pass finished: nothing more to make
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      failure = std::current_exception();
      changed.notify_all();
    }
  }

  bool next(Batch& out) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [this] { return !queue.empty() || failure; });
    if (queue.empty()) std::rethrow_exception(failure);
    Ready& front = queue.front();
    const bool has_data = front.has_data;
    if (!has_data) {
      out.resize(front.batch.streams, front.batch.seq);  // keep the end marker for later calls
      return false;
    }
    std::swap(out, front.batch);
    consumed_cursor = std::move(front.cursor_after);
    queue.pop_front();
    changed.notify_all();
    return true;
  }

  StreamCursor cursor() const {
    std::lock_guard<std::mutex> lock(mutex);
    return consumed_cursor;
  }

  std::unique_ptr<StreamSet> set;  // touched only by the worker once it runs
  mutable std::mutex mutex;
  std::condition_variable changed;
  std::deque<Ready> queue;
  StreamCursor consumed_cursor;
  std::exception_ptr failure;
  bool stopping = false;
  std::thread worker;  // last: starts after everything above exists
};

DocumentStreams::DocumentStreams(std::shared_ptr<const TokenDataset> dataset, const StreamOptions& options,
                                 const StreamCursor* resume) {
  auto set = std::make_unique<StreamSet>(std::move(dataset), options, resume);
  if (options.prefetch) {
    prefetcher_ = std::make_unique<Prefetcher>(std::move(set));
  } else {
    set_ = std::move(set);
  }
}

DocumentStreams::~DocumentStreams() = default;

bool DocumentStreams::next(Batch& out) { return prefetcher_ ? prefetcher_->next(out) : set_->next(out); }

StreamCursor DocumentStreams::cursor() const { return prefetcher_ ? prefetcher_->cursor() : set_->cursor(); }

}  // namespace brt::data
