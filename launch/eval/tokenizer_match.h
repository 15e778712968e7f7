// eval and generate against the tokenizer a checkpoint's model was trained with:
// the ids of another tokenizer stand for other pieces, so bits/token measured on its data and
// text decoded with it are meaningless, though nothing else would fail.
#pragma once

#include <string>

namespace brt::launch {

// The tokenizer hash a checkpoint stores ("" when its run trained on synthetic data).
std::string checkpoint_tokenizer_hash(const std::string& checkpoint);

// The tokenizer a command is about to use, and where it comes from (for the message).
struct TokenizerInUse {
  std::string hash;
  std::string source;  // e.g. "the shards of DIR (DIR/manifest.tsv)" or "--tokenizer FILE"
};

// Throws std::runtime_error naming the checkpoint, both hashes and the source unless the
// checkpoint's hash equals `use.hash`; with `allowed` (--allow-tokenizer-mismatch) it returns
// a warning to print instead. Returns "" when they match.
std::string check_checkpoint_tokenizer(const std::string& checkpoint, const std::string& checkpoint_hash,
                                       const TokenizerInUse& use, bool allowed);

// eval: the prepared data's tokenizer (its manifest.tsv, which opening the data checks against
// tokenizer.model and every shard) against the checkpoint's. Data that cannot be read is left
// for the evaluator to report. `print` (world rank 0): print a warning allowed past.
void check_data_tokenizer(const std::string& checkpoint, const std::string& data_dir, bool allowed, bool print);
// generate: the tokenizer model it decodes with against the checkpoint's.
void check_model_tokenizer(const std::string& checkpoint, const std::string& model_file,
                           const std::string& model_hash, bool allowed, bool print);

}  // namespace brt::launch
