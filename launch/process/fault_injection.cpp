#include "launch/process/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace brt::launch {

namespace {

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t end = text.find(sep, begin);
    parts.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

int64_t number(const std::string& text, const std::string& item) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0') throw std::invalid_argument("BRT_FAULT_INJECT: '" + item + "': bad number " + text);
  return v;
}

}  // namespace

FaultInjection FaultInjection::from_environment() {
  const char* spec = std::getenv("BRT_FAULT_INJECT");
  const char* attempt = std::getenv("BRT_LAUNCH_ATTEMPT");  // brt-dist launch's (launch/supervise/restarts.h)
  return FaultInjection(spec == nullptr ? "" : spec, attempt == nullptr ? 1 : int(std::atol(attempt)));
}

FaultInjection::FaultInjection(const FaultInjection& other)
    : faults_(other.faults_), nonfinite_steps_(other.nonfinite_steps_), nan_grad_steps_(other.nan_grad_steps_),
      grad_spike_steps_(other.grad_spike_steps_),
      wrong_blas_ranks_(other.wrong_blas_ranks_), hits_(other.hits_) {}

FaultInjection& FaultInjection::operator=(const FaultInjection& other) {
  if (this == &other) return *this;
  std::lock_guard<std::mutex> lock(mutex_);
  faults_ = other.faults_;
  nonfinite_steps_ = other.nonfinite_steps_;
  nan_grad_steps_ = other.nan_grad_steps_;
  wrong_blas_ranks_ = other.wrong_blas_ranks_;
  grad_spike_steps_ = other.grad_spike_steps_;
  hits_ = other.hits_;
  return *this;
}

FaultInjection::FaultInjection(const std::string& spec, int attempt) {
  for (const std::string& item : split(spec, ';')) {
    if (item.empty()) continue;
    const auto parts = split(item, '@');
    Fault fault;
    fault.action = parts[0];
    int64_t only_attempt = 0;
    for (size_t k = 1; k < parts.size(); ++k) {
      const std::string& p = parts[k];
      if (p.rfind("attempt=", 0) == 0) only_attempt = number(p.substr(8), item);
      else if (p.rfind("step=", 0) == 0) fault.step = number(p.substr(5), item);
      else if (p.rfind("rank=", 0) == 0) fault.rank = int(number(p.substr(5), item));
      else if (p.rfind("nth=", 0) == 0) fault.nth = int(number(p.substr(4), item));
      else if (p.rfind("ms=", 0) == 0) fault.ms = number(p.substr(3), item);
      else fault.phase = p;
    }
    if (only_attempt > 0 && only_attempt != attempt) continue;  // another attempt's fault
    if (fault.action == "wrongblas") {  // no phase or step: it happens at start
      wrong_blas_ranks_.insert(fault.rank);
      continue;
    }
    if (fault.action == "nonfinite" || fault.action == "gradspike" || fault.action == "nangrad") {
      if (fault.step <= 0) throw std::invalid_argument("BRT_FAULT_INJECT: '" + item + "' needs @step=N");
      (fault.action == "nonfinite" ? nonfinite_steps_
                                   : fault.action == "gradspike" ? grad_spike_steps_ : nan_grad_steps_)
          .insert(fault.step);
      continue;
    }
    static const std::set<std::string> kActions = {"kill",  "stop",      "throw",    "segv",
                                                   "abort", "terminate", "mpierror", "pause"};
    if (!kActions.count(fault.action))
      throw std::invalid_argument("BRT_FAULT_INJECT: '" + item + "': actions are kill, stop, throw, segv, abort, "
                                  "terminate, mpierror, pause, nonfinite, nangrad, gradspike, wrongblas");
    if (fault.action == "pause" && fault.ms <= 0)
      throw std::invalid_argument("BRT_FAULT_INJECT: '" + item + "' needs @ms=N");
    if (fault.phase.empty() == (fault.step <= 0))
      throw std::invalid_argument("BRT_FAULT_INJECT: '" + item + "' needs a phase or @step=N (one of them)");
    faults_.push_back(fault);
  }
  hits_.assign(faults_.size(), 0);
}

void FaultInjection::fire(const Fault& fault, const std::string& where, int world_rank) const {
  if (fault.action == "throw") {
    std::string message = "fault injection: an error at ";
    message.append(where).append(" on world rank ").append(std::to_string(world_rank));
    throw std::runtime_error(message);
  }
  if (fault.action == "pause") {
    std::fprintf(stderr, "fault injection: pausing %.1f s at %s on world rank %d (pid %d)\n", double(fault.ms) / 1000,
                 where.c_str(), world_rank, int(::getpid()));
    std::fflush(stderr);
    ::usleep(useconds_t(fault.ms * 1000));
    return;
  }
  const bool signal = fault.action == "kill" || fault.action == "stop";
  std::fprintf(stderr, "fault injection: %s at %s on world rank %d (pid %d)\n",
               signal ? (fault.action == "kill" ? "SIGKILL" : "SIGSTOP") : fault.action.c_str(), where.c_str(),
               world_rank, int(::getpid()));
  std::fflush(stderr);
  if (signal) ::raise(fault.action == "kill" ? SIGKILL : SIGSTOP);
  else crash(fault.action);
}

void FaultInjection::crash(const std::string& action) {
  if (action == "segv") {
    static volatile uintptr_t address = 0;  // unknown to the compiler: a real store to page 0
    *reinterpret_cast<volatile int*>(address) = 1;
  } else if (action == "abort") {
    std::abort();
  } else if (action == "terminate") {
    // Through a pointer the compiler cannot see into: an exception leaving a noexcept function.
    static void (*volatile thrower)() = [] { throw std::runtime_error("fault injection: an exception no one catches"); };
    [](void (*f)()) noexcept { f(); }(thrower);
  } else if (action == "mpierror") {
    int value = 0;
    MPI_Send(&value, 1, MPI_INT, -7, 0, MPI_COMM_WORLD);  // no such rank: MPI_ERR_RANK
  }
}

void FaultInjection::at_phase(const std::string& phase, int world_rank) const {
  for (size_t k = 0; k < faults_.size(); ++k) {
    const Fault& f = faults_[k];
    if (f.phase.empty() || phase.rfind(f.phase, 0) != 0 || (f.rank >= 0 && f.rank != world_rank)) continue;
    int hit = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      hit = ++hits_[k];
    }
    if (hit == f.nth) fire(f, "'" + phase + "'", world_rank);
  }
}

void FaultInjection::at_step(int64_t step, int world_rank) const {
  for (const Fault& f : faults_)
    if (f.step == step && (f.rank < 0 || f.rank == world_rank)) fire(f, "step " + std::to_string(step), world_rank);
}

}  // namespace brt::launch
