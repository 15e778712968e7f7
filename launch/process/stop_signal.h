// Ctrl-C (SIGINT) and SIGTERM/SIGUSR1 ask the run to stop cleanly at the next step boundary.
// A signal handler can only touch lock-free state, so this is the one process-wide flag (and
// the two paths the second Ctrl-C names); it is confined here and read through StopSignal.
//
// The first Ctrl-C says what will happen: the run stops after this step and, with
// checkpoint.dir, saves first. A second Ctrl-C exits at once (status 130) and says what it
// does: "second interrupt: abandoning the checkpoint save in progress, removing
// ck/ckpt-00000010.h5.tmp; the last good checkpoint is ck/ckpt-00000008.h5" — removing only
// the .tmp of the save this process is writing, nothing else.
#pragma once

#include <string>

namespace brt::launch {

// Exit status of a training run that a signal stopped before its last step (EX_TEMPFAIL).
constexpr int kStoppedBySignalExitCode = 75;
// Exit status after a second Ctrl-C (128 + SIGINT, as a shell reports a process it killed).
constexpr int kSecondInterruptExitCode = 130;

class StopSignal {
 public:
  // Installs handlers for SIGINT, SIGTERM and SIGUSR1. A second SIGINT exits at once.
  static void install();
  static bool requested();
  static int signal_number();  // the signal that asked, or 0

  // The checkpoint file this process is writing now (its .tmp), which a second Ctrl-C removes;
  // cleared when the save has committed or failed.
  static void note_save_started(const std::string& tmp_path);
  static void note_save_finished();
  // The run's newest good checkpoint, which the second Ctrl-C's message names.
  static void note_last_good(const std::string& path);
};

}  // namespace brt::launch
