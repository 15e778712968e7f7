#include "launch/eval/tokenizer_match.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>

#include "checkpoint/reader.h"
#include "data/shard_format.h"

namespace brt::launch {

std::string checkpoint_tokenizer_hash(const std::string& checkpoint) {
  return checkpoint::CheckpointReader(checkpoint).metadata().tokenizer_hash;
}

std::string check_checkpoint_tokenizer(const std::string& checkpoint, const std::string& checkpoint_hash,
                                       const TokenizerInUse& use, bool allowed) {
  if (checkpoint_hash == use.hash) return "";
  const std::string trained = checkpoint_hash.empty() ? "was trained on synthetic data (no tokenizer)"
                                                      : "was trained with tokenizer " + checkpoint_hash;
  const std::string what = "checkpoint " + checkpoint + " " + trained + ", but " + use.source + " is tokenizer " +
                           use.hash + ": its ids stand for other pieces";
  if (allowed) return "warning: " + what + "; going on as --allow-tokenizer-mismatch asks";
  throw std::runtime_error(what + ". Use the tokenizer and data the model was trained with, or pass "
                           "--allow-tokenizer-mismatch to go on anyway");
}

namespace {

void warn(const std::string& warning, bool print) {
  if (print && !warning.empty()) std::fprintf(stderr, "%s\n", warning.c_str());
}

}  // namespace

void check_data_tokenizer(const std::string& checkpoint, const std::string& data_dir, bool allowed, bool print) {
  data::Manifest manifest;
  try {
    manifest = data::read_manifest(data_dir);
  } catch (const std::exception&) {
    return;
  }
  const TokenizerInUse use{manifest.tokenizer_hash, "the data " + data_dir + " (" +
                                                        data::manifest_path(data_dir).string() + ", made with " +
                                                        data::tokenizer_path(data_dir).string() + ")"};
  warn(check_checkpoint_tokenizer(checkpoint, checkpoint_tokenizer_hash(checkpoint), use, allowed), print);
}

void check_model_tokenizer(const std::string& checkpoint, const std::string& model_file, const std::string& model_hash,
                           bool allowed, bool print) {
  const TokenizerInUse use{model_hash, "the tokenizer " + model_file};
  warn(check_checkpoint_tokenizer(checkpoint, checkpoint_tokenizer_hash(checkpoint), use, allowed), print);
}

}  // namespace brt::launch
