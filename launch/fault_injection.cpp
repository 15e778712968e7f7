#include "launch/fault_injection.h"

#include <signal.h>
#include <unistd.h>

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
  return FaultInjection(spec == nullptr ? "" : spec);
}

FaultInjection::FaultInjection(const FaultInjection& other)
    : faults_(other.faults_), nonfinite_steps_(other.nonfinite_steps_),
      grad_spike_steps_(other.grad_spike_steps_), hits_(other.hits_) {}

FaultInjection& FaultInjection::operator=(const FaultInjection& other) {
  if (this == &other) return *this;
  std::lock_guard<std::mutex> lock(mutex_);
  faults_ = other.faults_;
  nonfinite_steps_ = other.nonfinite_steps_;
  grad_spike_steps_ = other.grad_spike_steps_;
  hits_ = other.hits_;
  return *this;
}

FaultInjection::FaultInjection(const std::string& spec) {
  for (const std::string& item : split(spec, ';')) {
    if (item.empty()) continue;
    const auto parts = split(item, '@');
    Fault fault;
    fault.action = parts[0];
    for (size_t k = 1; k < parts.size(); ++k) {
      const std::string& p = parts[k];
      if (p.rfind("step=", 0) == 0) fault.step = number(p.substr(5), item);
      else if (p.rfind("rank=", 0) == 0) fault.rank = int(number(p.substr(5), item));
      else if (p.rfind("nth=", 0) == 0) fault.nth = int(number(p.substr(4), item));
      else fault.phase = p;
    }
    if (fault.action == "nonfinite" || fault.action == "gradspike") {
      if (fault.step <= 0) throw std::invalid_argument("BRT_FAULT_INJECT: '" + item + "' needs @step=N");
      (fault.action == "nonfinite" ? nonfinite_steps_ : grad_spike_steps_).insert(fault.step);
      continue;
    }
    if (fault.action != "kill" && fault.action != "stop" && fault.action != "throw")
      throw std::invalid_argument("BRT_FAULT_INJECT: '" + item + "': actions are kill, stop, throw, nonfinite, gradspike");
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
  std::fprintf(stderr, "fault injection: %s at %s on world rank %d (pid %d)\n",
               fault.action == "kill" ? "SIGKILL" : "SIGSTOP", where.c_str(), world_rank, int(::getpid()));
  std::fflush(stderr);
  ::raise(fault.action == "kill" ? SIGKILL : SIGSTOP);
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
