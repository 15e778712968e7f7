// kernels/meta_memory.h: allocations are counted (live and peak), never backed; the pointers are
// distinct, 64-byte aligned and outside the mapped address space; copies to it are dropped and
// reading from it throws, naming the memory.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>

#include "kernels/meta_memory.h"

namespace brt::kernels {
namespace {

TEST(MetaMemory, CountsLiveAndPeakBytesWithoutBackingThem) {
  MetaMemory meta;
  EXPECT_FALSE(meta.host_accessible());
  // 1 TB would fail on any host memory of this machine: meta memory only counts it.
  const std::size_t tera = std::size_t{1} << 40;
  void* big = meta.allocate(tera, "a terabyte");
  void* small = meta.allocate(100, "a hundred bytes");
  void* empty = meta.allocate(0, "nothing");
  EXPECT_EQ(meta.live_bytes(), int64_t(tera) + 100);
  std::set<std::uintptr_t> addresses;
  for (void* p : {big, small, empty}) {
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    EXPECT_EQ(a % 64, 0u);
    EXPECT_GE(a, std::uintptr_t{1} << 62) << "a meta pointer must lie outside mapped memory";
    addresses.insert(a);
  }
  EXPECT_EQ(addresses.size(), 3u) << "every allocation gets its own address";
  meta.release(big);
  EXPECT_EQ(meta.live_bytes(), 100);
  EXPECT_EQ(meta.peak_bytes(), int64_t(tera) + 100);
  meta.release(big);  // a second release of the same pointer changes nothing
  meta.release(small);
  meta.release(empty);
  EXPECT_EQ(meta.live_bytes(), 0);
}

TEST(MetaMemory, DropsWritesAndRefusesReads) {
  MetaMemory meta;
  void* p = meta.allocate(64, "values");
  const char host[64] = {1};
  meta.from_host(p, host, sizeof host);  // a constructor staging initial values: dropped
  meta.fill_zero(p, 64);
  meta.copy(p, p, 64);
  char back[64];
  try {
    meta.to_host(back, p, sizeof back);
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("meta memory holds no values"), std::string::npos) << e.what();
  }
  meta.release(p);
}

}  // namespace
}  // namespace brt::kernels
