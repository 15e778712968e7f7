#include "launch/supervise/job_signs.h"

#include <cstdio>
#include <cstdlib>

namespace brt::launch {

namespace {

// The word after `key` in `text` (up to a space, comma, parenthesis or period at the end).
std::string word_after(std::string_view text, std::string_view key) {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return "";
  std::string word;
  for (size_t i = at + key.size(); i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == ',' || c == ')' || c == '(' || c == '\t') break;
    word.push_back(c);
  }
  while (!word.empty() && (word.back() == '.' || word.back() == ':')) word.pop_back();
  return word;
}

// A number right after `key` ("resumed from X at step 12" with key " at step ").
int64_t number_after(std::string_view text, std::string_view key) {
  const size_t at = text.find(key);
  if (at == std::string_view::npos) return -1;
  const std::string rest(text.substr(at + key.size()));
  char* end = nullptr;
  const long long v = std::strtoll(rest.c_str(), &end, 10);
  return end == rest.c_str() ? -1 : int64_t(v);
}

// The step of a progress line "step      4/8 | loss ..." (after an mpirun tag); -1 otherwise.
int64_t progress_step(std::string_view text) {
  const size_t at = text.find("step ");
  if (at == std::string_view::npos || (at > 0 && text[at - 1] != ':' && text[at - 1] != ' ')) return -1;
  long long step = 0, total = 0;
  char bar = 0;
  const std::string rest(text.substr(at));
  if (std::sscanf(rest.c_str(), "step %lld/%lld %c", &step, &total, &bar) != 3 || bar != '|') return -1;
  return step;
}

}  // namespace

void JobSigns::sign(int strength, std::string host, std::string_view evidence, Clock::time_point now) {
  if (!first_sign_) first_sign_ = now;
  if (strength <= strength_ || host.empty()) return;
  strength_ = strength;
  host_ = std::move(host);
  evidence_ = std::string(evidence.substr(0, 300));
}

void JobSigns::blame(const std::string& host, const std::string& evidence, Clock::time_point first_sign) {
  if (!first_sign_ || first_sign < *first_sign_) first_sign_ = first_sign;
  sign(5, host, evidence, first_sign);
}

bool JobSigns::line(std::string_view text, Clock::time_point now) {
  if (!abort_)
    if ((abort_ = parse_abort_report(text))) sign(1, "", text, now);
  // Open MPI names the node of a rank that died, and of a daemon it lost.
  if (text.find("Remote daemon") != std::string_view::npos && text.find(" on node ") != std::string_view::npos)
    sign(4, word_after(text, " on node "), "Open MPI lost the daemon on " + word_after(text, " on node "), now);
  if (text.find("exited on signal") != std::string_view::npos || text.find("returned a non-zero") != std::string_view::npos)
    if (text.find(" on node ") != std::string_view::npos) sign(3, word_after(text, " on node "), text, now);
  // srun: "srun: error: h2: task 1: Killed" (a task that died on node h2).
  if (text.rfind("srun: error: ", 0) == 0 && text.find(": task ") != std::string_view::npos)
    sign(3, word_after(text, "srun: error: "), text, now);
  if (text.find("Still waiting for world rank") != std::string_view::npos)
    sign(2, word_after(text.substr(text.find("Still waiting for world rank")), "(host "), text, now);
  if (text.rfind("Connection to ", 0) == 0 && text.find(" closed") != std::string_view::npos)
    sign(1, word_after(text, "Connection to "), text, now);
  if (text.find("resumed from ") != std::string_view::npos && text.find(" at step ") != std::string_view::npos) {
    resumed_step_ = number_after(text, " at step ");
    started_at_ = now;
  } else if (text.find("no checkpoint in ") != std::string_view::npos &&
             text.find("starting from step 0") != std::string_view::npos) {
    resumed_step_ = 0;
    started_at_ = now;
  }
  if (text.find("checkpoint saved: ") != std::string_view::npos) {
    const int64_t step = number_after(text, "/ckpt-");
    const int64_t bare = step >= 0 ? step : number_after(text, "checkpoint saved: ckpt-");
    if (bare > saved_step_) saved_step_ = bare;
  }
  const int64_t step = progress_step(text);
  if (step >= 0 && !first_step_at_ && step > resumed_step_) {
    first_step_at_ = now;
    first_step_ = step;
    return true;
  }
  return false;
}

}  // namespace brt::launch
