#include "launch/config/config.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <toml++/toml.h>

#include "launch/config/config_keys.h"

namespace brt::launch {
namespace {

namespace fs = std::filesystem;
const char* const kCommandLine = "command line";

// Control characters a value may hold (TOML's "\u0000" escapes) shown as \u0000, so a message
// printed as a C string is never cut short at a NUL or garbled by an escape sequence.
std::string printable(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "\\u%04x", unsigned(c));
      out += code;
    } else {
      out += char(c);
    }
  }
  return out;
}

std::string join_message(const std::string& source, const std::string& key, const std::string& what) {
  std::string m;
  if (!source.empty()) m += source + ": ";
  if (!key.empty()) m += key + ": ";
  return printable(m + what);
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string last_part(const std::string& key) {
  const auto dot = key.rfind('.');
  return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::string unknown_key_message(const std::string& key) {
  std::string best;
  size_t best_distance = 4;  // suggest only near misses
  for (const auto& spec : config_keys()) {
    size_t d = edit_distance(key, spec.key);
    if (last_part(key) == last_part(spec.key)) d = std::min<size_t>(d, 1);  // right name, wrong section
    if (d < best_distance) {
      best_distance = d;
      best = spec.key;
    }
  }
  return "unknown key" + (best.empty() ? std::string() : " (did you mean " + best + "?)");
}

std::string located(const std::string& source, const toml::source_region& where) {
  return where.begin.line ? source + ":" + std::to_string(where.begin.line) : source;
}

std::string describe(const toml::node& node) {
  std::ostringstream out;
  out << node.type();
  if (node.is_value()) {
    out << " ";
    node.visit([&](const auto& v) { out << v; });
  }
  return out.str();
}

// The node's value as `type`, or nullopt when it has another type. Integers are accepted
// where numbers are expected.
std::optional<ConfigValue> convert(const toml::node& node, ValueType type) {
  switch (type) {
    case ValueType::kInt:
      if (node.is_integer()) return ConfigValue(node.as_integer()->get());
      break;
    case ValueType::kFloat:
      if (node.is_floating_point()) return ConfigValue(node.as_floating_point()->get());
      if (node.is_integer()) return ConfigValue(static_cast<double>(node.as_integer()->get()));
      break;
    case ValueType::kString:
      if (node.is_string()) return ConfigValue(node.as_string()->get());
      break;
    case ValueType::kBool:
      if (node.is_boolean()) return ConfigValue(node.as_boolean()->get());
      break;
    case ValueType::kIntList:
      if (const toml::array* a = node.as_array()) {
        std::vector<int64_t> out;
        for (const toml::node& e : *a) {
          if (!e.is_integer()) return std::nullopt;
          out.push_back(e.as_integer()->get());
        }
        return ConfigValue(std::move(out));
      }
      break;
  }
  return std::nullopt;
}

void set_value(RunConfig& config, const KeySpec& spec, const toml::node& node, const std::string& where,
               ConfigSources* sources, const std::string& source) {
  const auto value = convert(node, spec.type);
  if (!value)
    throw ConfigError(where, spec.key, std::string("expected ") + type_name(spec.type) + ", got " + describe(node));
  // A control character (TOML's \u0000 escapes) is never part of a name, path or choice; refused
  // here, before a message built from the value as a C string is cut short at a NUL.
  if (const std::string* text = std::get_if<std::string>(&*value))
    for (const unsigned char c : *text)
      if ((c < 0x20 && c != '\t') || c == 0x7f) {
        char code[8];
        std::snprintf(code, sizeof code, "U+%04X", unsigned(c));
        throw ConfigError(where, spec.key, "the value \"" + *text + "\" holds a control character (" + code +
                                               "); config strings hold printable text only");
      }
  try {
    spec.set(config, *value);
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    if (what.rfind(spec.key + ": ", 0) == 0) what = what.substr(spec.key.size() + 2);  // named below
    throw ConfigError(where, spec.key, what);
  }
  if (sources) (*sources)[spec.key] = source;
}

void apply_table(RunConfig& config, const toml::table& table, const std::string& prefix, const std::string& source,
                 ConfigSources* sources) {
  for (auto&& [name, node] : table) {
    const std::string key = prefix + std::string(name.str());
    if (prefix.empty() && key == "base") continue;  // handled by the caller
    if (const toml::table* sub = node.as_table()) {
      apply_table(config, *sub, key + ".", source, sources);
      continue;
    }
    const std::string where = located(source, node.source());
    const KeySpec* spec = find_key(key);
    if (!spec) throw ConfigError(where, key, unknown_key_message(key));
    set_value(config, *spec, node, where, sources, source);
  }
}

toml::table parse_toml(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw ConfigError(located(source, e.source()), "", std::string("invalid TOML: ") + std::string(e.description()));
  }
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw ConfigError(path, "", "no such config file");
  if (!fs::is_regular_file(path, ec))
    throw ConfigError(path, "", fs::is_directory(path, ec) ? "is a directory, not a config file (give a .toml file)"
                                                           : "is not a regular file (give a .toml file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "", "cannot open the config file");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void apply_text(RunConfig& config, std::string_view text, const std::string& source, const std::string& base_dir,
                ConfigSources* sources, std::vector<std::string>& chain);

// `base = "a.toml"` or `base = ["size.toml", "forms/form.toml"]` (applied in order, each with
// its own bases, then this file's keys): the ladder composes a size with a form this way
// instead of copying either. Each node is a string.
std::vector<const toml::node*> base_nodes(const toml::table& table, const std::string& source) {
  const toml::node* base = table.get("base");
  if (!base) return {};
  auto bad = [&](const toml::node& node) {
    return ConfigError(located(source, node.source()), "base",
                       "expected a file name string or a list of them, got " + describe(node));
  };
  if (base->is_string()) return {base};
  const toml::array* list = base->as_array();
  if (!list || list->empty()) throw bad(*base);
  std::vector<const toml::node*> nodes;
  for (const toml::node& element : *list) {
    if (!element.is_string()) throw bad(element);
    nodes.push_back(&element);
  }
  return nodes;
}

void apply_file(RunConfig& config, const std::string& path, ConfigSources* sources, std::vector<std::string>& chain) {
  const std::string canonical = fs::weakly_canonical(path).string();
  if (std::find(chain.begin(), chain.end(), canonical) != chain.end())
    throw ConfigError(path, "base", "inheritance loop: " + path + " is its own base");
  chain.push_back(canonical);
  const std::string text = read_file(path);
  // An empty file (or only comments) would silently train the built-in defaults: refuse it.
  if (parse_toml(text, path).empty())
    throw ConfigError(path, "", "the config file sets no keys (it is empty); give a model config such as "
                                "configs/tiny.toml, or base = \"tiny.toml\" and the keys to change");
  apply_text(config, text, path, fs::path(path).parent_path().string(), sources, chain);
  chain.pop_back();
}

void apply_text(RunConfig& config, std::string_view text, const std::string& source, const std::string& base_dir,
                ConfigSources* sources, std::vector<std::string>& chain) {
  const toml::table table = parse_toml(text, source);
  for (const toml::node* base : base_nodes(table, source)) {
    const fs::path base_path = fs::path(base_dir.empty() ? "." : base_dir) / base->as_string()->get();
    if (!fs::exists(base_path))
      throw ConfigError(located(source, base->source()), "base", "no such file " + base_path.string());
    apply_file(config, base_path.lexically_normal().string(), sources, chain);
  }
  apply_table(config, table, "", source, sources);
}

void append_float(std::string& out, double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest text that reads back exactly
  std::string s(buf, res.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // keep it a TOML float
  out += s;
}

void append_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  out += '"';
}

void append_value(std::string& out, const ConfigValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) out += std::to_string(*i);
  else if (const auto* d = std::get_if<double>(&v)) append_float(out, *d);
  else if (const auto* s = std::get_if<std::string>(&v)) append_string(out, *s);
  else if (const auto* b = std::get_if<bool>(&v)) out += *b ? "true" : "false";
  else {
    const auto& list = std::get<std::vector<int64_t>>(v);
    out += '[';
    for (size_t k = 0; k < list.size(); ++k) out += (k ? ", " : "") + std::to_string(list[k]);
    out += ']';
  }
}

}  // namespace

ConfigError::ConfigError(const std::string& source, const std::string& key, const std::string& what)
    : std::runtime_error(join_message(source, key, what)), source_(source), key_(key) {}

void apply_toml_file(RunConfig& config, const std::string& path, ConfigSources* sources) {
  std::vector<std::string> chain;
  apply_file(config, path, sources, chain);
}

void apply_toml_text(RunConfig& config, std::string_view toml_text, const std::string& source_name,
                     const std::string& base_dir, ConfigSources* sources) {
  std::vector<std::string> chain;
  apply_text(config, toml_text, source_name, base_dir, sources, chain);
}

void apply_override(RunConfig& config, const std::string& assignment, ConfigSources* sources) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(kCommandLine, "", "\"" + assignment + "\" is not key=value (e.g. optim.lr=0.01)");
  auto trim = [](std::string s) {
    const auto b = s.find_first_not_of(" \t");
    const auto e = s.find_last_not_of(" \t");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  const std::string key = trim(assignment.substr(0, eq));
  std::string value = trim(assignment.substr(eq + 1));
  const KeySpec* spec = find_key(key);
  if (!spec) throw ConfigError(kCommandLine, key, unknown_key_message(key));
  if (spec->type == ValueType::kString) {
    // Plain text; quotes are optional.
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front())
      value = value.substr(1, value.size() - 2);
    toml::value<std::string> node(value);
    set_value(config, *spec, node, kCommandLine, sources, kCommandLine);
    return;
  }
  // Other types are read with the TOML grammar, so "1e-3", "true" and "[9, 19]" mean what they
  // mean in a file; a list may also be written without brackets ("9,19").
  const std::string toml_value =
      spec->type == ValueType::kIntList && value.find('[') == std::string::npos ? "[" + value + "]" : value;
  toml::table parsed;
  try {
    parsed = toml::parse("v = " + toml_value, std::string_view(kCommandLine));
  } catch (const toml::parse_error&) {
    throw ConfigError(kCommandLine, key, "cannot read \"" + value + "\" as " + type_name(spec->type));
  }
  set_value(config, *spec, *parsed.get("v"), kCommandLine, sources, kCommandLine);
}

namespace {

// data.tasks.* (docs/data-format.md, "Task documents"): the rules between keys the key table's
// bounds cannot state. Checked even when data.tasks.rate is 0, so a config is valid or not
// whatever the rate.
void check_data_tasks(const DataConfig& d, const std::function<std::string(const std::string&)>& source_of) {
  auto fail = [&](const std::string& key, const std::string& what) { throw ConfigError(source_of(key), key, what); };
  if (d.tasks_rate > 1.0) fail("data.tasks.rate", "must be <= 1 (a share of the documents)");
  // An empty range names the bound that was set (the other may be its default).
  auto range = [&](const std::string& what, int64_t lo, int64_t hi) {
    if (lo <= hi) return;
    const std::string min = "data.tasks.min_" + what, max = "data.tasks.max_" + what;
    if (source_of(min).empty() && !source_of(max).empty())
      fail(max, std::to_string(hi) + " is below " + min + " (" + std::to_string(lo) + ")");
    fail(min, std::to_string(lo) + " is above " + max + " (" + std::to_string(hi) + ")");
  };
  range("distance", d.tasks_min_distance, d.tasks_max_distance);
  range("prefix", d.tasks_min_prefix, d.tasks_max_prefix);
  range("pairs", d.tasks_min_pairs, d.tasks_max_pairs);
  if (d.tasks_kinds == "mqar") {  // a task trained alone, on its own synthetic ids (data/tasks/mqar.h)
    if (d.source != "synthetic")
      fail("data.tasks.kinds", "mqar documents are made of their own token ids, not a corpus: needs "
                               "data.source = \"synthetic\"");
    if (d.tasks_rate != 0 && d.tasks_rate != 1)
      fail("data.tasks.rate", "mqar is trained alone (every document an MQAR document): leave it 0 or 1");
    return;
  }
  if (d.tasks_loss != "all")
    fail("data.tasks.loss", "answers is mqar's (data.tasks.kinds = \"mqar\"); passkey, needle and facts "
                            "documents are trained on whole, like the books around them");
  size_t begin = 0;
  while (begin <= d.tasks_kinds.size()) {
    const size_t comma = std::min(d.tasks_kinds.find(',', begin), d.tasks_kinds.size());
    const std::string kind = d.tasks_kinds.substr(begin, comma - begin);
    if (kind != "passkey" && kind != "needle" && kind != "facts")
      fail("data.tasks.kinds", "\"" + kind + "\" is not a task kind (passkey, needle, facts, comma-separated; "
                               "or mqar alone)");
    begin = comma + 1;
  }
  if (d.tasks_rate > 0 && d.source != "shards")
    fail("data.tasks.rate", "task documents are built from a prepared corpus: needs data.source = \"shards\"");
}

}  // namespace

void name_run_dir(RunConfig& config, const std::string& config_path) {
  const std::string marker = "{config}";
  const std::string stem = std::filesystem::path(config_path).stem().string();
  for (size_t at; (at = config.run.dir.find(marker)) != std::string::npos;) config.run.dir.replace(at, marker.size(), stem);
}

void resolve(RunConfig& config, const ConfigSources* sources) {
  auto source_of = [&](const std::string& key) -> std::string {
    if (sources) {
      auto it = sources->find(key);
      if (it != sources->end()) return it->second;
    }
    return "";
  };
  // Errors from core name the key first ("model.window: ..."); attach where it was set.
  auto rethrow = [&](const std::invalid_argument& e) {
    const std::string msg = e.what();
    const auto colon = msg.find(": ");
    const std::string key = colon == std::string::npos ? "" : msg.substr(0, colon);
    const std::string what = colon == std::string::npos ? msg : msg.substr(colon + 2);
    const std::string source = source_of(key);
    throw ConfigError(source, key, source.empty() && find_key(key) ? what + " (" + key + " has its default value)" : what);
  };
  // XL attends over its whole segment (model.md §6): a model.seq_len given on the command line (eval
  // at a longer context, docs/evaluation.md) takes model.window along unless that is given too.
  const std::string cli = kCommandLine;
  if (config.model.variant == "xl" && source_of("model.seq_len") == cli && source_of("model.window") != cli)
    config.model.window = config.model.seq_len;
  // run.dir: the run's files inside it, unless their own keys were set (docs/training.md "Runs").
  if (!config.run.dir.empty()) {
    const std::filesystem::path dir = config.run.dir;
    if (source_of("log.metrics_path").empty()) config.log.metrics_path = (dir / "metrics.jsonl").string();
    if (source_of("checkpoint.dir").empty()) config.checkpoint.dir = (dir / "ckpt").string();
  }
  const bool total_from_steps = config.optim.total_steps == 0;
  if (total_from_steps) config.optim.total_steps = config.train.steps;
  try {
    config.model.resolve();
    config.optim.resolve();
  } catch (const std::invalid_argument& e) {
    // optim.total_steps taken from train.steps = 0: the user wrote train.steps, name it.
    if (total_from_steps && config.train.steps == 0 && std::string(e.what()).rfind("optim.total_steps: ", 0) == 0)
      throw ConfigError(source_of("train.steps"), "train.steps",
                        "must be >= 1: the learning-rate schedule ends at train.steps (optim.total_steps "
                        "= 0 means train.steps); train.steps=0 only writes checkpoint.init_from's weights "
                        "and needs optim.total_steps set");
    rethrow(e);
  }
  if (config.data.source == "shards" && config.data.path.empty())
    throw ConfigError(source_of("data.source"), "data.path", "data.source = \"shards\" needs a shard directory");
  if (config.train.rollback && config.checkpoint.dir.empty() && config.checkpoint.resume_from.empty())
    throw ConfigError(source_of("train.rollback"), "train.rollback",
                      "rolling back needs checkpoints to roll back to: set checkpoint.dir");
  // The data source holds batch x grad_accum streams per rank (launch/train/grad_accum.h).
  if (int64_t{config.train.batch} * config.train.grad_accum > std::numeric_limits<int>::max())
    throw ConfigError(source_of("train.grad_accum"), "train.grad_accum",
                      "train.batch x train.grad_accum = " +
                          std::to_string(int64_t{config.train.batch} * config.train.grad_accum) +
                          " streams per rank is more than a stream index can count");
  check_data_tasks(config.data, source_of);
  const double beat = config.launch.heartbeat_timeout_s;
  if ((beat > 0 && beat < 1) || beat > 86400)
    throw ConfigError(source_of("launch.heartbeat_timeout_s"), "launch.heartbeat_timeout_s",
                      "must be 0 (no heartbeats) or between 1 and 86400 s");
}

std::vector<std::string> config_warnings(const RunConfig& c) {
  std::vector<std::string> warnings;
  const std::string steps = std::to_string(c.train.steps);
  if (c.train.steps > 0 && c.optim.warmup > c.train.steps)
    warnings.push_back("optim.warmup = " + std::to_string(c.optim.warmup) + " is more than train.steps = " + steps +
                       ": the run ends during warmup, its learning rate never reaching optim.lr; lower optim.warmup");
  if (c.train.eval_every > c.train.steps && c.train.steps > 0)
    warnings.push_back("train.eval_every = " + std::to_string(c.train.eval_every) + " is more than train.steps = " +
                       steps + ": the only evaluation is the last step's");
  if (c.data.tasks_kinds == "mqar" && c.data.tasks_loss == "all")
    warnings.push_back("data.tasks.kinds = mqar with data.tasks.loss = all: the loss counts the random keys, values "
                       "and filler too, which nothing can predict; data.tasks.loss = answers trains on the recall alone");
  return warnings;
}

RunConfig parse_run_config(std::string_view toml_text, const std::string& source_name,
                           const std::vector<std::string>& overrides, const std::string& base_dir,
                           ConfigSources* sources) {
  ConfigSources local;
  ConfigSources* s = sources ? sources : &local;
  RunConfig config;
  apply_toml_text(config, toml_text, source_name, base_dir, s);
  for (const auto& o : overrides) apply_override(config, o, s);
  resolve(config, s);
  return config;
}

RunConfig load_run_config(const std::string& path, const std::vector<std::string>& overrides,
                          ConfigSources* sources) {
  ConfigSources local;
  ConfigSources* s = sources ? sources : &local;
  RunConfig config;
  apply_toml_file(config, path, s);
  for (const auto& o : overrides) apply_override(config, o, s);
  name_run_dir(config, path);
  resolve(config, s);
  return config;
}

std::string value_text(const ConfigValue& value) {
  std::string out;
  append_value(out, value);
  return out;
}

std::string resolve_config_path(const std::string& arg) {
  if (fs::exists(arg)) return arg;
  std::string named = "configs/";
  named += arg;
  if (!arg.ends_with(".toml")) named += ".toml";
  if (fs::exists(named)) return named;
  std::string known;
  std::error_code ec;
  if (fs::is_directory("configs", ec))
    for (const auto& e : fs::directory_iterator("configs"))
      if (e.path().extension() == ".toml") {
        known += ' ';
        known += e.path().stem().string();
      }
  throw ConfigError("", "", "unknown config '" + arg + "': no such file, nor " + named +
                               (known.empty() ? std::string() : "; configs here:") + known);
}

std::string render_toml(const RunConfig& config) {
  std::string out = "# brt-dist run configuration, fully resolved (every key; see launch/config/config_keys.cpp)\n";
  std::string section;
  for (const auto& spec : config_keys()) {
    const auto dot = spec.key.find('.');
    const std::string sec = spec.key.substr(0, dot);
    if (sec != section) {
      out += "\n[" + sec + "]\n";
      section = sec;
    }
    std::string line = spec.key.substr(dot + 1) + " = ";
    append_value(line, spec.get(config));
    if (line.size() < 36) line.resize(36, ' ');
    out += line + "  # " + spec.help + "\n";
  }
  return out;
}

bool same_values(const RunConfig& a, const RunConfig& b) {
  for (const auto& spec : config_keys())
    if (spec.get(a) != spec.get(b)) return false;
  return true;
}

}  // namespace brt::launch
