#include "launch/preflight/doctor_cluster.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "data/shard_format.h"
#include "data/corpus/text.h"
#include "launch/run/placement.h"

namespace brt::launch {

namespace fs = std::filesystem;

namespace {

constexpr int kEntry = 512;

int world_rank(MPI_Comm world) {
  int r = 0;
  MPI_Comm_rank(world, &r);
  return r;
}

// Every rank's `mine` (cut to kEntry - 1 characters), in rank order, on every rank.
std::vector<std::string> all_gather_text(MPI_Comm world, const std::string& mine) {
  int size = 1;
  MPI_Comm_size(world, &size);
  std::vector<char> buf(kEntry, 0), all(size_t(size) * kEntry);
  std::memcpy(buf.data(), mine.data(), std::min<size_t>(mine.size(), kEntry - 1));
  MPI_Allgather(buf.data(), kEntry, MPI_CHAR, all.data(), kEntry, MPI_CHAR, world);
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r) out.emplace_back(&all[size_t(r) * kEntry]);
  return out;
}

std::string host_ranks(const HostGroup& h) {
  return h.host + (h.ranks.size() > 1 ? " (ranks " : " (rank ") + rank_ranges(h.ranks) + ")";
}

// The hosts whose ranks' `values` differ from world rank 0's, grouped by value: "h2 (rank 1): X".
std::vector<std::pair<std::string, std::string>> hosts_differing(const std::vector<HostGroup>& hosts,
                                                                 const std::vector<std::string>& values,
                                                                 const std::string& reference) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const HostGroup& h : hosts) {
    std::map<std::string, std::vector<int>> by_value;
    for (int r : h.ranks)
      if (values[size_t(r)] != reference) by_value[values[size_t(r)]].push_back(r);
    for (const auto& [value, ranks] : by_value) out.push_back({host_ranks({h.host, ranks}), value});
  }
  return out;
}

std::string first_line(std::string text) {
  if (const auto nl = text.find('\n'); nl != std::string::npos) text.resize(nl);
  return text;
}

// A blocking MPI call under the watchdog: a peer that stops answering ends the job with the
// usual report naming `what`.
template <typename F>
void guarded(parallel::JobMonitor& monitor, const std::string& what, F&& call) {
  parallel::JobMonitor::Guard guard = monitor.guard("doctor");
  guard.phase(what);
  call();
}

std::string error_text(int error) { return std::strerror(error); }

// "" when this rank can create `dir` and write a file into it; else the reason.
std::string writable_problem(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return ec.message();
  const fs::path probe = fs::path(dir) / (".brt-doctor-probe." + std::to_string(::getpid()));
  std::ofstream out(probe);
  out << "probe\n";
  out.close();
  const int error = out ? 0 : errno;
  fs::remove(probe, ec);
  return error == 0 ? "" : error_text(error);
}

}  // namespace

std::vector<std::string> gather_hosts(MPI_Comm world) {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return all_gather_text(world, name);
}

std::vector<HostGroup> group_by_host(const std::vector<std::string>& hosts) {
  std::vector<HostGroup> out;
  for (size_t r = 0; r < hosts.size(); ++r) {
    auto it = std::find_if(out.begin(), out.end(), [&](const HostGroup& g) { return g.host == hosts[r]; });
    if (it == out.end()) it = out.insert(out.end(), HostGroup{hosts[r], {}});
    it->ranks.push_back(int(r));
  }
  return out;
}

std::vector<std::string> check_same_software(MPI_Comm world, const std::vector<HostGroup>& hosts,
                                             const std::string& version) {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::string exe_sum = "unreadable";
  try {
    exe_sum = data::checksum_file("/proc/self/exe");
  } catch (const std::exception&) {
  }
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  const std::string brt = "brt-dist " + version + " (executable " + exe.string() + ", fnv1a-64 " +
                          exe_sum + ")";
  const std::vector<std::string> brts = all_gather_text(world, brt);
  const std::vector<std::string> mpis = all_gather_text(world, first_line(std::string(mpi, size_t(len))));
  std::vector<std::string> problems;
  if (world_rank(world) != 0) return problems;
  std::printf("software: %s; %s\n", brts[0].c_str(), mpis[0].c_str());
  for (const auto& [where, value] : hosts_differing(hosts, brts, brts[0]))
    problems.push_back("brt-dist differs on " + where + ": " + value + " — world rank 0 (host " + hosts[0].host +
                       ") runs " + brts[0] + "; install the same build on every host");
  for (const auto& [where, value] : hosts_differing(hosts, mpis, mpis[0]))
    problems.push_back("the MPI library differs on " + where + ": " + value + " (world rank 0: " + mpis[0] + ")");
  if (problems.empty()) std::printf("software: the same on all %zu host(s)\n", hosts.size());
  return problems;
}

namespace {

// World rank 0's probe folder in `dir` holding a random token: "probe\ttoken", or "\twhy" when
// it cannot be made.
std::string make_probe(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string token = std::to_string(std::random_device{}()) + std::to_string(::getpid());
  const std::string probe = ".brt-doctor-" + token;
  fs::create_directories(fs::path(dir) / probe, ec);
  std::ofstream out(fs::path(dir) / probe / "token");
  out << token;
  out.close();
  return out ? probe + "\t" + token : "\t" + (ec ? ec.message() : error_text(errno));
}

// This rank's view of the probe: the token must be there (the same directory), then its own file
// is written: "ok", or what is wrong.
std::string probe_status(const std::string& dir, const fs::path& folder, const std::string& token, int rank) {
  std::ifstream in(folder / "token");
  std::string seen;
  std::getline(in, seen);
  if (!in && seen.empty()) return fs::exists(dir) ? "a different directory" : "missing";
  if (seen != token) return "a different directory";
  std::ofstream mine(folder / ("rank-" + std::to_string(rank)));
  mine << rank << "\n";
  mine.close();
  return mine ? "ok" : "not writable: " + error_text(errno);
}

// World rank 0's problems from every rank's status.
std::vector<std::string> shared_directory_problems(const std::vector<HostGroup>& hosts,
                                                   const std::vector<std::string>& statuses, const std::string& dir,
                                                   const std::string& what) {
  std::vector<std::string> problems;
  for (const auto& [where, value] : hosts_differing(hosts, statuses, "ok")) {
    if (value == "missing" || value == "a different directory")
      problems.push_back(what + " " + dir + " is " + (value == "missing" ? "missing" : "not the same directory") +
                         " on " + where + ": world rank 0 (host " + hosts[0].host +
                         ") writes into another one. A node-local path loses the run: each host keeps only its "
                         "part of every checkpoint, and a restart on other hosts finds none. Use a directory on "
                         "the shared file system");
    else
      problems.push_back(what + " " + dir + " on " + where + ": " + value);
  }
  if (problems.empty())
    std::printf("%s %s: one writable directory, seen by all %zu host(s)\n", what.c_str(), dir.c_str(), hosts.size());
  return problems;
}

// The folders create_directories(dir) would make, deepest first: doctor checks that a location
// can be created, and removes what it made (it does not prepare the run's folders; train does).
std::vector<fs::path> missing_directories(const std::string& dir) {
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = fs::absolute(dir, ec); !ec && !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  return missing;
}

// Removes `created` deepest first, each only if empty (nothing another process put there).
void remove_created(const std::vector<fs::path>& created) {
  std::error_code ec;
  for (const fs::path& p : created) fs::remove(p, ec);
}

}  // namespace

std::vector<std::string> check_shared_directory(MPI_Comm world, const std::vector<HostGroup>& hosts,
                                                const std::string& dir, const std::string& what,
                                                parallel::JobMonitor& monitor) {
  const int rank = world_rank(world);
  const std::vector<fs::path> created = missing_directories(dir);
  // World rank 0 makes a probe folder holding a random token; its name and the token go to all.
  char shared[kEntry] = {};
  if (rank == 0) std::snprintf(shared, sizeof shared, "%s", make_probe(dir).c_str());
  guarded(monitor, what + ": sharing the probe", [&] { MPI_Bcast(shared, kEntry, MPI_CHAR, 0, world); });
  const std::string sent(shared), probe = sent.substr(0, sent.find('\t')), token = sent.substr(sent.find('\t') + 1);
  if (probe.empty()) {
    // Not even world rank 0 can write there: count the ranks that cannot either.
    std::vector<std::string> fails;
    guarded(monitor, what + ": comparing", [&] { fails = all_gather_text(world, writable_problem(dir)); });
    const auto bad = std::count_if(fails.begin(), fails.end(), [](const std::string& f) { return !f.empty(); });
    guarded(monitor, what + ": cleaning up", [&] { MPI_Barrier(world); });
    remove_created(created);
    if (rank != 0) return {};
    return {what + " " + dir + " is not writable on " + std::to_string(bad) + " rank(s) — world rank 0 (host " +
            hosts[0].host + "): " + token};
  }
  const fs::path folder = fs::path(dir) / probe;
  std::string status = probe_status(dir, folder, token, rank);
  std::vector<std::string> statuses;
  guarded(monitor, what + ": comparing", [&] { statuses = all_gather_text(world, status); });
  // Every rank that wrote must see every file written (a file system whose hosts see each
  // other's writes late, or not at all, splits a checkpoint just the same).
  const int written = int(std::count(statuses.begin(), statuses.end(), "ok"));
  if (status == "ok") {
    int seen = 0;
    std::error_code list_error;
    for (const auto& entry : fs::directory_iterator(folder, list_error))
      if (entry.path().filename().string().rfind("rank-", 0) == 0) ++seen;
    if (seen != written) status = "stale: shows " + std::to_string(seen) + " of the " + std::to_string(written) + " ranks' files";
  }
  guarded(monitor, what + ": comparing", [&] { statuses = all_gather_text(world, status); });
  std::error_code ec;
  fs::remove(folder / ("rank-" + std::to_string(rank)), ec);
  guarded(monitor, what + ": cleaning up", [&] { MPI_Barrier(world); });
  if (rank != 0) return {};
  fs::remove_all(folder, ec);
  remove_created(created);
  if (!created.empty())
    std::printf("%s %s does not exist yet: doctor created it to probe it and removed the %zu folder(s) it made "
                "(brt-dist train creates it)\n", what.c_str(), dir.c_str(), created.size());
  return shared_directory_problems(hosts, statuses, dir, what);
}

std::vector<std::string> check_same_contents(MPI_Comm world, const std::vector<HostGroup>& hosts,
                                             const std::string& dir, const std::string& what) {
  std::string mine = "missing";
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    std::vector<std::string> lines;
    uint64_t bytes = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
      if (!entry.is_regular_file(ec)) continue;
      const uint64_t n = entry.file_size(ec);
      bytes += n;
      lines.push_back(fs::relative(entry.path(), dir, ec).string() + "\t" + std::to_string(n));
    }
    std::sort(lines.begin(), lines.end());
    std::string listing;
    for (const auto& l : lines) listing += l + "\n";
    char text[128];
    std::snprintf(text, sizeof text, "%zu files, %.1f MB (listing fnv1a-64 %016llx)", lines.size(), double(bytes) / 1e6,
                  (unsigned long long)data::fnv1a64(listing.data(), listing.size()));
    mine = text;
  }
  const std::vector<std::string> all = all_gather_text(world, mine);
  std::vector<std::string> problems;
  if (world_rank(world) != 0) return problems;
  if (all[0] == "missing") problems.push_back(what + " " + dir + " does not exist on world rank 0 (host " + hosts[0].host + ")");
  for (const auto& [where, value] : hosts_differing(hosts, all, all[0]))
    problems.push_back(what + " " + dir + " differs on " + where + ": " + value + "; world rank 0 (host " +
                       hosts[0].host + ") has " + all[0]);
  if (problems.empty())
    std::printf("%s %s: the same %s on all %zu host(s)\n", what.c_str(), dir.c_str(), all[0].c_str(), hosts.size());
  return problems;
}

namespace {

constexpr int kLinkTag = 4711;
constexpr size_t kBlockBytes = size_t{1} << 20;

struct PairResult {
  double latency_us = 0, gbps = 0;
};

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Ping-pong with `peer`; the side that sends first (`first`) times it. Latency: the median of
// 20 round trips of 8 bytes, halved. Bandwidth: 1 MiB blocks, each acknowledged, for about
// 0.3 s (at least one, at most 16): a slow link is measured in one block, a fast one in many.
PairResult ping_pong(MPI_Comm world, int peer, bool first) {
  PairResult r;
  char small[8] = {};
  std::vector<double> rtts;
  for (int i = 0; i < 21; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (first) {
      MPI_Send(small, 8, MPI_CHAR, peer, kLinkTag, world);
      MPI_Recv(small, 8, MPI_CHAR, peer, kLinkTag, world, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(small, 8, MPI_CHAR, peer, kLinkTag, world, MPI_STATUS_IGNORE);
      MPI_Send(small, 8, MPI_CHAR, peer, kLinkTag, world);
    }
    if (i > 0) rtts.push_back(since(t0));  // the first one sets up the connection
  }
  std::sort(rtts.begin(), rtts.end());
  r.latency_us = rtts[rtts.size() / 2] / 2 * 1e6;
  std::vector<char> block(kBlockBytes, 1);
  double total = 0;
  int reps = 0;
  while (true) {
    int go = (reps < 16 && total < 0.3) ? 1 : 0;
    if (first)
      MPI_Send(&go, 1, MPI_INT, peer, kLinkTag, world);
    else
      MPI_Recv(&go, 1, MPI_INT, peer, kLinkTag, world, MPI_STATUS_IGNORE);
    if (!go) break;
    const auto t0 = std::chrono::steady_clock::now();
    if (first) {
      MPI_Send(block.data(), int(block.size()), MPI_CHAR, peer, kLinkTag, world);
      MPI_Recv(small, 1, MPI_CHAR, peer, kLinkTag, world, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(block.data(), int(block.size()), MPI_CHAR, peer, kLinkTag, world, MPI_STATUS_IGNORE);
      MPI_Send(small, 1, MPI_CHAR, peer, kLinkTag, world);
    }
    total += since(t0);
    ++reps;
  }
  r.gbps = first && total > 0 ? double(reps) * double(kBlockBytes) / total / 1e9 : 0;
  return r;
}

// Replaces the line setting `key` (or appends one) in a TOML text.
void set_toml_value(std::string& text, const std::string& key, const std::string& value, const std::string& note) {
  std::istringstream in(text);
  std::string line, out;
  bool done = false;
  while (std::getline(in, line)) {
    const size_t start = line.find_first_not_of(" \t");
    const bool match = start != std::string::npos && line.compare(start, key.size(), key) == 0 &&
                       line.find_first_not_of(" \t", start + key.size()) != std::string::npos &&
                       line[line.find_first_not_of(" \t", start + key.size())] == '=';
    if (match && !done) {
      out += key + " = " + value + "   # " + note + "\n";
      done = true;
    } else {
      out += line + "\n";
    }
  }
  if (!done) out += key + " = " + value + "   # " + note + "\n";
  text = out;
}

}  // namespace

std::vector<LinkMeasure> measure_host_links(MPI_Comm world, const std::vector<HostGroup>& hosts,
                                            parallel::JobMonitor& monitor) {
  const int rank = world_rank(world);
  std::vector<LinkMeasure> links;
  for (size_t i = 0; i < hosts.size(); ++i) {
    for (size_t j = i + 1; j < hosts.size(); ++j) {
      const int a = hosts[i].ranks[0], b = hosts[j].ranks[0];
      double result[2] = {0, 0};
      guarded(monitor, "measuring the link " + hosts[i].host + " <-> " + hosts[j].host, [&] {
        if (rank == a || rank == b) {
          const PairResult p = ping_pong(world, rank == a ? b : a, rank == a);
          result[0] = p.latency_us;
          result[1] = p.gbps;
        }
        MPI_Bcast(result, 2, MPI_DOUBLE, a, world);
      });
      links.push_back({hosts[i].host, hosts[j].host, result[0], result[1]});
      if (rank == 0)
        std::printf("link %s <-> %s: latency %.1f us, %.4g GB/s (world ranks %d <-> %d)\n", hosts[i].host.c_str(),
                    hosts[j].host.c_str(), result[0], result[1], a, b);
    }
  }
  return links;
}

std::string slow_links(const std::vector<LinkMeasure>& links, double ratio, double min_gbps) {
  if (links.empty()) return "";
  const auto fastest = *std::max_element(links.begin(), links.end(),
                                         [](const LinkMeasure& x, const LinkMeasure& y) { return x.gbps < y.gbps; });
  std::vector<LinkMeasure> slow;
  for (const LinkMeasure& l : links)
    if (l.gbps < fastest.gbps / ratio || (min_gbps > 0 && l.gbps < min_gbps)) slow.push_back(l);
  if (slow.empty()) return "";
  char buf[160];
  std::string text = "slow link" + std::string(slow.size() > 1 ? "s: " : ": ");
  for (size_t k = 0; k < slow.size(); ++k) {
    std::snprintf(buf, sizeof buf, "%s%s <-> %s %.4g GB/s", k ? ", " : "", slow[k].a.c_str(), slow[k].b.c_str(),
                  slow[k].gbps);
    text += buf;
  }
  std::snprintf(buf, sizeof buf, " (fastest pair %s <-> %s: %.4g GB/s; slow = below 1/%g of it%s)", fastest.a.c_str(),
                fastest.b.c_str(), fastest.gbps, ratio, min_gbps > 0 ? " or below --min-link-gbps" : "");
  text += buf;
  // A host in every slow pair is the likely culprit: its link, its NIC, its switch port.
  std::map<std::string, size_t> count;
  for (const LinkMeasure& l : slow) {
    ++count[l.a];
    ++count[l.b];
  }
  for (const auto& [host, n] : count)
    if (n == slow.size() && slow.size() > 1) text += "; every slow pair involves " + host + ": check its network link";
  return text;
}

std::string cluster_file_with_links(const std::string& existing, const std::vector<LinkMeasure>& links, int nodes,
                                    int ranks_per_node, double peak_gflops, double memory_gb) {
  double slowest = 0, latency = 0;
  for (const LinkMeasure& l : links) {
    if (slowest == 0 || l.gbps < slowest) slowest = l.gbps;
    latency = std::max(latency, l.latency_us);
  }
  char value[64];
  const std::string note = "measured by brt-dist doctor: the slowest of " + std::to_string(links.size()) +
                           " host pair(s), 1 MiB ping-pong";
  std::string text = existing;
  if (text.empty()) {
    char head[640];
    std::snprintf(head, sizeof head,
                  "# Written by `brt-dist doctor --cluster-file` for `brt-dist plan --cluster` (%d host(s), %d rank(s)\n"
                  "# per host). The network numbers are measured; the device numbers are this machine's CPU ranks:\n"
                  "# edit them for GPUs. intra_node_gbps is not measured.\n"
                  "gpus_per_node = %d\n"
                  "gpu_memory_gb = %.1f   # host memory per rank\n"
                  "peak_gflops = %.1f     # world rank 0's sgemm peak\n"
                  "intra_node_gbps = 10\n",
                  nodes, ranks_per_node, ranks_per_node, memory_gb, peak_gflops);
    text = head;
  }
  std::snprintf(value, sizeof value, "%d", nodes);
  set_toml_value(text, "nodes", value, "hosts seen by brt-dist doctor");
  std::snprintf(value, sizeof value, "%.6g", slowest);
  set_toml_value(text, "inter_node_gbps", value, note);
  std::snprintf(value, sizeof value, "%.4g", latency);
  set_toml_value(text, "alpha_us", value, "measured by brt-dist doctor: the largest host-pair latency");
  return text;
}

}  // namespace brt::launch
