// Bit-for-bit comparison of the per-tensor host copies two runs produced (device-residency
// tests: the GuardedBackend's results against the plain CPU backend's).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace brt::testing {

// a[i] and b[i] have equal sizes and bytes for every i; failures name `what` and i.
inline void expect_bit_identical(const std::vector<std::vector<float>>& a,
                                 const std::vector<std::vector<float>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].size(), b[i].size()) << what << " " << i;
    EXPECT_EQ(0, std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)))
        << what << " " << i << " differs";
  }
}

}  // namespace brt::testing
