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

namespace {

// The check's script, run on the host: its available memory and whether the checkpoint
// directory is a readable directory there.
std::string health_script(const std::string& checkpoint_dir) {
  std::string script = "awk '/MemAvailable/ {print \"mem \" $2}' /proc/meminfo";
  if (!checkpoint_dir.empty())
    script += "; if test -d " + shell_quoted(checkpoint_dir) + " -a -r " + shell_quoted(checkpoint_dir) +
              "; then echo dir ok; else echo dir missing; fi";
  return script;
}

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (const size_t nl = text.rfind('\n'); nl != std::string::npos) text = text.substr(nl + 1);
  return text;
}

// Runs the check through `argv` (ssh HOST SCRIPT, srun ... -w NODE sh -c SCRIPT) and reads its answer.
HostHealth checked(const std::vector<std::string>& argv, const std::string& agent, const std::string& checkpoint_dir,
                   double timeout_s) {
  HostHealth h;
  const auto t0 = Clock::now();
  std::string output;
  const int status = run_bounded(argv, timeout_s, output);
  h.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (status != 0) {
    const std::string last = last_line(output);
    h.detail = status < 0 ? "no answer within " + std::to_string(int(timeout_s)) + " s"
                          : agent + " exited " + std::to_string(status) + (last.empty() ? "" : ": " + last);
    return h;
  }
  std::istringstream lines(output);
  long long kb = -1;
  bool dir_ok = checkpoint_dir.empty(), answered = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("mem ", 0) == 0) {
      kb = std::atoll(line.c_str() + 4);
      answered = true;
    }
    if (line == "dir ok") dir_ok = true;
  }
  if (!answered) {
    h.detail = agent + " ran nothing there" + (last_line(output).empty() ? "" : ": " + last_line(output));
    return h;
  }
  char text[96];
  std::snprintf(text, sizeof text, "reachable, %.1f GB available", double(kb) / 1e6);
  h.detail = text;
  if (!dir_ok) {
    h.detail += "; checkpoint dir " + checkpoint_dir + " is not a readable directory there";
    return h;
  }
  if (!checkpoint_dir.empty()) h.detail += ", " + checkpoint_dir + " readable";
  h.ok = true;
  return h;
}

}  // namespace

HostHealth check_host(const std::string& host, const std::string& checkpoint_dir, double timeout_s) {
  const int connect = std::max(1, int(timeout_s / 2));
  return checked({"ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=" + std::to_string(connect), host,
                  health_script(checkpoint_dir)},
                 "ssh", checkpoint_dir, timeout_s);
}

HostHealth check_slurm_node(const std::string& node, const std::string& checkpoint_dir, double timeout_s) {
  // --overlap: the check never waits for the step being torn down; --mpi=none: a site's default
  // plugin (pmix) is not wanted for one shell.
  return checked({"srun", "--overlap", "--mpi=none", "-N", "1", "-n", "1", "-w", node, "-J", "brt-node-check",
                  "--quiet", "sh", "-c", health_script(checkpoint_dir)},
                 "srun", checkpoint_dir, timeout_s);
}

std::vector<std::string> slurm_allocation_nodes(double timeout_s, std::string& why_none) {
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* list = std::getenv("SLURM_JOB_NODELIST");
  if (job == nullptr || list == nullptr || *list == '\0') {
    why_none = "not inside a Slurm allocation (no SLURM_JOB_ID and SLURM_JOB_NODELIST)";
    return {};
  }
  std::string output;
  const int status = run_bounded({"scontrol", "show", "hostnames", list}, timeout_s, output);
  std::vector<std::string> nodes;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) nodes.push_back(line);
  if (status != 0 || nodes.empty()) {
    why_none = "`scontrol show hostnames " + std::string(list) + "` " +
               (status < 0 ? "gave no answer within " + std::to_string(int(timeout_s)) + " s"
                           : "exited " + std::to_string(status) + ": " + last_line(output));
    return {};
  }
  return nodes;
}

}  // namespace brt::launch
