// Memory::to_host_batch's staging (kernels/memory.h copy_through_staging): copies of every size
// (empty, smaller than the buffer, split across buffer-fulls, larger than the whole buffer) all
// arrive whole, with one wait per buffer-full and none for an empty batch.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/memory.h"

namespace brt::kernels {
namespace {

TEST(MemoryStaging, EveryCopyArrivesWithOneWaitPerBufferFull) {
  const std::vector<std::size_t> sizes = {0, 30, 250, 70, 1, 100, 99};
  std::vector<std::vector<char>> src, dst;
  std::vector<HostCopy> copies;
  char value = 1;
  for (std::size_t n : sizes) {
    src.emplace_back(n);
    for (char& c : src.back()) c = value++;
    dst.emplace_back(n, 0);
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) copies.push_back({dst[i].data(), src[i].data(), sizes[i]});
  std::vector<char> staging(100, 0);
  int enqueued_bytes = 0, pending = 0;
  const int waits = copy_through_staging(
      copies, staging.data(), staging.size(),
      [&](void* to, const void* from, std::size_t bytes) {
        EXPECT_LE(static_cast<char*>(to) + bytes, staging.data() + staging.size());
        std::memcpy(to, from, bytes);  // as an asynchronous copy would, before the wait
        enqueued_bytes += int(bytes);
        pending += int(bytes);
      },
      [&] { pending = 0; });
  const std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  EXPECT_EQ(enqueued_bytes, int(total));
  EXPECT_EQ(pending, 0);
  EXPECT_EQ(waits, int((total + staging.size() - 1) / staging.size()));  // 550 bytes: 6
  for (std::size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(dst[i], src[i]) << "copy " << i;
  EXPECT_EQ(copy_through_staging({}, staging.data(), staging.size(), [](void*, const void*, std::size_t) {},
                                 [] { ADD_FAILURE() << "waited for nothing"; }),
            0);
}

TEST(MemoryStaging, HostMemoryBatchCopies) {
  std::vector<float> a = {1, 2, 3}, b = {4, 5};
  std::vector<float> ra(3), rb(2);
  host_memory().to_host_batch({{ra.data(), a.data(), 12}, {rb.data(), b.data(), 8}});
  EXPECT_EQ(ra, a);
  EXPECT_EQ(rb, b);
}

}  // namespace
}  // namespace brt::kernels
