// The Python modeling code of a Hugging Face export (`brt-dist export --hf`, docs/huggingface.md):
// python/brt_dist's modules, embedded in the binary at build time (launch/cli/export/embed_python.cmake
// generates their table into the build directory), written into the export's flat folder with
// their package-relative imports rewritten, so the binary exports without the repository.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace brt::launch {

struct EmbeddedPython {
  const char* path;       // relative to python/brt_dist: "torch/model.py", "hf/modeling_brt.py"
  std::string_view text;  // the file, verbatim
};

// Every embedded module (generated: hf_python_sources.cpp in the build directory).
const std::vector<EmbeddedPython>& embedded_hf_python();

// The module's name in the flat folder: hf/* keep theirs (config.json's auto_map names
// configuration_brt and modeling_brt), every other module is "brt_" + its file name
// ("torch/model.py" -> "brt_model"), so no two collide and none shadows an installed package.
std::string flat_module_name(const std::string& path);

// `text` of the module at `path` with every package-relative import made flat:
//   from ..config import ModelConfig          -> from .brt_config import ModelConfig
//   from . import config_schema               -> two lines: `from .brt_config_schema import
//                                                 __name__ as ...` (transformers' remote-code
//                                                 loader copies only the files that `from .x
//                                                 import` lines name) and `from . import
//                                                 brt_config_schema as config_schema`
//   from ..checkpoint import load_checkpoint  -> from brt_dist.checkpoint import load_checkpoint
//                                                 (a module the export does not carry: works
//                                                 where the package is installed)
// Throws std::runtime_error naming the file for an import above the package.
std::string flatten_imports(const std::string& path, std::string_view text);

// Writes every embedded module, flattened, into `dir`; config_schema's EMBEDDED_SCHEMA line
// becomes the schema itself (`schema_json`: the folder has no config_keys.json, and transformers
// would not copy one). Returns the files written. Throws naming the file on a write error.
std::vector<std::filesystem::path> write_hf_python(const std::filesystem::path& dir, const std::string& schema_json);

}  // namespace brt::launch
