// Test-parameter names for model variants, shared by the suites that are parameterised by
// variant (tests/core/model, tests/core/bst, tests/core/dp, tests/core/tp).
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace brt::testing {

// "rec:fixed:skip" -> "rec_fixed_skip" (gtest names allow no ':').
inline std::string variant_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string n = info.param;
  for (auto& c : n)
    if (c == ':') c = '_';
  return n;
}

}  // namespace brt::testing
