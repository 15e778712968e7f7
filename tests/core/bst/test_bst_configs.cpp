// Every shipped BST ladder config (configs/<size>-bst-<variant>.toml) loads, resolves to a BST
// model, and its §9 parameter shapes (the planner's list, which tests/launch/plan checks against the
// real allocation) add up to core/param_count.cpp's count — the count `brt-dist train` prints.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/param_count.h"
#include "launch/config/config.h"
#include "launch/plan/planner.h"

namespace brt::testing {
namespace {

TEST(BstConfigs, LadderConfigsCountTheSection9Shapes) {
  namespace fs = std::filesystem;
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator("configs"))
    if (entry.path().filename().string().find("-bst-") != std::string::npos) paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  int files = 0;
  for (const auto& path : paths) {
    const std::string name = path.filename().string();
    ++files;
    launch::RunConfig run = launch::load_run_config(path.string());
    core::ModelConfig cfg = run.model;
    cfg.resolve();
    EXPECT_EQ(cfg.family, core::ModelFamily::kBST) << name;
    EXPECT_EQ(cfg.bst_layers, (std::vector<int>{0, 9})) << name;
    int64_t total = 0;
    for (const auto& shape : launch::model_param_shapes(cfg)) {
      int64_t n = 1;
      for (auto d : shape) n *= d;
      total += n;
    }
    EXPECT_EQ(total, core::count_parameters(cfg)) << name;
    std::printf("%-34s %s: %.2fM non-embedding, %.2fM in all\n", name.c_str(), cfg.variant.c_str(),
                core::count_non_embedding_parameters(cfg) / 1e6, total / 1e6);
  }
  EXPECT_EQ(files, 30);  // 6 sizes x 5 variants
}

}  // namespace
}  // namespace brt::testing
