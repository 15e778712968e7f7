#include "launch/supervise/host_check.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace brt::launch {

namespace {

using Clock = std::chrono::steady_clock;

std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs `argv` with stdout and stderr into one pipe, at most `timeout_s`: its output and
// status (-1 when it was killed at the deadline or could not start).
int run_bounded(const std::vector<std::string>& argv, double timeout_s, std::string& output) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return -1;
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    ::setpgid(0, 0);
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  const auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(timeout_s * 1000));
  char buf[4096];
  bool open = true;
  while (open && Clock::now() < deadline) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n > 0 && output.size() < 65536) output.append(buf, size_t(n));
    if (n <= 0) open = false;
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (Clock::now() < deadline)
    if (::waitpid(child, &status, WNOHANG) == child) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    else ::usleep(20000);
  ::killpg(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return -1;
}

}  // namespace

std::string command_checkpoint_dir(const std::vector<std::string>& command) {
  std::string dir;
  for (size_t i = 0; i < command.size(); ++i) {
    if (command[i].rfind("checkpoint.dir=", 0) == 0) dir = command[i].substr(15);
    if (command[i].rfind("--checkpoint.dir=", 0) == 0) dir = command[i].substr(17);
    if (command[i] == "--checkpoint.dir" && i + 1 < command.size()) dir = command[i + 1];
  }
  return dir;
}

HostHealth check_host(const std::string& host, const std::string& checkpoint_dir, double timeout_s) {
  HostHealth h;
  const auto t0 = Clock::now();
  std::string script = "awk '/MemAvailable/ {print \"mem \" $2}' /proc/meminfo";
  if (!checkpoint_dir.empty())
    script += "; if test -d " + shell_quoted(checkpoint_dir) + " -a -r " + shell_quoted(checkpoint_dir) +
              "; then echo dir ok; else echo dir missing; fi";
  const int connect = std::max(1, int(timeout_s / 2));
  std::string output;
  const int status = run_bounded({"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=" + std::to_string(connect), host,
                                  script},
                                 timeout_s, output);
  h.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (status != 0) {
    std::string last = output;
    while (!last.empty() && (last.back() == '\n' || last.back() == '\r')) last.pop_back();
    if (const size_t nl = last.rfind('\n'); nl != std::string::npos) last = last.substr(nl + 1);
    h.detail = status < 0 ? "no answer within " + std::to_string(int(timeout_s)) + " s"
                          : "ssh exited " + std::to_string(status) + (last.empty() ? "" : ": " + last);
    return h;
  }
  std::istringstream lines(output);
  long long kb = -1;
  bool dir_ok = checkpoint_dir.empty();
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("mem ", 0) == 0) kb = std::atoll(line.c_str() + 4);
    if (line == "dir ok") dir_ok = true;
  }
  char text[96];
  std::snprintf(text, sizeof text, "reachable, %.1f GB available", kb >= 0 ? double(kb) / 1e6 : -1.0);
  h.detail = text;
  if (!dir_ok) {
    h.detail += "; checkpoint dir " + checkpoint_dir + " is not a readable directory there";
    return h;
  }
  if (!checkpoint_dir.empty()) h.detail += ", " + checkpoint_dir + " readable";
  h.ok = true;
  return h;
}

}  // namespace brt::launch
