// `brt-dist prepare` as a library call: corpus -> tokenizer (trained on rank
// 0 when none is given) -> token shards + document index, documents split across MPI ranks,
// restartable. Format: docs/data-format.md.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "data/corpus/corpus_formats.h"
#include "data/shard_format.h"
#include "data/tokenizer.h"

namespace brt::data {

struct PrepareOptions {
  std::filesystem::path corpus_dir;  // PG19 layout (train/, validation/, test/); may be empty
  std::vector<CorpusFile> files;     // further documents, e.g. from read_file_list()
  // Files or folders of text and JSONL (data/corpus/corpus_formats.h), listed as train documents.
  std::vector<std::filesystem::path> inputs;
  InputOptions input;
  // A corpus that is a single text file is cut into documents of about this size (0: never).
  int64_t cut_single_text_bytes = 256 << 10;
  // A corpus read from `inputs` with only train documents gets validation and test splits held
  // out of them (a PG19 folder or --files list keeps the splits it has).
  bool hold_out = true;
  HoldoutOptions holdout;
  std::filesystem::path output_dir;
  // An existing SentencePiece .model. When empty, output_dir/tokenizer.model is reused if it
  // exists and its record (tokenizer.tsv) says it was trained with these settings on this
  // corpus (restart), refused if it was made otherwise, else rank 0 trains one on the train
  // split (all files if it is empty). data/tokenizer_record.h.
  std::filesystem::path tokenizer_model;
  TokenizerTrainOptions tokenizer;
  // Train a new tokenizer even if one is stored (`prepare --retrain`): the way to change
  // --vocab, --model-type or the corpus of a prepared directory.
  bool retrain = false;
  BadDocumentPolicy bad_documents = BadDocumentPolicy::fail;
  // A shard holds consecutive documents of one split, closed once it reaches this many input
  // bytes. Shards are the unit of work across ranks and of restart.
  int64_t shard_target_bytes = 4ll << 20;
  bool show_progress = true;  // rank 0 prints documents done/total and MB/s to stderr
  // Called on every rank as each stage begins ("listing the corpus", "encoding shards, round
  // 3 of 10", ...) and on ranks waiting for rank 0's tokenizer each time its heartbeat
  // arrives: a watchdog puts a deadline on each (docs/reliability.md). Training a tokenizer
  // may take longer than that deadline: rank 0 sends a heartbeat every 200 ms while it does,
  // so only a stopped or dead rank 0 times the others out.
  std::function<void(const std::string&)> on_phase;
  // Called as this rank starts work of its own (training the tokenizer, encoding a shard):
  // not a wait, so a watchdog records it without a deadline.
  std::function<void(const std::string&)> on_work;
  // Called on rank 0 after each round of shards with the whole job's progress so far.
  struct Progress {
    int64_t documents_done = 0, documents_total = 0;
    int64_t bytes_done = 0, bytes_total = 0;  // input bytes encoded (reused shards count as done)
    double seconds = 0;
  };
  std::function<void(const Progress&)> on_progress;
};

// What listing found, for the summary.
struct CorpusSummary {
  int64_t input_files = 0, jsonl_records = 0, malformed_records = 0, cut_texts = 0;
  std::string held_out;  // hold_out_documents()'s sentence; "" when the corpus had its splits
};

struct PrepareResult {
  CorpusSummary corpus;
  std::string tokenizer_hash;
  bool tokenizer_trained = false;
  int32_t shards_total = 0;
  int32_t shards_written = 0;  // encoded in this run (all ranks)
  int32_t shards_reused = 0;   // found complete and verified, not redone
  int32_t stale_files_removed = 0;  // .bin/.meta files of shards no longer in the plan
  int64_t documents = 0;       // in the index (all splits)
  int64_t skipped_documents = 0;
  int64_t bytes_encoded = 0;  // input bytes tokenized in this run (all ranks)
  double encode_seconds = 0;  // wall time of the shard phase
  double megabytes_per_second = 0;
  Manifest manifest;
};

// Collective over `comm` (every rank must call it with the same options). The output
// directory must be on a file system all ranks see. Throws std::runtime_error (the same
// failure on every rank) naming the file or rank at fault. Files in output_dir/shards that
// the plan does not name are removed before the index and manifest are written.
PrepareResult prepare_corpus(const PrepareOptions& options, MPI_Comm comm);

// The corpus that `options` describe, in canonical order (index = document id).
std::vector<CorpusFile> collect_corpus_files(const PrepareOptions& options, CorpusSummary* summary = nullptr);

}  // namespace brt::data
