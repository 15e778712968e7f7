// Kernel launches in the strict emulator: every `kernel<<<grid, block, smem, stream>>>(args)`
// (rewritten by transform.py into emu::launch) is checked against an H200's (sm_90) limits
// before it is queued, and a launch that breaks one is not queued and leaves the error for
// cudaGetLastError, as the runtime does:
//   block: x, y <= 1024, z <= 64, x*y*z in [1, 1024] and <= the kernel's __launch_bounds__;
//   grid: x in [1, 2^31 - 1], y and z in [1, 65535];
//   dynamic shared memory <= 48 KiB, or <= the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize
//   (set by cudaFuncSetAttribute, itself at most 227 KiB).
#pragma once
#include <functional>
#include <map>
#include <string>

#include "emu_block.h"
#include "emu_stream.h"

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

namespace emu {

constexpr size_t kDynamicSharedDefault = size_t(48) << 10;
// Attributes by kernel key (the name as written at the launch, template arguments included,
// without spaces or namespace qualifiers: transform.py writes the same key at both places).
inline std::map<std::string, size_t>& max_dynamic_shared() { static std::map<std::string, size_t> m; return m; }
inline cudaError_t func_set_attribute(const char* key, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributePreferredSharedMemoryCarveout) return cudaSuccess;
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || size_t(value) > kSharedOptinLimit)
    return fail(cudaErrorInvalidValue, std::string("cudaFuncSetAttribute(") + key + ", " + std::to_string(int(attr)) + ", " +
                                           std::to_string(value) + "): beyond the 227 KiB opt-in limit");
  max_dynamic_shared()[key] = size_t(value);
  return cudaSuccess;
}

struct LaunchConfig { dim3 grid, block; size_t smem; cudaStream_t stream; };
inline dim3 as_dim3(dim3 d) { return d; }
template <typename I> dim3 as_dim3(I n) { return dim3(static_cast<unsigned>(n)); }
template <typename G, typename B>
LaunchConfig config(G grid, B blk, size_t smem = 0, cudaStream_t stream = nullptr) {
  return {as_dim3(grid), as_dim3(blk), smem, stream};
}

inline std::string dims(dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}
// The error a launch gets, or cudaSuccess.
inline cudaError_t check_launch(const LaunchConfig& c, const char* name, const char* key, long bounds) {
  const std::string who = std::string(name) + "<<<" + dims(c.grid) + ", " + dims(c.block) + ", " + std::to_string(c.smem) + ">>>";
  const uint64_t threads = uint64_t(c.block.x) * c.block.y * c.block.z;
  if (c.block.x == 0 || c.block.y == 0 || c.block.z == 0 || c.block.x > 1024 || c.block.y > 1024 || c.block.z > 64 ||
      threads > 1024)
    return fail(cudaErrorInvalidConfiguration, who + ": block outside 1..1024 threads (x, y <= 1024, z <= 64)");
  if (c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 || c.grid.x > 2147483647u || c.grid.y > 65535 || c.grid.z > 65535)
    return fail(cudaErrorInvalidConfiguration, who + ": grid outside x in [1, 2^31-1], y, z in [1, 65535]");
  if (bounds > 0 && threads > uint64_t(bounds))
    return fail(cudaErrorLaunchOutOfResources, who + ": more threads than the kernel's __launch_bounds__(" + std::to_string(bounds) + ")");
  auto attr = max_dynamic_shared().find(key);
  const size_t limit = attr == max_dynamic_shared().end() ? kDynamicSharedDefault : attr->second;
  if (c.smem > limit)
    return fail(cudaErrorInvalidValue, who + ": dynamic shared memory over " + std::to_string(limit) + " bytes" +
                                           (attr == max_dynamic_shared().end() ? " (48 KiB without cudaFuncAttributeMaxDynamicSharedMemorySize)" : ""));
  return cudaSuccess;
}
inline uint64_t& launch_serial() { static uint64_t n = 0; return n; }

// transform.py's rewrite of a launch. key: the kernel's attribute key; bounds: its
// __launch_bounds__ maximum (0: none).
inline void launch(const LaunchConfig& c, std::function<void()> body, const char* name, const char* key = "",
                   long bounds = 0) {
  if (const cudaError_t e = check_launch(c, name, key, bounds); e != cudaSuccess) return;
  const uint64_t serial = ++launch_serial();
  const cudaError_t e = enqueue(c.stream, NodeKind::kKernel, name, [c, body = std::move(body), name, serial] {
    run_grid(c.grid, c.block, c.smem, body, name, serial);
  });
  if (e != cudaSuccess) last_error() = e;
}

}  // namespace emu
