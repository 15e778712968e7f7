// What the job's output lines tell the supervisor, read as they pass (launch/supervise/
// line_stream.h): the first abort report, which host a fault was on, and how far the run got —
// the step it resumed from, the newest checkpoint it saved, and when its first new step ended.
// Every fact is noted with the supervisor's clock as the line arrived.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "launch/supervise/supervisor.h"

namespace brt::launch {

class JobSigns {
 public:
  using Clock = std::chrono::steady_clock;
  // One line (stdout or stderr); returns true when it was the first step line after the start
  // (the restart's "training again").
  bool line(std::string_view text, Clock::time_point now);
  // A sign the supervisor found itself (a silent rank): the strongest.
  void blame(const std::string& host, const std::string& evidence, Clock::time_point first_sign);

  const std::optional<AbortReport>& abort() const { return abort_; }
  // The host the fault was on, as the strongest sign names it ("" when none did), and that sign.
  const std::string& fault_host() const { return host_; }
  const std::string& evidence() const { return evidence_; }
  // The first sign of trouble (an abort report or a fault line); nullopt when none came.
  std::optional<Clock::time_point> first_sign() const { return first_sign_; }
  int64_t resumed_step() const { return resumed_step_; }  // -1: not yet said
  std::optional<Clock::time_point> started_at() const { return started_at_; }  // the resume decided
  int64_t saved_step() const { return saved_step_; }       // -1: none saved by this attempt
  std::optional<Clock::time_point> first_step_at() const { return first_step_at_; }
  int64_t first_step() const { return first_step_; }

 private:
  void sign(int strength, std::string host, std::string_view evidence, Clock::time_point now);
  std::optional<AbortReport> abort_;
  std::string host_, evidence_;
  int strength_ = 0;
  std::optional<Clock::time_point> first_sign_, started_at_, first_step_at_;
  int64_t resumed_step_ = -1, saved_step_ = -1, first_step_ = -1;
};

}  // namespace brt::launch
