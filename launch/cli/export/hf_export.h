// `brt-dist export --hf DIR CHECKPOINT`: a folder transformers loads with
// AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True) (docs/huggingface.md):
// config.json (every [model] key, auto_map), model.safetensors (the parameters, float32, named
// "model.<model.md §9 name>"), the modeling code (launch/cli/export/hf_python.h) and, when the run had
// one, the SentencePiece tokenizer with a tokenizer_config.json naming LlamaTokenizer.
#pragma once

#include <filesystem>
#include <string>

namespace brt::launch {

struct HfExportOptions {
  std::filesystem::path dir;         // the folder to write (created; refused non-empty without force)
  std::string checkpoint;            // a checkpoint file (resolved: launch/cli/checkpoint_model.h)
  std::string tokenizer;             // "": the run's data.path/tokenizer.model, if it exists
  bool allow_tokenizer_mismatch = false;
};

// What was written, for the command to print.
struct HfExportReport {
  int64_t tensors = 0, parameters = 0, bytes = 0;
  std::string tokenizer;  // the tokenizer file copied, or "" (none: the reason is in `note`)
  std::string note;
};

// "" or why `dir` cannot be written into without --force (it exists and is not an empty
// directory), naming it.
std::string hf_export_dir_problem(const std::filesystem::path& dir);

// Writes the folder; throws naming the file on any error (checkpoint damage included).
HfExportReport write_hf_export(const HfExportOptions& options);

}  // namespace brt::launch
