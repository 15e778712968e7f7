#include "launch/cli/crash_report.h"

#include <cxxabi.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <typeinfo>

#define BOOST_STACKTRACE_USE_BACKTRACE
#include <boost/stacktrace/frame.hpp>

#include "parallel/mpi/launch_env.h"

namespace brt::launch {

namespace {

constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr int kMaxFrames = 64;

// The one process-wide state of the crash report (see the header): the report's first words,
// formatted at install, and the alternate stack the handler runs on.
struct CrashContext {
  char prefix[512] = "brt-dist: crash";  // "brt-dist train: crash on world rank 0 (host vm, pid 1)"
  size_t prefix_length = std::strlen("brt-dist: crash");
  alignas(16) char alternate_stack[64 * 1024];
  std::atomic<bool> reporting{false};  // the first crashing thread reports; others wait to die
  bool installed = false;
};
CrashContext g_crash;

// Async-signal-safe output: write(2) of fixed text and of numbers formatted without printf.
void put(const char* text, size_t length) {
  while (length > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, length);
    if (n <= 0) return;
    text += n;
    length -= size_t(n);
  }
}
void put(const char* text) { put(text, std::strlen(text)); }
void put_number(unsigned long long v, unsigned base) {
  char digits[32];
  size_t n = 0;
  do {
    digits[sizeof digits - 1 - n++] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v != 0 && n < sizeof digits);
  if (base == 16) put("0x");
  put(digits + sizeof digits - n, n);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "Segmentation fault";
    case SIGBUS: return "Bus error";
    case SIGILL: return "Illegal instruction";
    case SIGFPE: return "Floating-point exception";
    case SIGABRT: return "Aborted";
    default: return "Fatal signal";
  }
}

// In the decoding child only (see put_source_lines): the function, file and line of each frame,
// from the binary's line tables (Boost.Stacktrace's libbacktrace backend reads the DWARF).
// A return address points past its call: the line of the call is that of address - 1.
[[noreturn]] void decode_frames(void* const* frames, int n) {
  put("source (function at file:line, innermost first):\n");
  for (int i = 0; i < n; ++i) {
    const auto address = reinterpret_cast<uintptr_t>(frames[i]);
    const boost::stacktrace::frame frame(reinterpret_cast<void*>(i == 0 ? address : address - 1));
    const std::string file = frame.source_file();
    std::string line = "  #" + std::to_string(i) + " " + frame.name();
    line += file.empty() ? " (no line table)" : " at " + file + ":" + std::to_string(frame.source_line());
    line += "\n";
    put(line.c_str(), line.size());
  }
  ::_exit(0);
}

// Decoding reads the debug information, which allocates: never in the crashed process, whose
// heap may be corrupt, but in a child made by the raw clone system call (fork without glibc's
// atfork handlers, as _Fork is on glibc >= 2.34 — not assumed: the GPU bundle runs on older). If
// the child deadlocks (on an allocator lock a crashed thread held) it is killed after
// kDecodeMilliseconds; the raw frames printed before stand either way.
constexpr int kDecodeMilliseconds = 5000;
void put_source_lines(void* const* frames, int n) {
  const pid_t child = pid_t(::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
  if (child == 0) decode_frames(frames, n);
  if (child < 0) return;
  const timespec tick{0, 20 * 1000 * 1000};
  for (int waited = 0; waited < kDecodeMilliseconds; waited += 20) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) return;
    ::nanosleep(&tick, nullptr);
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  put("source: not decoded within 5 s (the raw frames above decode with addr2line -Cfe BINARY)\n");
}

void put_stack() {
  put("stack (innermost first):\n");
  void* frames[kMaxFrames];
  const int n = ::backtrace(frames, kMaxFrames);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  put_source_lines(frames, n);
}

// The default action of `sig`, once this handler returns (the signal is blocked while it runs):
// the process dies by it, with its exit status and core file.
void die_by(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  ::raise(sig);
}

extern "C" void on_crash_signal(int sig, siginfo_t* info, void*) {
  if (g_crash.reporting.exchange(true)) {  // another thread is reporting: it ends the process
    for (;;) ::pause();
  }
  put(g_crash.prefix, g_crash.prefix_length);
  put(": ");
  put(signal_name(sig));
  put(" (signal ");
  put_number(unsigned(sig), 10);
  put(")");
  if (sig != SIGABRT && info != nullptr && info->si_code > 0) {  // raised by a fault, not kill(2)
    put(" at address ");
    put_number(reinterpret_cast<uintptr_t>(info->si_addr), 16);
  }
  put("\n");
  put_stack();
  die_by(sig);
}

std::string demangled(const char* name) {
  int status = 0;
  char* text = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && text != nullptr ? text : name;
  std::free(text);
  return out;
}

// std::terminate: an exception nobody caught (on any thread), or a noexcept violated. Not a
// signal handler: the message may be formatted normally; the report itself is the signal one.
[[noreturn]] void on_terminate() {
  std::string what = "std::terminate called without an active exception";
  if (const std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = "uncaught exception " + demangled(typeid(x).name()) + ": " + x.what();
    } catch (...) {
      const std::type_info* type = abi::__cxa_current_exception_type();
      what = "uncaught exception of type " + (type ? demangled(type->name()) : std::string("unknown"));
    }
  }
  if (!g_crash.reporting.exchange(true)) {
    put(g_crash.prefix, g_crash.prefix_length);
    put(": ");
    put(what.c_str());
    put("\n");
    put_stack();
  }
  die_by(SIGABRT);  // already reported: the default action, not the handler again
  std::_Exit(134);
}

void format_prefix(const std::string& program) {
  const parallel::LauncherEnv where = parallel::read_launcher_env(parallel::process_env());
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  const int n = std::snprintf(g_crash.prefix, sizeof g_crash.prefix, "%s: crash on world rank %d (host %s, pid %d)",
                              program.c_str(), where.rank < 0 ? 0 : where.rank, host, int(::getpid()));
  g_crash.prefix_length = n < 0 ? 0 : std::min(size_t(n), sizeof g_crash.prefix - 1);
}

}  // namespace

void install_crash_report(const std::string& program) {
  format_prefix(program);
  if (g_crash.installed) return;
  g_crash.installed = true;
  void* prime[2];
  ::backtrace(prime, 2);  // loads libgcc_s now, not inside a crashing process
  stack_t stack {};
  stack.ss_sp = g_crash.alternate_stack;
  stack.ss_size = sizeof g_crash.alternate_stack;
  ::sigaltstack(&stack, nullptr);  // the main thread's; a stack overflow there is reported too
  struct sigaction sa {};
  sa.sa_sigaction = on_crash_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : kCrashSignals) ::sigaction(sig, &sa, nullptr);
  std::set_terminate(on_terminate);
}

}  // namespace brt::launch
