// Ctrl-C (SIGINT) and SIGTERM/SIGUSR1 ask the run to stop cleanly at the next step boundary.
// A signal handler can only touch a lock-free flag, so this is the one process-wide flag; it
// is confined here and read through StopSignal.
#pragma once

namespace brt::launch {

// Exit status of a training run that a signal stopped before its last step (EX_TEMPFAIL).
constexpr int kStoppedBySignalExitCode = 75;

class StopSignal {
 public:
  // Installs handlers for SIGINT, SIGTERM and SIGUSR1. A second SIGINT exits at once.
  static void install();
  static bool requested();
  static int signal_number();  // the signal that asked, or 0
};

}  // namespace brt::launch
