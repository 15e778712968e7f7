// One schema: the size ladder composes a size with a form, and every config
// name resolves to exactly the config it resolved to when the 60 ladder files were hand-copied
// (tests/launch/config/resolved_configs.txt); `base =` takes a list; `config keys --json` publishes
// the bounds and words that the key table enforces. Runs in the source tree (configs/ by name).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "launch/config/config.h"
#include "launch/config/config_keys.h"
#include "tests/launch/config/config_test_util.h"

namespace brt::launch {
namespace {

namespace fs = std::filesystem;
const fs::path kSource = BRT_SOURCE_DIR;

using KeyValues = std::map<std::string, std::string>;  // "section.key" -> value as TOML writes it

// tests/launch/config/resolved_configs.txt: [*] (every key, in table order), then [NAME] blocks of
// the keys where NAME differs from [*].
struct Record {
  std::vector<std::pair<std::string, std::string>> common;
  std::vector<std::string> names;
  std::map<std::string, KeyValues> differences;
};

Record read_record(const fs::path& path) {
  std::ifstream in(path);
  Record record;
  std::string line, block;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      block = line.substr(1, line.size() - 2);
      if (block != "*") record.names.push_back(block);
      continue;
    }
    const auto eq = line.find(" = ");
    const std::string key = line.substr(0, eq), value = line.substr(eq + 3);
    if (block == "*") record.common.emplace_back(key, value);
    else record.differences[block][key] = value;
  }
  return record;
}

// Every key's resolved value as `config show` writes it.
KeyValues resolved_values(const RunConfig& config) {
  KeyValues out;
  for (const auto& spec : config_keys()) out[spec.key] = value_text(spec.get(config));
  return out;
}

TEST(ResolvedConfigs, EveryRecordedNameResolvesAsRecorded) {
  ASSERT_EQ(fs::current_path(), fs::canonical(kSource)) << "runs in the source tree, as brt-dist does";
  const Record record = read_record(kSource / "tests/launch/config/resolved_configs.txt");
  ASSERT_EQ(record.common.size(), 75u);
  std::map<std::string, bool> recorded_keys;
  for (const auto& [key, value] : record.common) recorded_keys[key] = true;
  int identical = 0;
  for (const std::string& name : record.names) {
    // By name, as `brt-dist train 1.3b-bst-sh-s4d` finds configs/1.3b-bst-sh-s4d.toml.
    const RunConfig config = load_run_config(resolve_config_path(name));
    const KeyValues actual = resolved_values(config);
    const KeyValues& differs = record.differences.count(name) ? record.differences.at(name) : KeyValues{};
    bool same = true;
    for (const auto& [key, common_value] : record.common) {
      const std::string expected = differs.count(key) ? differs.at(key) : common_value;
      const auto it = actual.find(key);
      if (it == actual.end()) {
        ADD_FAILURE() << name << ": " << key << " was recorded but is no longer a key";
        same = false;
      } else if (it->second != expected) {
        ADD_FAILURE() << name << ": " << key << " = " << it->second << ", recorded " << expected;
        same = false;
      }
    }
    identical += same;
  }
  for (const auto& spec : config_keys())
    if (!recorded_keys.count(spec.key))
      std::printf("note: %s was added after the record: not compared\n", spec.key.c_str());
  std::printf("%d of %zu recorded configs resolve byte-identically\n", identical, record.names.size());
  EXPECT_EQ(record.names.size(), 63u);  // the 60 ladder files, tiny, bench-small, ladder-base
  EXPECT_EQ(identical, 63);
}

// configs/<size>-<form>.toml is `base = ["<size>.toml", "forms/<form>.toml"]` and nothing else:
// the ladder is composed, never copied again.
TEST(ResolvedConfigs, LadderFilesComposeASizeAndAForm) {
  std::vector<std::string> forms;
  for (const auto& e : fs::directory_iterator(kSource / "configs/forms")) forms.push_back(e.path().stem().string());
  ASSERT_EQ(forms.size(), 9u);  // 24L, slide, slide-13L, xl, 5 BST forms
  int composed = 0;
  for (const auto& e : fs::directory_iterator(kSource / "configs")) {
    const std::string stem = e.path().stem().string();
    std::string form;
    for (const auto& f : forms)
      if (stem.size() > f.size() + 1 && stem.ends_with("-" + f) && f.size() > form.size()) form = f;
    if (form.empty() || e.path().extension() != ".toml") continue;
    const std::string size = stem.substr(0, stem.size() - form.size() - 1);
    ASSERT_TRUE(fs::exists(kSource / "configs" / (size + ".toml"))) << stem;
    const toml::table table = toml::parse_file(e.path().string());
    EXPECT_EQ(table.size(), 1u) << stem << ": only the composition, no keys of its own";
    const toml::array* base = table["base"].as_array();
    ASSERT_NE(base, nullptr) << stem;
    ASSERT_EQ(base->size(), 2u) << stem;
    EXPECT_EQ(base->get(0)->value<std::string>(), size + ".toml") << stem;
    EXPECT_EQ(base->get(1)->value<std::string>(), "forms/" + form + ".toml") << stem;
    ++composed;
  }
  EXPECT_EQ(composed, 54);  // 6 sizes x 9 forms
}

struct TempDir : testing::ConfigScratchDir {
  TempDir() : ConfigScratchDir("brt-config-schema-test-") {}
};

std::string error_of(const std::string& path) {
  try {
    load_run_config(path);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ConfigBases, AListIsAppliedInOrderThenTheFilesOwnKeys) {
  TempDir dir;
  dir.write("common.toml", "[model]\nlayers = 6\nd_model = 64\n[optim]\nwarmup = 3\n");
  dir.write("size.toml", "base = \"common.toml\"\n[model]\nd_model = 96\n[optim]\nlr = 0.5\n");
  dir.write("forms/form.toml", "base = \"../common.toml\"\n[model]\nvariant = \"slide\"\nd_model = 128\n");
  const std::string leaf = dir.write("leaf.toml", "base = [\"size.toml\", \"forms/form.toml\"]\n[optim]\nlr = 0.25\n");
  ConfigSources sources;
  const RunConfig c = load_run_config(leaf, {}, &sources);  // common.toml twice is no loop
  EXPECT_EQ(c.model.layers, 6);
  EXPECT_EQ(c.model.d_model, 128);  // the later base wins over the earlier
  EXPECT_EQ(c.model.variant, "slide");
  EXPECT_EQ(c.optim.warmup, 3);
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.25);  // the file's own keys over every base
  EXPECT_NE(sources.at("model.d_model").find("form.toml"), std::string::npos);
  EXPECT_NE(error_of(dir.write("e.toml", "base = []\n")).find("base: expected a file name string or a list of them"),
            std::string::npos);
  EXPECT_NE(error_of(dir.write("n.toml", "base = [\"size.toml\", 3]\n")).find("n.toml:1: base: expected"),
            std::string::npos);
  EXPECT_NE(error_of(dir.write("m.toml", "base = [\"size.toml\", \"gone.toml\"]\n")).find("base: no such file"),
            std::string::npos);
  dir.write("x.toml", "base = [\"size.toml\", \"y.toml\"]\n");
  EXPECT_NE(error_of(dir.write("y.toml", "base = [\"x.toml\"]\n")).find("inheritance loop"), std::string::npos);
}

// A value a key's set() must accept (`ok`) or refuse.
void expect_set(const KeySpec& spec, const ConfigValue& value, bool ok) {
  RunConfig c;
  if (ok) EXPECT_NO_THROW(spec.set(c, value)) << spec.key << " = " << value_text(value);
  else EXPECT_THROW(spec.set(c, value), std::invalid_argument) << spec.key << " = " << value_text(value);
}

// A JSON value read as the schema's `type` says: what the Python side does with it.
ConfigValue from_json(const nlohmann::json& v, const std::string& type) {
  if (type == "int") return v.get<int64_t>();
  if (type == "float") return v.get<double>();
  if (type == "string") return v.get<std::string>();
  if (type == "bool") return v.get<bool>();
  EXPECT_EQ(type, "int_list");
  return v.get<std::vector<int64_t>>();
}

// The published bounds and words are the ones set() enforces, and the defaults a RunConfig's.
TEST(ConfigKeysJson, PublishesEveryKeyWithTheBoundsItEnforces) {
  const auto json = nlohmann::json::parse(config_keys_json());
  const auto& keys = json.at("keys");
  ASSERT_EQ(keys.size(), config_keys().size());
  const RunConfig defaults;
  for (size_t i = 0; i < keys.size(); ++i) {
    const auto& k = keys[i];
    const KeySpec& spec = config_keys()[i];
    EXPECT_EQ(k.at("key"), spec.key);
    EXPECT_EQ(k.at("section").get<std::string>() + "." + k.at("name").get<std::string>(), spec.key);
    EXPECT_EQ(k.at("help"), spec.help);
    const std::string type = k.at("type");
    EXPECT_EQ(from_json(k.at("default"), type), spec.get(defaults)) << spec.key;
    if (k.contains("min") && type == "int") {
      const int64_t lo = k.at("min");
      expect_set(spec, ConfigValue(lo), true);
      if (lo > std::numeric_limits<int64_t>::min()) expect_set(spec, ConfigValue(lo - 1), false);
    }
    if (k.contains("max") && type == "int") {
      const int64_t hi = k.at("max");
      expect_set(spec, ConfigValue(hi), true);
      if (hi < std::numeric_limits<int64_t>::max()) expect_set(spec, ConfigValue(hi + 1), false);
    }
    if (type == "int_list") {
      expect_set(spec, ConfigValue(std::vector<int64_t>{k.at("min").get<int64_t>()}), true);
      expect_set(spec, ConfigValue(std::vector<int64_t>{k.at("min").get<int64_t>() - 1}), false);
      expect_set(spec, ConfigValue(std::vector<int64_t>{k.at("max").get<int64_t>() + 1}), false);
    }
    if (type == "float") {
      const double lo = k.contains("min") ? k.at("min").get<double>() : -std::numeric_limits<double>::max();
      expect_set(spec, ConfigValue(lo), true);
      if (k.contains("min")) expect_set(spec, ConfigValue(std::nextafter(lo, -INFINITY)), false);
    }
    if (type == "string" && k.contains("allowed") && spec.key != "model.variant") {
      for (const std::string word : k.at("allowed")) expect_set(spec, ConfigValue(word), true);
      expect_set(spec, ConfigValue(std::string("no-such-word")), false);
    }
  }
}

// model.variant's words are exactly what ModelConfig::resolve() accepts.
TEST(ConfigKeysJson, EveryPublishedVariantResolves) {
  const auto json = nlohmann::json::parse(config_keys_json());
  std::vector<std::string> variants;
  for (const auto& k : json.at("keys"))
    if (k.at("key") == "model.variant") variants = k.at("allowed").get<std::vector<std::string>>();
  EXPECT_EQ(variants.size(), 16u);  // slide, xl, rec:* x 4, feedback:* x 4, bst:* x 6
  for (const auto& variant : variants) {
    core::ModelConfig m;
    m.variant = variant;
    if (variant == "xl") m.window = m.seq_len;
    EXPECT_NO_THROW(m.resolve()) << variant;
  }
  core::ModelConfig m;
  m.variant = "rec:fixed";
  EXPECT_THROW(m.resolve(), std::invalid_argument);
}

}  // namespace
}  // namespace brt::launch
