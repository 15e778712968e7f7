#include "launch/supervise/restarts.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <set>

#include "launch/supervise/host_check.h"

namespace brt::launch {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

std::string json_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

std::string seconds_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string absolute(const std::string& dir) {
  if (dir.empty() || dir[0] == '/') return dir;
  char cwd[4096];
  return ::getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + dir : dir;
}

// What the fault was, in words: the strongest sign, else the status.
std::string fault_text(const AttemptResult& r) {
  std::string text = "exit status " + std::to_string(r.status);
  if (!r.signs.evidence().empty()) text += " (" + r.signs.evidence() + ")";
  return text;
}

}  // namespace

// A restart decided, awaiting the relaunched attempt's first new step for its timings.
struct Restarter::Pending {
  int attempt = 0, status = 0;
  std::string fault, host, hosts;
  std::vector<std::string> excluded;
  double detect_s = 0, teardown_s = 0, checks_s = 0;
  Clock::time_point first_sign{}, relaunched{};
};

bool is_fault(int status) { return status != 0 && status != 2 && status != 75 && status != 130; }

Restarter::Restarter(const RestartOptions& options, std::vector<std::string> command)
    : options_(options),
      command_(std::move(command)),
      checkpoint_dir_(absolute(command_checkpoint_dir(command_))),
      ranks_(options.shrink.ranks) {
  if (!options_.log_path.empty()) {
    log_ = std::fopen(options_.log_path.c_str(), "a");
    if (log_ == nullptr)
      say("warning: cannot open --restart-log " + options_.log_path + ": " + std::strerror(errno) +
          " (restarts are logged here only)");
  }
}

Restarter::~Restarter() {
  if (log_) std::fclose(log_);
}

void Restarter::record(const std::string& json) {
  if (log_ == nullptr) return;
  if (std::fprintf(log_, "%s\n", json.c_str()) < 0 || std::fflush(log_) != 0)
    say("warning: cannot write --restart-log " + options_.log_path + ": " + std::strerror(errno));
}

std::optional<int> Restarter::give_up(int status, const std::string& why, const AttemptResult& result) {
  say(why + ": exit " + std::to_string(status));
  record("{\"event\":\"give_up\",\"attempt\":" + std::to_string(attempt_) + ",\"status\":" +
         std::to_string(result.status) + ",\"exit\":" + std::to_string(status) + ",\"reason\":" + json_string(why) + "}");
  return status;
}

// Every one of `names` checked at once by `check` (each bounded), one line each: the healthy ones.
std::set<std::string> Restarter::healthy_of(const std::vector<std::string>& names, HostCheck check,
                                            double& checks_s) const {
  const auto t0 = Clock::now();
  std::vector<std::future<HostHealth>> checks;
  for (const std::string& n : names)
    checks.push_back(std::async(std::launch::async, check, n, checkpoint_dir_, options_.host_check_timeout_s));
  std::set<std::string> healthy;
  for (size_t i = 0; i < names.size(); ++i) {
    const HostHealth h = checks[i].get();
    say("host " + names[i] + ": " + (h.ok ? "ok, " : "FAILED its check: ") + h.detail);
    if (h.ok) healthy.insert(names[i]);
  }
  checks_s = seconds_between(t0, Clock::now());
  return healthy;
}

// Every host of the list and every spare, over ssh.
std::set<std::string> Restarter::healthy_hosts(const std::vector<HostSlots>& hosts, double& checks_s) const {
  std::vector<std::string> names;
  for (const HostSlots& h : hosts) names.push_back(h.name);
  for (const HostSlots& h : options_.spares)
    if (std::find(names.begin(), names.end(), h.name) == names.end()) names.push_back(h.name);
  return healthy_of(names, check_host, checks_s);
}

// A healthy spare not yet used and not in `hosts`, or null.
const HostSlots* Restarter::free_spare(const std::vector<HostSlots>& hosts, const std::set<std::string>& healthy) const {
  for (const HostSlots& s : options_.spares)
    if (healthy.count(s.name) && std::find(used_spares_.begin(), used_spares_.end(), s.name) == used_spares_.end() &&
        std::none_of(hosts.begin(), hosts.end(), [&](const HostSlots& x) { return x.name == s.name; }))
      return &s;
  return nullptr;
}

// The command on `dropped` fewer ranks (--min-dp): mpirun's -np lowered and brt-dist train's
// train.grad_accum raised so the global streams stay; the reason when that cannot be.
std::string Restarter::shrink(int dropped, int nodes) {
  const ShrinkOptions& k = options_.shrink;
  const int ranks = ranks_ - dropped;
  const int dp = ranks / k.replica_ranks;
  const std::string sizes = std::to_string(ranks_) + " -> " + std::to_string(ranks) + " ranks";
  if (ranks % k.replica_ranks != 0)
    return sizes + ": not a multiple of train.tp x train.cp = " + std::to_string(k.replica_ranks);
  if (dp < k.min_dp)
    return sizes + ": " + std::to_string(dp) + " data-parallel ranks, below --min-dp " + std::to_string(k.min_dp);
  if (k.global_streams % (int64_t(k.batch) * dp) != 0)
    return sizes + ": the global batch of " + std::to_string(k.global_streams) + " streams is not a multiple of "
           "train.batch " + std::to_string(k.batch) + " x " + std::to_string(dp) + " data-parallel ranks";
  const int64_t accum = k.global_streams / (int64_t(k.batch) * dp);
  if (const std::optional<CommandRanks> where = find_command_ranks(command_))
    command_ = with_command_ranks(command_, *where, ranks);
  if (const std::optional<SrunShape> shape = find_srun_shape(command_))
    command_ = with_srun_size(command_, *shape, nodes, ranks);
  command_ = with_last_override(command_, "train.grad_accum", std::to_string(accum));
  say("shrinking: " + sizes + ", " + std::to_string(dp) + " data-parallel ranks; train.grad_accum = " +
      std::to_string(accum) + " keeps the global batch of " + std::to_string(k.global_streams) + " streams");
  ranks_ = ranks;
  return "";
}

// srun: the next step of the same allocation leaves out, by --exclude, the host the fault was on
// and every node of the allocation that fails its check (a one-task srun step on each node not
// yet left out; the supervisor runs inside the allocation: SLURM_JOB_NODELIST). Slurm places the
// step on the allocation's other nodes: a spare node when there is one. With fewer nodes left
// than the step asks for, --min-dp shrinks it (-N, -n and train.grad_accum); without --min-dp a
// fault host that passed its check is kept, and a failed node refuses the restart. Outside an
// allocation each srun allocates anew from the nodes Slurm finds responding: the fault host is
// left out, nothing else is checked. Other commands without a host list relaunch as they were.
Restarter::NextHosts Restarter::srun_next(const AttemptResult& result, std::vector<std::string>& excluded,
                                          double& checks_s) {
  NextHosts out;
  const std::optional<SrunShape> shape = find_srun_shape(command_);
  if (!shape) return out;
  const std::string& fault = result.signs.fault_host();
  std::string why_none;
  const std::vector<std::string> allocated = slurm_allocation_nodes(options_.host_check_timeout_s, why_none);
  std::vector<std::string> checked, leave_out;
  for (const std::string& n : allocated)
    if (!excluded_nodes_.count(n)) checked.push_back(n);
  const std::set<std::string> healthy = healthy_of(checked, check_slurm_node, checks_s);
  for (const std::string& n : checked)
    if (!healthy.count(n)) leave_out.push_back(n);
  if (allocated.empty()) say("no node check: " + why_none);
  const int needed = shape->nodes;  // 0: srun chooses
  auto left_after = [&](size_t more) { return int(checked.size() - leave_out.size() - more); };
  const bool fault_checked = std::find(checked.begin(), checked.end(), fault) != checked.end();
  if (!fault.empty() && std::find(leave_out.begin(), leave_out.end(), fault) == leave_out.end()) {
    if (!fault_checked || needed == 0 || left_after(1) >= needed || options_.shrink.min_dp > 0)
      leave_out.push_back(fault);
    else
      say("host " + fault + ": the fault was there, but it passed its check and the allocation has no other node "
          "for it (--min-dp would shrink): kept");
  }
  std::string list;
  for (const std::string& n : leave_out) {
    command_ = *with_srun_exclude(command_, n, list);
    excluded_nodes_.insert(n);
    excluded.push_back(n);
    say("host " + n + " left out (" + (healthy.count(n) || (!fault_checked && n == fault) ? "the fault was there" : "failed its check") +
        "): srun --exclude=" + list);
  }
  if (leave_out.empty()) return out;
  out.rewritten = true;
  out.hosts = "srun --exclude=" + list;
  const int left = left_after(0);
  if (allocated.empty() || needed == 0 || left >= needed) return out;
  if (options_.shrink.min_dp == 0) {
    out.refused = "the allocation has " + std::to_string(left) + " node(s) left that pass their check, the step needs " +
                  std::to_string(needed) + " (--min-dp would shrink)";
    return out;
  }
  const int dropped = shape->tasks > 0 ? shape->ranks() - shape->ranks() / needed * left : (needed - left) * shape->per_node;
  if (const std::string refused = shrink(dropped, left); !refused.empty()) out.refused = "cannot shrink, " + refused;
  out.hosts += " -N " + std::to_string(left);
  return out;
}

// The host the fault was on, or one that failed its check, replaced by a healthy spare (with its
// slots); else dropped (--min-dp: a smaller data-parallel size), else kept when it passed its
// check; refused when it failed and nothing can take its place.
Restarter::NextHosts Restarter::next_hosts(const AttemptResult& result, std::vector<std::string>& excluded,
                                           double& checks_s) {
  NextHosts out;
  const std::optional<CommandHosts> where = find_command_hosts(command_);
  if (!where) return srun_next(result, excluded, checks_s);
  const std::set<std::string> healthy = healthy_hosts(where->hosts, checks_s);
  std::vector<HostSlots> next;
  int dropped = 0;
  for (const HostSlots& h : where->hosts) {
    const bool passed = healthy.count(h.name) != 0;
    if (h.name != result.signs.fault_host() && passed) {
      next.push_back(h);
    } else if (const HostSlots* spare = free_spare(where->hosts, healthy)) {
      used_spares_.push_back(spare->name);
      next.push_back({spare->name, h.slots});
      excluded.push_back(h.name);
      say("host " + h.name + " left out (" + (passed ? "the fault was there" : "failed its check") + "); spare " +
          spare->name + " takes its " + std::to_string(h.slots) + " slot(s)");
    } else if (options_.shrink.min_dp > 0) {
      dropped += h.slots;
      excluded.push_back(h.name);
      say("host " + h.name + " left out (" + (passed ? "the fault was there" : "failed its check") +
          "); no spare is left: its " + std::to_string(h.slots) + " rank(s) dropped");
    } else if (passed) {
      next.push_back(h);
      say("host " + h.name + ": the fault was there, but it passed its check and no spare is left (--spare-hosts, "
          "--min-dp): kept");
    } else {
      out.refused = "host " + h.name + " failed its check and no healthy spare is left (--spare-hosts; --min-dp "
                    "would shrink)";
      return out;
    }
  }
  if (dropped > 0 && !(out.refused = shrink(dropped, 0)).empty()) {
    out.refused = "cannot shrink, " + out.refused;
    return out;
  }
  command_ = with_command_hosts(command_, *where, next);
  out.rewritten = true;
  out.hosts = host_list_text(next);
  return out;
}

std::optional<int> Restarter::after_fault(const AttemptResult& result) {
  attempt_ended(result);
  const int64_t newest = std::max(result.signs.saved_step(), result.signs.resumed_step());
  if (newest > best_step_) {
    best_step_ = newest;
    no_progress_ = 0;
  } else {
    ++no_progress_;
  }
  const std::string fault = fault_text(result);
  say("attempt " + std::to_string(attempt_) + " failed: " + fault +
      (result.signs.fault_host().empty() ? "" : "; the fault was on host " + result.signs.fault_host()));
  if (restarts_done_ >= options_.restarts)
    return give_up(kRestartsExhaustedExitCode,
                   "no restart left (--restarts " + std::to_string(options_.restarts) +
                       "); the newest checkpoint is of step " + std::to_string(best_step_) + ", a requeue continues from it",
                   result);
  if (no_progress_ >= options_.no_progress_limit)
    return give_up(kNoRequeueExitCode,
                   std::to_string(no_progress_) + " restart(s) in a row without a checkpoint newer than step " +
                       std::to_string(best_step_) + " (--no-progress-restarts " +
                       std::to_string(options_.no_progress_limit) + "): the fault repeats; do not requeue",
                   result);
  auto p = std::make_unique<Pending>();
  p->status = result.status;
  p->fault = fault;
  p->host = result.signs.fault_host();
  p->first_sign = result.signs.first_sign().value_or(result.decided);
  p->detect_s = std::max(0.0, seconds_between(p->first_sign, result.decided));
  p->teardown_s = seconds_between(result.decided, result.gone);
  const NextHosts hosts = next_hosts(result, p->excluded, p->checks_s);
  if (!hosts.refused.empty()) return give_up(kRestartsExhaustedExitCode, hosts.refused, result);
  p->hosts = hosts.hosts;
  ++restarts_done_;
  ++attempt_;
  p->attempt = attempt_;
  p->relaunched = Clock::now();
  say("restart " + std::to_string(restarts_done_) + " of " + std::to_string(options_.restarts) + ": relaunching (attempt " +
      std::to_string(attempt_) + ")" + (hosts.rewritten ? " on " + hosts.hosts : " with the same command (no host list to rewrite)") +
      "; it resumes from the newest good checkpoint");
  pending_ = std::move(p);
  return std::nullopt;
}

void Restarter::training_again(const AttemptResult& result) {
  if (!pending_) return;
  const Pending& p = *pending_;
  const auto step_at = result.signs.first_step_at().value_or(Clock::now());
  const auto load_at = result.signs.started_at().value_or(step_at);
  const double load_s = seconds_between(p.relaunched, load_at), step_s = seconds_between(load_at, step_at);
  const double total = seconds_between(p.first_sign, step_at);
  say("attempt " + std::to_string(p.attempt) + " trains again: resumed at step " +
      std::to_string(result.signs.resumed_step()) + ", step " + std::to_string(result.signs.first_step()) + " done " +
      seconds_text(total) + " s after the fault's first sign (detect " + seconds_text(p.detect_s) + ", teardown " +
      seconds_text(p.teardown_s) + ", checks " + seconds_text(p.checks_s) + ", relaunch and load " + seconds_text(load_s) +
      ", first step " + seconds_text(step_s) + ")");
  std::string excluded;
  for (const std::string& e : p.excluded) {
    if (!excluded.empty()) excluded += ",";
    excluded += json_string(e);
  }
  record("{\"event\":\"restart\",\"attempt\":" + std::to_string(p.attempt) + ",\"status\":" + std::to_string(p.status) +
         ",\"fault\":" + json_string(p.fault) + ",\"fault_host\":" + json_string(p.host) + ",\"excluded\":[" + excluded +
         "],\"hosts\":" + json_string(p.hosts) + ",\"detect_s\":" + json_number(p.detect_s) +
         ",\"teardown_s\":" + json_number(p.teardown_s) + ",\"checks_s\":" + json_number(p.checks_s) +
         ",\"load_s\":" + json_number(load_s) + ",\"first_step_s\":" + json_number(step_s) +
         ",\"fault_to_step_s\":" + json_number(total) + ",\"resumed_step\":" + std::to_string(result.signs.resumed_step()) +
         ",\"first_step\":" + std::to_string(result.signs.first_step()) + "}");
  pending_.reset();
}

void Restarter::attempt_ended(const AttemptResult& result) {
  if (!pending_) return;
  record("{\"event\":\"restart\",\"attempt\":" + std::to_string(pending_->attempt) + ",\"status\":" +
         std::to_string(pending_->status) + ",\"fault\":" + json_string(pending_->fault) + ",\"fault_host\":" +
         json_string(pending_->host) + ",\"hosts\":" + json_string(pending_->hosts) +
         ",\"first_step\":null,\"ended_with\":" + std::to_string(result.status) + "}");
  pending_.reset();
}

}  // namespace brt::launch
