#include "launch/preflight/host_memory.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace brt::launch {

namespace fs = std::filesystem;

namespace {

// cgroup v1 writes "no limit" as the largest page-aligned counter (9223372036854771712); any
// limit this large is none.
constexpr int64_t kNoLimitAbove = int64_t(1) << 60;

std::optional<std::string> read_small_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A byte count file ("12345\n"); nullopt when missing, unreadable or "max" (no limit).
std::optional<int64_t> read_bytes(const fs::path& path) {
  const auto text = read_small_file(path);
  if (!text || text->rfind("max", 0) == 0) return std::nullopt;
  long long value = 0;
  if (std::sscanf(text->c_str(), "%lld", &value) != 1) return std::nullopt;
  return int64_t(value);
}

struct Headroom {
  int64_t bytes = 0;
  std::string text;
};

// The tightest limit − usage from `mount`/`relative` up to `mount` itself. Under a cgroup
// namespace /proc/self/cgroup may name a path the mount does not show: then the mount's root
// is this process's cgroup.
std::optional<Headroom> cgroup_headroom(const fs::path& mount, const std::string& relative, const char* limit_name,
                                        const char* usage_name) {
  std::error_code ec;
  if (!fs::is_directory(mount, ec)) return std::nullopt;
  fs::path dir = (mount / fs::path(relative).relative_path()).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "mount/" for the root cgroup
  if (!fs::is_directory(dir, ec)) dir = mount;
  std::optional<Headroom> tightest;
  for (fs::path at = dir;; at = at.parent_path()) {
    const auto limit = read_bytes(at / limit_name);
    const auto usage = read_bytes(at / usage_name);
    if (limit && usage && *limit < kNoLimitAbove) {
      const int64_t room = std::max<int64_t>(0, *limit - *usage);
      if (!tightest || room < tightest->bytes) {
        const std::string name = "/" + fs::relative(at, mount, ec).string();
        tightest = Headroom{room, "cgroup " + (name == "/." ? std::string("/") : name) + " limit " + gib_text(*limit) +
                                      ", " + gib_text(*usage) + " in use"};
      }
    }
    if (at.string().size() <= mount.string().size() || at.parent_path() == at) break;
  }
  return tightest;
}

}  // namespace

std::string gib_text(int64_t bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(int64_t(1) << 30));
  return buf;
}

std::optional<int64_t> parse_meminfo_available(std::string_view meminfo) {
  const std::string_view key = "MemAvailable:";
  const size_t at = meminfo.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  long long kib = 0;
  if (std::sscanf(std::string(meminfo.substr(at + key.size(), 40)).c_str(), "%lld", &kib) != 1) return std::nullopt;
  return int64_t(kib) * 1024;
}

CgroupPaths parse_proc_cgroup(std::string_view text) {
  CgroupPaths paths;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find(':'), second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string id = line.substr(0, first), controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (id == "0" && controllers.empty()) paths.v2 = path;
    std::istringstream names(controllers);
    for (std::string name; std::getline(names, name, ',');)
      if (name == "memory") paths.v1_memory = path;
  }
  return paths;
}

MemoryBudget host_memory_budget(const fs::path& proc, const fs::path& cgroup_root) {
  MemoryBudget budget;
  if (const auto meminfo = read_small_file(proc / "meminfo"))
    if (const auto available = parse_meminfo_available(*meminfo)) {
      budget.bytes = *available;
      budget.source = "MemAvailable " + gib_text(*available);
    }
  const CgroupPaths paths = parse_proc_cgroup(read_small_file(proc / "self" / "cgroup").value_or(""));
  std::optional<Headroom> cgroup;
  std::error_code ec;
  if (!paths.v2.empty()) {
    // Unified hierarchy at the root, or beside the v1 controllers (hybrid: .../unified).
    const fs::path mount = fs::exists(cgroup_root / "cgroup.controllers", ec) ? cgroup_root : cgroup_root / "unified";
    cgroup = cgroup_headroom(mount, paths.v2, "memory.max", "memory.current");
  }
  if (!cgroup && !paths.v1_memory.empty())
    cgroup = cgroup_headroom(cgroup_root / "memory", paths.v1_memory, "memory.limit_in_bytes", "memory.usage_in_bytes");
  if (cgroup && (budget.bytes < 0 || cgroup->bytes < budget.bytes)) {
    budget.source = budget.bytes < 0 ? cgroup->text : cgroup->text + "; the host's " + budget.source;
    budget.bytes = cgroup->bytes;
  }
  return budget;
}

}  // namespace brt::launch
