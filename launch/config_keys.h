// The table of every configuration key: its dotted name, type, help text and how to read and
// write it in a RunConfig. Adding a key to a run is one line in config_keys.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "launch/config.h"

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
};

const std::vector<KeySpec>& config_keys();
// nullptr when unknown.
const KeySpec* find_key(const std::string& key);
const char* type_name(ValueType type);
// A value as TOML writes it ("512", "1e-3", "\"cosine\"", "[9, 19]").
std::string value_text(const ConfigValue& value);

}  // namespace brt::launch
