// Document streams (model.md §8): each data-parallel rank owns B streams; a
// stream reads whole documents, N tokens per step, and fills a brt::data::Batch.
//
// Layout independence: the documents of epoch e are a seeded permutation P_e of the split's
// documents; the epochs are concatenated into one sequence Q = P_0 P_1 P_2 ... and dealt
// round-robin to the G = data_size * B global streams: global stream g takes Q[g], Q[g + G],
// Q[g + 2G], ... Rank r owns global streams [r*B, (r+1)*B). So the set of streams (and what
// each reads) depends only on G, the seed and the split, never on how G is split into ranks;
// each epoch's documents go to exactly one stream each, and a stream that has taken its share
// of epoch e simply continues with its share of epoch e+1 (it never runs dry, even if the
// split has fewer documents than there are streams).
//
// Task documents (data/tasks/task_mixture.h, StreamOptions::tasks) interleave with a stream's corpus
// documents on a seekable per-stream schedule; the corpus documents keep the order above and
// the cursor counts each stream's task documents besides them, so resume stays exact.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "data/batch.h"
#include "data/dataset.h"

namespace brt::data {

class TaskMixture;

struct StreamOptions {
  int streams_per_rank = 1;  // B
  int seq_len = 512;         // N
  int data_rank = 0;
  int data_size = 1;
  uint64_t seed = 0;
  bool shuffle = true;       // false: documents in index order (epoch permutation = identity)
  // Evaluation: every document exactly once (no further epochs); streams that run out go idle
  // (mask 0, doc_id -1) and next() returns false once all of them are idle.
  bool single_pass = false;
  // Prepend a BOS token to every document so that its first text token is predicted too (all
  // text bytes count for bits/byte). Positions count the BOS as position 0.
  bool add_bos = true;
  int32_t bos_id = 1;  // SentencePiece's default; use Tokenizer::bos_id()
  bool prefetch = true;  // fill the next batches on a background thread
  // Every document's token ids and checksum are verified as it is read (TokenDataset's
  // DocumentCheck, docs/data-format.md); off only to measure what that costs (bench/tokenize).
  bool verify = true;
  // Fewer documents than global streams (asked for explicitly, data.share_documents): streams
  // whose first document another stream also starts with begin it at distinct segment-aligned
  // offsets, so no two read the same tokens at the same step. Off: they start at its beginning.
  bool stagger_shared_documents = false;
  // Task documents mixed into the streams (training only; null: corpus documents only).
  std::shared_ptr<const TaskMixture> tasks;
};

// Where one stream is: how many corpus documents it has taken from its deal (the next one it
// reads is Q[g + documents_taken * G]), how many task documents (its slot is their sum), and
// the token offset within the document it is reading.
struct StreamPosition {
  int64_t documents_taken = 0;
  int64_t offset = 0;
  int64_t tasks_taken = 0;
  bool operator==(const StreamPosition&) const = default;
};

// The loader's serialisable position. A rank's cursor holds its own streams
// (first_stream = data_rank * B); gather_global_cursor() assembles all G of them so a run can
// resume on another layout with the same G.
struct StreamCursor {
  uint64_t seed = 0;
  int64_t num_documents = 0;   // documents in the deal (checked on restore)
  int64_t global_streams = 0;  // G
  int64_t first_stream = 0;    // global index of positions[0]
  uint64_t tasks_fingerprint = 0;  // TaskMixture::fingerprint(); 0: no task mixture
  std::vector<StreamPosition> positions;

  // Epoch a stream is in: (g + documents_taken * G) / num_documents.
  int64_t stream_epoch(size_t local_index) const;
  int64_t epoch() const;  // lowest epoch over the streams held
  // Flat form for checkpoints: without tasks [1, seed, num_documents, G, first, count,
  // (taken, offset)...]; with them [2, seed, num_documents, G, first, count, fingerprint,
  // (taken, offset, tasks_taken)...]. from_vector reads both.
  std::vector<int64_t> to_vector() const;
  static StreamCursor from_vector(std::span<const int64_t> flat);
  bool operator==(const StreamCursor&) const = default;
};

// Collective over the data-parallel communicator: every rank gets the cursor of all G streams.
StreamCursor gather_global_cursor(const StreamCursor& local, MPI_Comm dp_comm);

// The deterministic core: no threads, fills one batch per call.
class StreamSet {
 public:
  // `resume` may be a global cursor (all G streams) or this rank's own.
  StreamSet(std::shared_ptr<const TokenDataset> dataset, const StreamOptions& options,
            const StreamCursor* resume = nullptr);
  // Fills `out` (resized to [B, N]) with the next segment of every stream; returns false
  // (leaving `out` all-idle) only in single-pass mode once every stream is done.
  bool next(Batch& out);
  StreamCursor cursor() const;
  bool exhausted() const;

 private:
  int64_t document_at(int64_t sequence_index);  // split-local index of Q[sequence_index]
  const std::vector<int64_t>& permutation(int64_t epoch);
  int64_t effective_length(int64_t local_doc) const;
  void stagger_first_documents();
  void fill_stream(int s, Batch& out);
  void fill_task(int s, Batch& out);

  std::shared_ptr<const TokenDataset> dataset_;
  StreamOptions options_;
  std::vector<int64_t> eligible_;  // split-local indices of documents with >= 2 tokens
  int64_t global_streams_ = 0;
  int64_t first_stream_ = 0;
  std::vector<StreamPosition> positions_;
  std::vector<std::pair<int64_t, std::vector<int64_t>>> permutation_cache_;  // (epoch, P_e)
  std::vector<int32_t> scratch_;
  std::vector<DocumentCheck> checks_;  // per stream: the document it is reading, verified as read
  // Per stream: the task document it is reading (BOS first when added), made when it starts
  // one and again after a resume in its middle (documents are pure functions of their index).
  struct CurrentTask {
    int64_t index = -1;  // tasks_taken when it was made
    std::vector<int32_t> view;
  };
  std::vector<CurrentTask> tasks_;
};

// StreamSet plus a background thread that fills the next batches while the model computes.
// cursor() always describes the position after the last batch returned by next().
class DocumentStreams {
 public:
  DocumentStreams(std::shared_ptr<const TokenDataset> dataset, const StreamOptions& options,
                  const StreamCursor* resume = nullptr);
  ~DocumentStreams();
  DocumentStreams(const DocumentStreams&) = delete;
  DocumentStreams& operator=(const DocumentStreams&) = delete;

  bool next(Batch& out);
  StreamCursor cursor() const;

 private:
  struct Prefetcher;
  std::unique_ptr<StreamSet> set_;  // used directly when prefetch is off
  std::unique_ptr<Prefetcher> prefetcher_;
};

// Row s of `out` (resized to [B, N]) from tokens [begin, begin + available) of a document as a
// stream sees it (BOS first when added), available <= N + 1: inputs, targets (the next
// tokens), mask, positions and doc_start (model.md §8). The segment writer of every stream kind.
void write_segment_row(Batch& out, int s, const int32_t* view, int64_t begin, int64_t available);

// Number of segments a document is served in (tests, eval bookkeeping): ceil((L' - 1) / N) where L'
// is the document length including an added BOS.
int64_t segments_for_document(int64_t tokens, const StreamOptions& options);

}  // namespace brt::data
