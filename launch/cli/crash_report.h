// What a crash prints (docs/reliability.md "Crashes"): a segfault, a bus error, an
// illegal instruction, a floating-point trap or an abort (a failed assertion, std::terminate,
// an MPI error: parallel/mpi/mpi_session.h's handler aborts) would otherwise end a rank with no word,
// or with Open MPI's bare banner. Instead the rank says who it is and where it was:
//
//   brt-dist train: crash on world rank 1 (host vm, pid 4242): Segmentation fault (signal 11)
//   at address 0x0
//   stack (innermost first):
//   build/release/launch/brt-dist(_ZNK3brt6launch14FaultInjection4fireE...+0x9c) [0x55d0c4e1a2bc]
//   ...
//   source (function at file:line, innermost first):
//     #0 brt::launch::FaultInjection::crash(std::string const&) const at .../fault_injection.cpp:118
//   ...
//
// and then dies by the same signal (the default action: exit status 128 + signal, a core file
// where enabled), so a batch system or mpirun sees the crash as a crash. An exception nobody
// catches (std::terminate) prints its type and message first, then the same report.
//
// Two stages, because the handler runs in a process that is by definition broken — often a
// corrupted heap. First the raw frames, with glibc's backtrace(3) and backtrace_symbols_fd(3):
// written straight to the descriptor without malloc (backtrace is primed at install: its first
// call loads libgcc_s), named from the dynamic symbol table (brt-dist is linked with -rdynamic).
// Then function, file and line per frame from Boost.Stacktrace (its libbacktrace backend
// reading the binary's DWARF line tables: the Release build compiles with -g1, which changes no
// generated instruction) — but in a child process, since decoding allocates; its own
// documentation says to dump only raw frames inside a handler. The child is bounded in time; a
// crashed allocator costs the second stage, never the report.
//
// Process-wide state: the signal handlers need the report's first line formatted before the
// crash (no allocation after it) and an alternate stack (a stack overflow leaves none). Both
// live in crash_report.cpp's one static CrashContext, written once by install_crash_report()
// and only read afterwards.
#pragma once

#include <string>

namespace brt::launch {

// Installs the handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT (on an alternate stack)
// and the std::terminate handler. `program` starts every report ("brt-dist train"). The rank
// is the launcher's (mpirun, srun; 0 for a plain start), the host this machine's. Call first
// thing in main; calling it again replaces the program name.
void install_crash_report(const std::string& program);

}  // namespace brt::launch
