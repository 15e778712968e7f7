// The memory this process may still take on its host (the preflight's memory
// check; docs/reliability.md "Preflight"): the smaller of the kernel's estimate of what can be
// allocated without swapping (MemAvailable in /proc/meminfo) and the headroom of the process's
// memory cgroup — Slurm, systemd and containers limit a job there, and the kernel's OOM killer
// acts on that limit, not on the host's free memory:
//   cgroup v2: memory.max − memory.current of the process's cgroup and of every ancestor up to
//              the mount (a job's limit often sits on a parent: the job above its steps);
//   cgroup v1: memory.limit_in_bytes − memory.usage_in_bytes of the memory controller's cgroup
//              and its ancestors (a limit of ~2^63 means none).
// Read from files only (no allocation, no MPI); the roots are parameters so tests can give a
// fake /proc and /sys/fs/cgroup.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace brt::launch {

struct MemoryBudget {
  int64_t bytes = -1;  // what may still be allocated; -1: unknown (nothing readable)
  std::string source;  // how it was found, for messages: "MemAvailable 21.4 GiB", "cgroup ..."
};

// MemAvailable of /proc/meminfo text, in bytes.
std::optional<int64_t> parse_meminfo_available(std::string_view meminfo);

// The process's cgroup paths from /proc/self/cgroup text: the v2 path ("0::/path") and the v1
// memory controller's ("N:...memory...:/path"); empty when absent.
struct CgroupPaths {
  std::string v2, v1_memory;
};
CgroupPaths parse_proc_cgroup(std::string_view text);

// The budget from `proc` (/proc) and `cgroup_root` (/sys/fs/cgroup).
MemoryBudget host_memory_budget(const std::filesystem::path& proc = "/proc",
                                const std::filesystem::path& cgroup_root = "/sys/fs/cgroup");

// "21.36 GiB".
std::string gib_text(int64_t bytes);

}  // namespace brt::launch
