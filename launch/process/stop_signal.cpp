#include "launch/process/stop_signal.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <unistd.h>

namespace brt::launch {

namespace {

// A path the signal handler may read while the program replaces it: written into the buffer
// not being shown, then published by one atomic store. Paths longer than the buffer are cut.
struct PathSlot {
  char text[2][4096] = {};
  std::atomic<int> shown{-1};  // -1: none
  void set(const std::string& path) {
    const int next = shown.load() == 0 ? 1 : 0;
    const size_t n = std::min(path.size(), sizeof text[next] - 1);
    std::memcpy(text[next], path.data(), n);
    text[next][n] = '\0';
    shown.store(next);
  }
  const char* get() const {
    const int k = shown.load();
    return k < 0 ? nullptr : text[k];
  }
};

// The process-wide state of the stop signal (see the header).
struct StopState {
  std::atomic<int> signal{0};
  std::atomic<bool> installed{false};
  PathSlot saving;     // the .tmp being written
  PathSlot last_good;  // the newest good checkpoint
};
StopState g_stop;

void put(const char* text) {
  size_t length = std::strlen(text);
  while (length > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, length);
    if (n <= 0) return;
    text += n;
    length -= size_t(n);
  }
}

// Async-signal-safe: write(2), unlink(2), _exit(2).
[[noreturn]] void second_interrupt() {
  const char* saving = g_stop.saving.get();
  const char* good = g_stop.last_good.get();
  put("\nbrt-dist: second interrupt: ");
  if (saving != nullptr) {
    put("abandoning the checkpoint save in progress, removing ");
    put(saving);
    ::unlink(saving);
  } else {
    put("exiting now, without a checkpoint of the steps since the last one");
  }
  put(good != nullptr ? "; the last good checkpoint is " : "; this run has no good checkpoint");
  if (good != nullptr) put(good);
  put("\n");
  ::_exit(kSecondInterruptExitCode);
}

extern "C" void on_stop_signal(int sig) {
  if (sig == SIGINT && g_stop.signal.load() == SIGINT) second_interrupt();
  if (sig == SIGINT && g_stop.signal.load() == 0)
    put("\nbrt-dist: interrupt: stopping after this step (saving a checkpoint first when checkpoint.dir is "
        "set); press Ctrl-C again to abandon that and exit at once\n");
  g_stop.signal.store(sig);
}

}  // namespace

void StopSignal::install() {
  if (g_stop.installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) sigaction(sig, &sa, nullptr);
}

bool StopSignal::requested() { return g_stop.signal.load() != 0; }
int StopSignal::signal_number() { return g_stop.signal.load(); }

void StopSignal::note_save_started(const std::string& tmp_path) { g_stop.saving.set(tmp_path); }
void StopSignal::note_save_finished() { g_stop.saving.shown.store(-1); }
void StopSignal::note_last_good(const std::string& path) { g_stop.last_good.set(path); }

}  // namespace brt::launch
