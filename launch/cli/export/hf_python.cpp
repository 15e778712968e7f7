#include "launch/cli/export/hf_python.h"

#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace brt::launch {

namespace {

// "torch/model.py" -> {"torch", "model"}.
std::vector<std::string> module_parts(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream in(path.substr(0, path.size() - 3));  // without ".py"
  for (std::string part; std::getline(in, part, '/');) parts.push_back(part);
  return parts;
}

std::string joined(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : std::string(1, sep)) + p;
  return out;
}

// The embedded module a dotted name inside the package names ("torch.model"), or nullptr.
const EmbeddedPython* embedded_module(const std::string& dotted) {
  std::string path = dotted;
  for (char& c : path) c = c == '.' ? '/' : c;
  for (const auto& m : embedded_hf_python())
    if (path + ".py" == m.path) return &m;
  return nullptr;
}

// One import line `from <dots><name> import <names>` of the module at `path`, flattened.
std::string flattened_import(const std::string& path, const std::string& indent, size_t dots,
                             const std::string& name, const std::string& names) {
  std::vector<std::string> base = module_parts(path);
  base.pop_back();  // the module's package
  if (dots - 1 > base.size())
    throw std::runtime_error("python/brt_dist/" + path + ": an import above the package (from " +
                             std::string(dots, '.') + name + ")");
  base.resize(base.size() - (dots - 1));
  const std::string package = joined(base, '.');
  if (!name.empty()) {
    const std::string dotted = package.empty() ? name : package + "." + name;
    if (const EmbeddedPython* m = embedded_module(dotted))
      return indent + "from ." + flat_module_name(m->path) + " import " + names;
    return indent + "from brt_dist." + dotted + " import " + names;
  }
  // `from . import module`: one module, as the package's sources write it.
  static const std::regex one_module(R"(^([A-Za-z_]\w*)\s*$)");
  std::smatch m;
  if (!std::regex_match(names, m, one_module))
    throw std::runtime_error("python/brt_dist/" + path + ": `from " + std::string(dots, '.') + " import " + names +
                             "`: the export flattens one module per such import");
  const std::string dotted = package.empty() ? m[1].str() : package + "." + m[1].str();
  const EmbeddedPython* module = embedded_module(dotted);
  if (module == nullptr) return indent + "from brt_dist" + (package.empty() ? "" : "." + package) + " import " + names;
  const std::string flat = flat_module_name(module->path);
  return indent + "from ." + flat + " import __name__ as _" + flat + "_name  # transformers copies the files of " +
         "`from .x import` lines\n" + indent + "from . import " + flat + " as " + m[1].str();
}

}  // namespace

std::string flat_module_name(const std::string& path) {
  const std::vector<std::string> parts = module_parts(path);
  return parts.size() == 2 && parts[0] == "hf" ? parts[1] : "brt_" + parts.back();
}

std::string flatten_imports(const std::string& path, std::string_view text) {
  static const std::regex relative(R"(^(\s*)from\s+(\.+)([A-Za-z_][\w.]*)?\s+import\s+(.*)$)");
  std::stringstream in{std::string(text)};
  std::string out;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, relative))
      line = flattened_import(path, m[1].str(), m[2].length(), m[3].str(), m[4].str());
    out += line + "\n";
  }
  return out;
}

std::vector<std::filesystem::path> write_hf_python(const std::filesystem::path& dir, const std::string& schema_json) {
  const std::string schema_line = "EMBEDDED_SCHEMA = None\n";
  std::vector<std::filesystem::path> written;
  for (const auto& module : embedded_hf_python()) {
    for (const auto& other : embedded_hf_python())
      if (&other != &module && flat_module_name(other.path) == flat_module_name(module.path))
        throw std::logic_error(std::string("python/brt_dist/") + module.path + " and " + other.path +
                               " would both be " + flat_module_name(module.path) + ".py in the flat folder");
    std::string text = flatten_imports(module.path, module.text);
    if (std::string(module.path) == "config_schema.py") {
      const size_t at = text.find("\n" + schema_line);
      if (at == std::string::npos || schema_json.find("'''") != std::string::npos)
        throw std::runtime_error("python/brt_dist/config_schema.py: no line `EMBEDDED_SCHEMA = None` to embed the "
                                 "schema in (or the schema holds ''')");
      text.replace(at + 1, schema_line.size(), "EMBEDDED_SCHEMA = r'''" + schema_json + "'''\n");
    }
    const std::filesystem::path file = dir / (flat_module_name(module.path) + ".py");
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f) throw std::runtime_error(file.string() + ": cannot write it (disk full or not writable?)");
    written.push_back(file);
  }
  return written;
}

}  // namespace brt::launch
