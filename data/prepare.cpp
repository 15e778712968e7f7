#include "data/prepare.h"
#include "data/corpus/corpus_formats.h"
#include "data/output_file.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <stdexcept>
#include <thread>

#include "data/tokenizer_record.h"

namespace brt::data {

namespace fs = std::filesystem;

namespace {

struct PlannedShard {
  Split split = Split::train;
  int32_t shard = 0;
  std::vector<int64_t> doc_ids;  // indices into the corpus file list
  int64_t bytes = 0;             // input file sizes (used only for planning and progress)
  std::string plan_hash;
};

int64_t file_size_or_zero(const fs::path& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

// What the plan hash knows of a document: id, path, size and modification time, so a document
// edited in place redoes its shard (as make decides: same size and time count as unchanged).
// A document inside a file adds its byte range and field (a whole file's line is as it was).
std::string document_identity(int64_t id, const CorpusFile& file) {
  const fs::path& path = file.path;
  std::error_code ec;
  const auto time = fs::last_write_time(path, ec);
  const long long ticks = ec ? 0 : static_cast<long long>(time.time_since_epoch().count());
  const std::string place = file.whole_file() ? "" : "\t" + std::to_string(file.begin) + "-" +
                                                         std::to_string(file.end) + "\t" + file.json_key;
  return std::to_string(id) + "\t" + path.string() + "\t" + std::to_string(file_size_or_zero(path)) + "\t" +
         std::to_string(ticks) + place + "\n";
}

// Consecutive documents of a split per shard; depends only on the corpus, never on ranks.
std::vector<PlannedShard> plan_shards(const std::vector<CorpusFile>& files, int64_t target_bytes) {
  std::vector<PlannedShard> shards;
  for (size_t i = 0; i < files.size(); ++i) {
    const bool new_split = shards.empty() || shards.back().split != files[i].split;
    if (new_split || shards.back().bytes >= target_bytes) {
      const int32_t number = new_split ? 0 : shards.back().shard + 1;
      shards.push_back({files[i].split, number, {}, 0, {}});
    }
    shards.back().doc_ids.push_back(static_cast<int64_t>(i));
    shards.back().bytes += files[i].size_hint();
  }
  for (auto& shard : shards) {
    uint64_t h = kFnvOffsetBasis;
    for (int64_t id : shard.doc_ids) {
      const std::string line = document_identity(id, files[static_cast<size_t>(id)]);
      h = fnv1a64(line.data(), line.size(), h);
    }
    shard.plan_hash = hex64(h);
  }
  return shards;
}

// Largest shards first to the least-loaded rank: deterministic, so every rank computes the
// same assignment without communicating.
std::vector<std::vector<size_t>> assign_shards(const std::vector<PlannedShard>& shards, int ranks) {
  std::vector<size_t> order(shards.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return shards[a].bytes > shards[b].bytes; });
  std::vector<std::vector<size_t>> per_rank(static_cast<size_t>(ranks));
  std::vector<int64_t> load(static_cast<size_t>(ranks), 0);
  for (size_t index : order) {
    const auto rank = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    per_rank[rank].push_back(index);
    load[rank] += shards[index].bytes + 1;
  }
  return per_rank;
}

// A shard is finished when its .meta exists, matches the plan and tokenizer, has per-document
// checksums (older prepares wrote none: redone), and the .bin file's checksum verifies.
bool shard_is_complete(const fs::path& dir, const PlannedShard& plan, const std::string& tokenizer_hash) {
  std::optional<ShardMeta> meta;
  try {
    meta = read_shard_meta(shard_meta_path(dir, plan.split, plan.shard));
  } catch (const std::exception& error) {
    std::cerr << "warning: redoing shard: " << error.what() << "\n";
    return false;
  }
  if (!meta || meta->tokenizer_hash != tokenizer_hash || meta->plan_hash != plan.plan_hash) return false;
  for (const auto& d : meta->documents) {
    if (d.checksum.empty()) return false;
  }
  const fs::path tokens = shard_tokens_path(dir, plan.split, plan.shard);
  std::error_code ec;
  if (fs::file_size(tokens, ec) != static_cast<uintmax_t>(meta->tokens * meta->token_bytes) || ec) return false;
  return checksum_file(tokens) == meta->checksum;
}

template <typename T>
void append_tokens(std::vector<char>& out, const std::vector<int32_t>& ids) {
  const size_t start = out.size();
  out.resize(start + ids.size() * sizeof(T));
  T* dst = reinterpret_cast<T*>(out.data() + start);
  for (size_t i = 0; i < ids.size(); ++i) dst[i] = static_cast<T>(ids[i]);  // little-endian host
}

// Encodes one shard; returns the input bytes it read.
int64_t write_shard(const fs::path& dir, const PlannedShard& plan, const std::vector<CorpusFile>& files,
                    const Tokenizer& tokenizer, int token_bytes, BadDocumentPolicy policy, DocumentReader& reader) {
  ShardMeta meta;
  meta.tokenizer_hash = tokenizer.hash();
  meta.token_bytes = token_bytes;
  meta.split = plan.split;
  meta.shard = plan.shard;
  meta.plan_hash = plan.plan_hash;
  std::vector<char> token_data;
  std::vector<int32_t> ids;
  int64_t bytes_read = 0;
  uint64_t chain = kFnvOffsetBasis;  // the shard's checksum so far (docs/data-format.md)
  for (int64_t doc_id : plan.doc_ids) {
    const auto& file = files[static_cast<size_t>(doc_id)];
    auto text = load_document(file, policy, reader);
    if (!text) {
      meta.skipped.emplace_back(doc_id, file.name());
      continue;
    }
    bytes_read += static_cast<int64_t>(text->size());
    ids.clear();
    tokenizer.encode_append(*text, ids);
    const TextStats stats = count_text(*text);
    meta.documents.push_back({doc_id, plan.split, plan.shard, meta.tokens,
                              static_cast<int64_t>(ids.size()), stats.bytes, stats.words,
                              file.name(), {}});
    meta.tokens += static_cast<int64_t>(ids.size());
    const size_t start = token_data.size();
    if (token_bytes == 2) append_tokens<uint16_t>(token_data, ids);
    else append_tokens<uint32_t>(token_data, ids);
    chain = fnv1a64(token_data.data() + start, token_data.size() - start, chain);
    meta.documents.back().checksum = hex64(chain);
  }
  meta.checksum = hex64(chain);
  const fs::path tokens_path = shard_tokens_path(dir, plan.split, plan.shard);
  // Through a checked .tmp (data/output_file.h): a full disk names the shard and leaves no .tmp.
  write_file_atomically(tokens_path, std::string_view(token_data.data(), token_data.size()));
  write_shard_meta(shard_meta_path(dir, plan.split, plan.shard), meta);  // completion marker last
  return bytes_read;
}


// Waits by polling with short sleeps: a blocking MPI call spins, and a rank waiting for rank 0
// to train the tokenizer (or for a bigger shard elsewhere) would take a core from the ranks
// still working when ranks share cores.
void wait_without_spinning(MPI_Request& request) {
  int done = 0;
  while (true) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Turns a failure on any rank into the same exception everywhere (no rank left waiting).
void raise_if_any_failed(const std::string& local_error, MPI_Comm comm, const std::string& stage) {
  int failed = local_error.empty() ? 0 : 1;
  int any = 0;
  MPI_Request request;
  MPI_Iallreduce(&failed, &any, 1, MPI_INT, MPI_MAX, comm, &request);
  wait_without_spinning(request);
  if (!any) return;
  // The same text on every rank that failed (run_mpi_main prints it once, naming ranks only
  // when their messages differ).
  if (failed) throw std::runtime_error(local_error);
  throw std::runtime_error(stage + " failed on another rank (see its message)");
}

void phase(const PrepareOptions& options, const std::string& what) {
  if (options.on_phase) options.on_phase(what);
}
void working(const PrepareOptions& options, const std::string& what) {
  if (options.on_work) options.on_work(what);
}

constexpr int kHeartbeatTag = 7301;
// Well inside the smallest deadline (--timeout-s >= 1), and cheap: one int per rank.
constexpr auto kHeartbeatPeriod = std::chrono::milliseconds(200);

// Rank 0 runs `work` on a helper thread and sends every other rank a heartbeat every 200 ms
// (0) and a last message when it is done (1); the others wait for that, each heartbeat
// restarting their deadline. A stopped or dead rank 0 sends none: its peers time out.
void on_rank_zero_with_heartbeat(const PrepareOptions& options, MPI_Comm comm, const std::string& waiting,
                                 const std::function<void()>& work) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  if (rank == 0) {
    working(options, "world rank 0 loads or trains the tokenizer");
    std::atomic<bool> done{false};
    std::thread worker([&] {
      work();
      done = true;
    });
    std::vector<int> beats(static_cast<size_t>(ranks) * 64, 0);
    std::vector<MPI_Request> sent;
    size_t next = 0;
    auto beat = [&](int value) {
      for (int r = 1; r < ranks; ++r) {
        if (next == beats.size()) {  // reuse the slots once the earlier sends completed
          MPI_Waitall(static_cast<int>(sent.size()), sent.data(), MPI_STATUSES_IGNORE);
          sent.clear();
          next = 0;
        }
        beats[next] = value;
        sent.emplace_back();
        MPI_Isend(&beats[next++], 1, MPI_INT, r, kHeartbeatTag, comm, &sent.back());
      }
    };
    auto last = std::chrono::steady_clock::now();
    while (!done) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (ranks > 1 && std::chrono::steady_clock::now() - last >= kHeartbeatPeriod) {
        beat(0);
        last = std::chrono::steady_clock::now();
      }
    }
    worker.join();
    if (ranks > 1) beat(1);
    MPI_Waitall(static_cast<int>(sent.size()), sent.data(), MPI_STATUSES_IGNORE);
    return;
  }
  int value = 0;
  while (value == 0) {
    phase(options, waiting);
    MPI_Request request;
    MPI_Irecv(&value, 1, MPI_INT, 0, kHeartbeatTag, comm, &request);
    int got = 0;
    while (!got) {
      MPI_Test(&request, &got, MPI_STATUS_IGNORE);
      if (!got) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

// World rank 0 settles the tokenizer (data/tokenizer_record.h); its error, if any, is thrown on
// every rank with the same text, so the job prints it once.
Tokenizer obtain_tokenizer(const PrepareOptions& options, const std::vector<CorpusFile>& files,
                           MPI_Comm comm, bool* trained) {
  *trained = false;
  std::string error;
  phase(options, "tokenizer");
  on_rank_zero_with_heartbeat(options, comm, "waiting for world rank 0 to load or train the tokenizer", [&] {
    try {
      *trained = settle_tokenizer({options.output_dir, options.tokenizer_model, options.retrain, options.tokenizer,
                                   options.bad_documents, options.show_progress},
                                  files);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  int64_t length = static_cast<int64_t>(error.size());
  MPI_Bcast(&length, 1, MPI_INT64_T, 0, comm);
  error.resize(static_cast<size_t>(length));
  if (length > 0) MPI_Bcast(error.data(), static_cast<int>(length), MPI_CHAR, 0, comm);
  if (!error.empty()) throw std::runtime_error(error);
  int trained_flag = *trained ? 1 : 0;
  MPI_Bcast(&trained_flag, 1, MPI_INT, 0, comm);
  *trained = trained_flag != 0;
  return Tokenizer::load(tokenizer_path(options.output_dir));
}

// Files in shards/ that the plan does not name — shards of an earlier corpus, shard size or
// tokenizer, and temporaries of an interrupted run — are removed (only names of the shard
// pattern: nothing else a user keeps there). Returns how many.
int32_t remove_unplanned_shards(const fs::path& dir, const std::vector<PlannedShard>& shards) {
  std::set<std::string> planned;
  for (const auto& plan : shards) {
    planned.insert(shard_tokens_path(dir, plan.split, plan.shard).filename().string());
    planned.insert(shard_meta_path(dir, plan.split, plan.shard).filename().string());
  }
  static const std::regex kShardFile(R"((train|validation|test)-[0-9]{5,}\.(bin|meta)(\.tmp)?)");
  int32_t removed = 0;
  for (const auto& entry : fs::directory_iterator(dir / "shards")) {
    const std::string name = entry.path().filename().string();
    if (planned.count(name) || !std::regex_match(name, kShardFile)) continue;
    fs::remove(entry.path());
    ++removed;
  }
  return removed;
}

// This rank's shard of a round: reused when complete, else encoded. Fills `local` (documents,
// bytes encoded, shards written, reused, input bytes); a failure goes to `error`.
void encode_or_reuse_shard(const PrepareOptions& options, const PlannedShard& plan,
                           const std::vector<CorpusFile>& files, const Tokenizer& tokenizer,
                           int token_bytes, DocumentReader& reader, int64_t (&local)[5],
                           std::string& error) {
  try {
    if (shard_is_complete(options.output_dir, plan, tokenizer.hash())) {
      local[3] = 1;
    } else {
      local[1] = write_shard(options.output_dir, plan, files, tokenizer, token_bytes,
                             options.bad_documents, reader);
      local[2] = 1;
    }
    local[0] = static_cast<int64_t>(plan.doc_ids.size());
    local[4] = plan.bytes;
  } catch (const std::exception& e) {
    error = e.what();
  }
}

// Encodes this rank's shards of the plan and sets result's encoding figures (time, bytes,
// shards written, reused and planned).
void encode_shards(const PrepareOptions& options, MPI_Comm comm, int rank, int ranks,
                   const std::vector<PlannedShard>& shards, const std::vector<CorpusFile>& files,
                   const Tokenizer& tokenizer, int token_bytes, PrepareResult& result) {
  std::string error;
  const auto per_rank = assign_shards(shards, ranks);
  // In corpus order, so consecutive records of a (compressed) file are read in one pass.
  std::vector<size_t> mine = per_rank[static_cast<size_t>(rank)];
  std::sort(mine.begin(), mine.end());
  DocumentReader reader;
  size_t rounds = 0;
  for (const auto& list : per_rank) rounds = std::max(rounds, list.size());

  // One shard per rank per round; the Allreduce after each round carries progress and
  // failures, so rank 0 can print global progress and no rank waits on a failed one.
  const auto start = std::chrono::steady_clock::now();
  int64_t totals[4] = {0, 0, 0, 0};  // documents done, bytes encoded, shards written, reused
  int64_t bytes_total = 0, bytes_done = 0;
  for (const auto& plan : shards) bytes_total += plan.bytes;
  for (size_t round = 0; round < rounds; ++round) {
    int64_t local[5] = {0, 0, 0, 0, 0};  // ... and input bytes of the shard this rank finished
    error.clear();
    working(options, "encoding shards, round " + std::to_string(round + 1) + " of " + std::to_string(rounds));
    if (round < mine.size())
      encode_or_reuse_shard(options, shards[mine[round]], files, tokenizer, token_bytes, reader,
                            local, error);
    phase(options, "waiting for the other ranks to finish round " + std::to_string(round + 1) + " of " +
                       std::to_string(rounds));
    raise_if_any_failed(error, comm, "prepare");
    int64_t summed[5];
    MPI_Request request;
    MPI_Iallreduce(local, summed, 5, MPI_INT64_T, MPI_SUM, comm, &request);
    wait_without_spinning(request);
    for (int k = 0; k < 4; ++k) totals[k] += summed[k];
    bytes_done += summed[4];
    if (rank == 0 && options.on_progress)
      options.on_progress({totals[0], static_cast<int64_t>(files.size()), bytes_done, bytes_total,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
  }
  result.encode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.bytes_encoded = totals[1];
  result.shards_written = static_cast<int32_t>(totals[2]);
  result.shards_reused = static_cast<int32_t>(totals[3]);
  result.shards_total = static_cast<int32_t>(shards.size());
  result.megabytes_per_second = result.encode_seconds > 0 ? totals[1] / 1e6 / result.encode_seconds : 0;
}

// Rank 0's part of the index step: removes unplanned shard files (their count in
// *stale_files_removed), then writes the document index and manifest from the shard metas.
void write_index_and_manifest(const PrepareOptions& options, const std::vector<PlannedShard>& shards,
                              const Tokenizer& tokenizer, int token_bytes,
                              int32_t* stale_files_removed) {
  Manifest manifest;
  manifest.tokenizer_hash = tokenizer.hash();
  manifest.vocab_size = tokenizer.vocab_size();
  manifest.token_bytes = token_bytes;
  std::vector<DocumentRecord> index;
  *stale_files_removed = remove_unplanned_shards(options.output_dir, shards);
  for (const auto& plan : shards) {
    const fs::path meta_file = shard_meta_path(options.output_dir, plan.split, plan.shard);
    auto meta = read_shard_meta(meta_file);
    if (!meta) throw std::runtime_error("missing " + meta_file.string() + " after prepare");
    const auto s = static_cast<size_t>(plan.split);
    manifest.shards_per_split[s] = std::max(manifest.shards_per_split[s], plan.shard + 1);
    for (const auto& d : meta->documents) {
      auto& t = manifest.totals[s];
      ++t.documents, t.tokens += d.tokens, t.bytes += d.bytes, t.words += d.words;
      index.push_back(d);
    }
  }
  write_index(options.output_dir, index);
  write_manifest(options.output_dir, manifest);
}

void print_summary(const PrepareResult& result) {
  std::fprintf(stderr, "prepare: %lld documents (%lld skipped), %d shards written, %d reused, %d files of "
               "shards no longer planned removed, tokenizer %s\n",
               static_cast<long long>(result.documents), static_cast<long long>(result.skipped_documents),
               result.shards_written, result.shards_reused, result.stale_files_removed,
               result.tokenizer_hash.c_str());
}

}  // namespace

std::vector<CorpusFile> collect_corpus_files(const PrepareOptions& options, CorpusSummary* summary) {
  std::vector<CorpusFile> files = options.files;
  if (!options.corpus_dir.empty()) {
    auto listed = list_pg19_corpus(options.corpus_dir);
    files.insert(files.end(), listed.begin(), listed.end());
  }
  InputListing listing;
  for (const auto& input : options.inputs) list_input(input, options.input, listing);
  // A corpus that is one text file: cut into documents (else it has no held-out split and one stream).
  if (options.input.max_document_bytes == 0 && files.empty() && listing.documents.size() == 1 &&
      listing.documents[0].line == 0 && options.cut_single_text_bytes > 0) {
    InputOptions cut = options.input;
    cut.max_document_bytes = options.cut_single_text_bytes;
    listing = {};
    for (const auto& input : options.inputs) list_input(input, cut, listing);
  }
  files.insert(files.end(), listing.documents.begin(), listing.documents.end());
  std::string held_out;
  if (options.hold_out && !options.inputs.empty()) held_out = hold_out_documents(files, options.holdout);
  canonicalise_corpus(files);
  if (files.empty()) throw CorpusError("prepare: the corpus has no documents");
  if (summary) *summary = {listing.files, listing.jsonl_records, listing.malformed_records, listing.cut_texts, held_out};
  return files;
}

PrepareResult prepare_corpus(const PrepareOptions& options, MPI_Comm comm) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  PrepareResult result;
  std::string error;
  std::vector<CorpusFile> files;
  phase(options, "listing the corpus");
  try {
    files = collect_corpus_files(options, &result.corpus);
    if (rank == 0) fs::create_directories(options.output_dir / "shards");
  } catch (const std::exception& e) {
    error = e.what();
  }
  raise_if_any_failed(error, comm, "corpus listing");

  const Tokenizer tokenizer = obtain_tokenizer(options, files, comm, &result.tokenizer_trained);
  result.tokenizer_hash = tokenizer.hash();
  const int token_bytes = tokenizer.vocab_size() <= 65536 ? 2 : 4;

  const auto shards = plan_shards(files, std::max<int64_t>(1, options.shard_target_bytes));
  encode_shards(options, comm, rank, ranks, shards, files, tokenizer, token_bytes, result);

  // Rank 0 assembles the index and manifest from the shard metas (a shared file system).
  error.clear();
  if (rank == 0) working(options, "world rank 0 writes the document index and manifest");
  else phase(options, "waiting for world rank 0 to write the document index and manifest");
  if (rank == 0) {
    try {
      write_index_and_manifest(options, shards, tokenizer, token_bytes, &result.stale_files_removed);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  raise_if_any_failed(error, comm, "writing the index");
  MPI_Bcast(&result.stale_files_removed, 1, MPI_INT32_T, 0, comm);
  result.manifest = read_manifest(options.output_dir);
  for (const auto& t : result.manifest.totals) result.documents += t.documents;
  result.skipped_documents = static_cast<int64_t>(files.size()) - result.documents;
  if (rank == 0 && options.show_progress && !options.on_progress)  // a caller with its own progress sums up itself
    print_summary(result);
  return result;
}

}  // namespace brt::data
