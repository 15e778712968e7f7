// Test-parameter names for model variants, shared by the suites that are parameterised by
// variant (tests/model, tests/bst, tests/dp, tests/tp).
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
