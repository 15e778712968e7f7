#include "launch/cli/export/hf_export.h"

#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "data/tokenizer.h"
#include "launch/cli/export/hf_python.h"
#include "launch/cli/version.h"
#include "launch/config/config_keys.h"
#include "launch/eval/tokenizer_match.h"
#include "launch/train/checkpoint/training_checkpoint.h"

namespace brt::launch {

namespace {

using Json = nlohmann::ordered_json;

Json json_value(const ConfigValue& value) {
  return std::visit([](const auto& v) { return Json(v); }, value);
}

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream f(file, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) throw std::runtime_error(file.string() + ": cannot write it (disk full or not writable?)");
}

// config.json: transformers' fields, then every [model] key of the checkpoint's resolved
// config under its own name (configuration_brt.BrtConfig reads them), then where it came from.
Json config_json(const RunConfig& cfg, const checkpoint::Metadata& meta, const std::string& checkpoint,
                 const data::Tokenizer* tokenizer) {
  Json j;
  j["architectures"] = {"BrtForCausalLM"};
  j["auto_map"] = {{"AutoConfig", "configuration_brt.BrtConfig"},
                   {"AutoModelForCausalLM", "modeling_brt.BrtForCausalLM"}};
  j["model_type"] = "brt";
  j["torch_dtype"] = "float32";
  j["vocab_size"] = cfg.model.vocab;
  j["tie_word_embeddings"] = false;  // BrtModel ties its output to `embed` itself (model.md §1)
  if (tokenizer != nullptr) {
    j["bos_token_id"] = tokenizer->bos_id();
    j["eos_token_id"] = tokenizer->eos_id();
  }
  for (const auto& key : config_keys())
    if (key.key.rfind("model.", 0) == 0) j[key.key.substr(6)] = json_value(key.get(cfg));
  j["brt_dist"] = {{"version", version()}, {"checkpoint", std::filesystem::absolute(checkpoint).string()},
                   {"step", meta.step}, {"tokens_seen", meta.tokens_seen}, {"tokenizer_hash", meta.tokenizer_hash}};
  return j;
}

// model.safetensors: an 8-byte little-endian header length, the JSON header (padded with
// spaces to 8 bytes), then every /model/ tensor as float32, read and written one at a time.
HfExportReport write_safetensors(const std::filesystem::path& file, checkpoint::CheckpointReader& reader) {
  std::vector<const checkpoint::TensorInfo*> params;
  for (const auto& info : reader.tensors())
    if (info.path.rfind("/model/", 0) == 0) params.push_back(&info);
  if (params.empty()) throw std::runtime_error(reader.path().string() + ": no /model/ parameters");
  Json header;
  int64_t offset = 0;
  HfExportReport report;
  for (const auto* info : params) {
    const int64_t n = checkpoint::shape_numel(info->shape);
    header["model." + info->path.substr(7)] = {{"dtype", "F32"}, {"shape", info->shape},
                                                {"data_offsets", {offset, offset + 4 * n}}};
    offset += 4 * n;
    report.parameters += n;
  }
  header["__metadata__"] = {{"format", "pt"}};  // transformers refuses a file without it
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  std::ofstream f(file, std::ios::binary | std::ios::trunc);
  const uint64_t length = text.size();
  unsigned char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<unsigned char>(length >> (8 * i));
  f.write(reinterpret_cast<const char*>(length_bytes), 8);
  f << text;
  for (const auto* info : params) {
    std::vector<float> values;
    if (info->dtype == checkpoint::DType::kF32) {
      values = reader.read_whole<float>(info->path);
    } else if (info->dtype == checkpoint::DType::kF64) {  // an fp64 run's parameters, rounded
      for (double v : reader.read_whole<double>(info->path)) values.push_back(static_cast<float>(v));
    } else {
      throw std::runtime_error(reader.path().string() + ": " + info->path + " is not a float tensor");
    }
    f.write(reinterpret_cast<const char*>(values.data()), std::streamsize(values.size() * sizeof(float)));
  }
  f.close();
  if (!f) throw std::runtime_error(file.string() + ": cannot write it (disk full or not writable?)");
  report.tensors = int64_t(params.size());
  report.bytes = int64_t(8 + text.size()) + offset;
  return report;
}

// tokenizer_config.json for the slow LlamaTokenizer (the `sentencepiece` package): legacy
// mode encodes with SentencePiece alone, as brt-dist does (its model has no dummy prefix).
Json tokenizer_config_json() {
  return Json{{"tokenizer_class", "LlamaTokenizer"}, {"vocab_file", "tokenizer.model"}, {"bos_token", "<s>"},
              {"eos_token", "</s>"}, {"unk_token", "<unk>"}, {"pad_token", nullptr}, {"add_bos_token", true},
              {"add_eos_token", false}, {"legacy", true}, {"add_prefix_space", false},
              {"clean_up_tokenization_spaces", false}, {"sp_model_kwargs", Json::object()}};
}

// The run's tokenizer into the folder, checked against the checkpoint's hash; "" when there is
// none to copy (`note` says why).
std::string export_tokenizer(const HfExportOptions& o, const RunConfig& cfg, HfExportReport& report,
                             std::unique_ptr<data::Tokenizer>& tokenizer) {
  std::string path = o.tokenizer;
  if (path.empty() && !cfg.data.path.empty()) {
    path = (std::filesystem::path(cfg.data.path) / "tokenizer.model").string();
    if (!std::filesystem::exists(path)) {
      report.note = "no tokenizer exported: " + path + " (the run's data.path) does not exist; give --tokenizer FILE";
      return "";
    }
  }
  if (path.empty()) {
    report.note = "no tokenizer exported: the run trained on synthetic data";
    return "";
  }
  tokenizer = std::make_unique<data::Tokenizer>(data::Tokenizer::load(path));
  check_model_tokenizer(o.checkpoint, path, tokenizer->hash(), o.allow_tokenizer_mismatch, true);
  tokenizer->save(o.dir / "tokenizer.model");
  write_text(o.dir / "tokenizer_config.json", tokenizer_config_json().dump(2) + "\n");
  return path;
}

}  // namespace

std::string hf_export_dir_problem(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) return "";
  if (!std::filesystem::is_directory(dir, ec)) return dir.string() + " exists and is not a directory";
  if (std::filesystem::directory_iterator(dir, ec) != std::filesystem::directory_iterator())
    return dir.string() + " is not empty (give --force to write the export into it, replacing its files)";
  return "";
}

HfExportReport write_hf_export(const HfExportOptions& o) {
  const RunConfig cfg = config_of_checkpoint(o.checkpoint);
  checkpoint::CheckpointReader reader(o.checkpoint);
  std::filesystem::create_directories(o.dir);
  // The tokenizer first: a mismatch is refused before the parameters are written.
  HfExportReport report;
  std::unique_ptr<data::Tokenizer> tokenizer;
  const std::string tokenizer_file = export_tokenizer(o, cfg, report, tokenizer);
  const std::string note = report.note;
  report = write_safetensors(o.dir / "model.safetensors", reader);
  report.tokenizer = tokenizer_file;
  report.note = note;
  write_text(o.dir / "config.json", config_json(cfg, reader.metadata(), o.checkpoint, tokenizer.get()).dump(2) + "\n");
  write_hf_python(o.dir, config_keys_json());
  return report;
}

}  // namespace brt::launch
