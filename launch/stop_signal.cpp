#include "launch/stop_signal.h"

#include <atomic>
#include <csignal>
#include <unistd.h>

namespace brt::launch {

namespace {
std::atomic<int> g_stop_signal{0};

extern "C" void on_stop_signal(int sig) {
  if (sig == SIGINT && g_stop_signal.load() == SIGINT) _exit(130);  // second Ctrl-C
  g_stop_signal.store(sig);
}
}  // namespace

void StopSignal::install() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) sigaction(sig, &sa, nullptr);
}

bool StopSignal::requested() { return g_stop_signal.load() != 0; }
int StopSignal::signal_number() { return g_stop_signal.load(); }

}  // namespace brt::launch
