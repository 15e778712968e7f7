// The table of every configuration key: its dotted name, type, help text and how to read and
// write it in a RunConfig. Adding a key to a run is one line in config_keys.cpp (and refreshing
// python/brt_dist/config_keys.json, which ctest's config_keys_json_current checks).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "launch/config/config.h"

namespace brt::launch {

enum class ValueType { kInt, kFloat, kString, kBool, kIntList };
using ConfigValue = std::variant<int64_t, double, std::string, bool, std::vector<int64_t>>;

struct KeySpec {
  std::string key;   // "section.name"
  ValueType type;
  std::string help;
  std::function<ConfigValue(const RunConfig&)> get;
  // Stores a value of the right type; throws std::invalid_argument (message without the key)
  // when it is out of range or not one of the allowed words.
  std::function<void(RunConfig&, const ConfigValue&)> set;
  // What set() accepts, as `config keys --json` publishes it (set() is what enforces it): an
  // integer's or number's bounds (for kIntList, each element's), and a string's allowed words
  // (empty: any text; model.variant's are checked by ModelConfig::resolve()).
  std::optional<ConfigValue> min = std::nullopt, max = std::nullopt;
  std::vector<std::string> allowed = {};
};

const std::vector<KeySpec>& config_keys();
// nullptr when unknown.
const KeySpec* find_key(const std::string& key);
const char* type_name(ValueType type);
// A value as TOML writes it ("512", "1e-3", "\"cosine\"", "[9, 19]").
std::string value_text(const ConfigValue& value);
// Every key as JSON (`brt-dist config keys --json`), the schema python/brt_dist and bench/peer
// read (python/brt_dist/config_keys.json is a checked copy): per key its name, section, type,
// default (a RunConfig's built-in value, before resolve()), bounds or allowed words, and help.
std::string config_keys_json();

}  // namespace brt::launch
