#include "data/streams.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "data/tasks/task_mixture.h"
#include "data/corpus/text.h"

namespace brt::data {

namespace {

constexpr int64_t kCursorVersion = 1, kCursorVersionWithTasks = 2;
constexpr size_t kCachedEpochs = 4;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Fisher-Yates with our own generator and bounded draws (std distributions differ between
// standard libraries, and the order must be reproducible anywhere).
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
  uint64_t state = seed ^ (0xD1B54A32D192ED03ull * static_cast<uint64_t>(epoch + 1));
  for (int64_t i = n - 1; i > 0; --i) {
    const auto bound = static_cast<unsigned __int128>(i + 1);
    const auto j = static_cast<int64_t>((static_cast<unsigned __int128>(splitmix64(state)) * bound) >> 64);
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

}  // namespace

int64_t StreamCursor::stream_epoch(size_t local_index) const {
  const int64_t g = first_stream + static_cast<int64_t>(local_index);
  return num_documents > 0 ? (g + positions[local_index].documents_taken * global_streams) / num_documents : 0;
}

int64_t StreamCursor::epoch() const {
  int64_t lowest = positions.empty() ? 0 : INT64_MAX;
  for (size_t i = 0; i < positions.size(); ++i) lowest = std::min(lowest, stream_epoch(i));
  return lowest;
}

std::vector<int64_t> StreamCursor::to_vector() const {
  // Without tasks the layout of version 1, so checkpoints of runs without tasks read as before.
  const bool with_tasks = tasks_fingerprint != 0;
  std::vector<int64_t> flat = {with_tasks ? kCursorVersionWithTasks : kCursorVersion, static_cast<int64_t>(seed),
                               num_documents, global_streams, first_stream, static_cast<int64_t>(positions.size())};
  if (with_tasks) flat.push_back(static_cast<int64_t>(tasks_fingerprint));
  for (const auto& p : positions) {
    if (!with_tasks && p.tasks_taken != 0) throw std::logic_error("stream cursor: task documents taken without a task mixture");
    flat.insert(flat.end(), {p.documents_taken, p.offset});
    if (with_tasks) flat.push_back(p.tasks_taken);
  }
  return flat;
}

StreamCursor StreamCursor::from_vector(std::span<const int64_t> flat) {
  const bool with_tasks = !flat.empty() && flat[0] == kCursorVersionWithTasks;
  const size_t header = with_tasks ? 7 : 6, per_stream = with_tasks ? 3 : 2;
  if (flat.size() < header || (flat[0] != kCursorVersion && !with_tasks) ||
      flat.size() != header + per_stream * static_cast<size_t>(std::max<int64_t>(0, flat[5]))) {
    throw std::runtime_error("stream cursor: malformed (" + std::to_string(flat.size()) + " values, expected version " +
                             std::to_string(kCursorVersion) + " or " + std::to_string(kCursorVersionWithTasks) + ")");
  }
  StreamCursor cursor;
  cursor.seed = static_cast<uint64_t>(flat[1]);
  cursor.num_documents = flat[2];
  cursor.global_streams = flat[3];
  cursor.first_stream = flat[4];
  if (with_tasks) cursor.tasks_fingerprint = static_cast<uint64_t>(flat[6]);
  for (int64_t i = 0; i < flat[5]; ++i) {
    const size_t at = header + per_stream * static_cast<size_t>(i);
    cursor.positions.push_back({flat[at], flat[at + 1], with_tasks ? flat[at + 2] : 0});
  }
  return cursor;
}

StreamCursor gather_global_cursor(const StreamCursor& local, MPI_Comm dp_comm) {
  int ranks = 1;
  MPI_Comm_size(dp_comm, &ranks);
  std::vector<int64_t> mine;
  for (const auto& p : local.positions) mine.insert(mine.end(), {p.documents_taken, p.offset, p.tasks_taken});
  std::vector<int64_t> all(mine.size() * static_cast<size_t>(ranks));
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T, all.data(),
                static_cast<int>(mine.size()), MPI_INT64_T, dp_comm);
  StreamCursor global = local;
  global.first_stream = 0;
  global.positions.clear();
  for (size_t i = 0; i + 2 < all.size(); i += 3) global.positions.push_back({all[i], all[i + 1], all[i + 2]});
  if (static_cast<int64_t>(global.positions.size()) != global.global_streams) {
    throw std::runtime_error("gather_global_cursor: ranks hold " + std::to_string(global.positions.size()) +
                             " streams in all, expected " + std::to_string(global.global_streams));
  }
  return global;
}

int64_t segments_for_document(int64_t tokens, const StreamOptions& options) {
  const int64_t length = tokens + (options.add_bos ? 1 : 0);
  return length < 2 ? 0 : (length - 1 + options.seq_len - 1) / options.seq_len;
}

StreamSet::StreamSet(std::shared_ptr<const TokenDataset> dataset, const StreamOptions& options,
                     const StreamCursor* resume)
    : dataset_(std::move(dataset)), options_(options) {
  if (options_.streams_per_rank < 1 || options_.seq_len < 1 || options_.data_size < 1 ||
      options_.data_rank < 0 || options_.data_rank >= options_.data_size) {
    throw std::runtime_error("stream options: need B >= 1, N >= 1 and 0 <= data_rank < data_size");
  }
  for (int64_t i = 0; i < dataset_->num_documents(); ++i) {
    if (effective_length(i) >= 2) eligible_.push_back(i);
  }
  if (eligible_.empty()) {
    throw std::runtime_error("document streams: split " + std::string(split_name(dataset_->split())) +
                             " has no document with at least two tokens");
  }
  global_streams_ = int64_t{options_.data_size} * options_.streams_per_rank;
  first_stream_ = int64_t{options_.data_rank} * options_.streams_per_rank;
  positions_.assign(static_cast<size_t>(options_.streams_per_rank), StreamPosition{});
  checks_.assign(positions_.size(), DocumentCheck{});
  tasks_.assign(positions_.size(), CurrentTask{});
  if (options_.tasks && options_.single_pass) {
    throw std::invalid_argument("document streams: task documents mix into training streams, not single-pass evaluation");
  }
  if (resume) {
    const int64_t D = static_cast<int64_t>(eligible_.size());
    const uint64_t fingerprint = options_.tasks ? options_.tasks->fingerprint() : 0;
    if (resume->tasks_fingerprint != fingerprint) {
      throw std::runtime_error(
          "stream cursor was saved " +
          (resume->tasks_fingerprint != 0 ? "with a task mixture (fingerprint " + hex64(resume->tasks_fingerprint) + ")"
                                          : std::string("without task documents")) +
          ", but this loader has " +
          (options_.tasks ? options_.tasks->describe() + " (fingerprint " + hex64(fingerprint) + ")"
                          : std::string("none")) +
          ": resuming would change what every stream reads");
    }
    if (resume->seed != options_.seed || resume->num_documents != D || resume->global_streams != global_streams_) {
      throw std::runtime_error("stream cursor does not match this loader (seed " + std::to_string(resume->seed) +
                               ", " + std::to_string(resume->num_documents) + " documents, " +
                               std::to_string(resume->global_streams) + " streams; loader has seed " +
                               std::to_string(options_.seed) + ", " + std::to_string(D) + " documents, " +
                               std::to_string(global_streams_) + " streams)");
    }
    const int64_t skip = first_stream_ - resume->first_stream;
    if (skip < 0 || skip + options_.streams_per_rank > static_cast<int64_t>(resume->positions.size())) {
      throw std::runtime_error("stream cursor holds streams [" + std::to_string(resume->first_stream) + ", " +
                               std::to_string(resume->first_stream + static_cast<int64_t>(resume->positions.size())) +
                               ") but rank " + std::to_string(options_.data_rank) + " needs streams starting at " +
                               std::to_string(first_stream_));
    }
    std::copy_n(resume->positions.begin() + skip, options_.streams_per_rank, positions_.begin());
  } else if (options_.stagger_shared_documents && !options_.single_pass) {
    stagger_first_documents();
  }
}

// Stream g's first document is Q[g], of epoch e = g / D: with G > D, ceil(G / D) streams start
// with each document (in a shuffled order). Copy e % copies starts at that fraction of its
// segments — a pure function of (g, G, D, seed), so any layout with the same G agrees.
void StreamSet::stagger_first_documents() {
  const auto D = static_cast<int64_t>(eligible_.size());
  const int64_t copies = (global_streams_ + D - 1) / D;
  for (size_t s = 0; s < positions_.size(); ++s) {
    const int64_t g = first_stream_ + static_cast<int64_t>(s);
    const int64_t copy = (g / D) % copies;
    if (copy == 0) continue;
    const int64_t segments = segments_for_document(dataset_->document(document_at(g)).tokens, options_);
    positions_[s].offset = (copy * segments / copies) * options_.seq_len;
  }
}

int64_t StreamSet::effective_length(int64_t local_doc) const {
  return dataset_->document(local_doc).tokens + (options_.add_bos ? 1 : 0);
}

const std::vector<int64_t>& StreamSet::permutation(int64_t epoch) {
  for (const auto& [e, perm] : permutation_cache_) {
    if (e == epoch) return perm;
  }
  const auto D = static_cast<int64_t>(eligible_.size());
  std::vector<int64_t> perm;
  if (options_.shuffle) {
    perm = epoch_permutation(D, options_.seed, epoch);
  } else {
    perm.resize(static_cast<size_t>(D));
    for (int64_t i = 0; i < D; ++i) perm[static_cast<size_t>(i)] = i;
  }
  // Streams drift apart by at most a few epochs; keep the most recent few.
  if (permutation_cache_.size() >= kCachedEpochs) {
    auto oldest = std::min_element(permutation_cache_.begin(), permutation_cache_.end(),
                                   [](const auto& a, const auto& b) { return a.first < b.first; });
    permutation_cache_.erase(oldest);
  }
  permutation_cache_.emplace_back(epoch, std::move(perm));
  return permutation_cache_.back().second;
}

int64_t StreamSet::document_at(int64_t sequence_index) {
  const auto D = static_cast<int64_t>(eligible_.size());
  const auto& perm = permutation(sequence_index / D);
  return eligible_[static_cast<size_t>(perm[static_cast<size_t>(sequence_index % D)])];
}

bool StreamSet::exhausted() const {
  if (!options_.single_pass) return false;
  const auto D = static_cast<int64_t>(eligible_.size());
  for (size_t s = 0; s < positions_.size(); ++s) {
    if (first_stream_ + static_cast<int64_t>(s) + positions_[s].documents_taken * global_streams_ < D) return false;
  }
  return true;
}

void write_segment_row(Batch& out, int s, const int32_t* view, int64_t begin, int64_t available) {
  const int N = out.seq;
  const size_t row = static_cast<size_t>(s) * static_cast<size_t>(N);
  for (int t = 0; t < N; ++t) {
    const size_t at = row + static_cast<size_t>(t);
    out.position[at] = begin + t;
    if (t < available) out.inputs[at] = view[t];
    if (t + 1 < available) {
      out.targets[at] = view[t + 1];
      out.mask[at] = 1;
    }
  }
  out.doc_start[static_cast<size_t>(s)] = begin == 0 ? 1 : 0;
}

void StreamSet::fill_stream(int s, Batch& out) {
  StreamPosition& pos = positions_[static_cast<size_t>(s)];
  const int64_t sequence_index = first_stream_ + s + pos.documents_taken * global_streams_;
  if (options_.single_pass && sequence_index >= static_cast<int64_t>(eligible_.size())) return;  // idle
  if (options_.tasks && options_.tasks->is_task(first_stream_ + s, pos.documents_taken + pos.tasks_taken)) {
    fill_task(s, out);
    return;
  }
  const int64_t doc = document_at(sequence_index);
  const int64_t length = effective_length(doc);
  const int N = options_.seq_len;
  // Tokens [offset, offset + N + 1) of the document as the stream sees it (BOS first).
  const int64_t begin = pos.offset;
  const int64_t end = std::min(length, begin + N + 1);
  scratch_.resize(static_cast<size_t>(end - begin));
  const int64_t bos = options_.add_bos ? 1 : 0;
  int64_t filled = 0;
  if (bos && begin == 0) scratch_[static_cast<size_t>(filled++)] = options_.bos_id;
  dataset_->copy_tokens(doc, begin + filled - bos, (end - begin) - filled, scratch_.data() + filled,
                        options_.verify ? &checks_[static_cast<size_t>(s)] : nullptr);
  write_segment_row(out, s, scratch_.data(), begin, end - begin);
  out.doc_id[static_cast<size_t>(s)] = dataset_->document(doc).doc_id;
  pos.offset += N;
  if (pos.offset >= length - 1) {  // every target of the document has been served
    ++pos.documents_taken;
    pos.offset = 0;
    if (!options_.single_pass || sequence_index + global_streams_ < static_cast<int64_t>(eligible_.size())) {
      dataset_->prefetch(document_at(sequence_index + global_streams_));
    }
  }
}

void StreamSet::fill_task(int s, Batch& out) {
  StreamPosition& pos = positions_[static_cast<size_t>(s)];
  CurrentTask& current = tasks_[static_cast<size_t>(s)];
  if (current.index != pos.tasks_taken) {
    const TaskDocument doc = options_.tasks->document(first_stream_ + s, pos.tasks_taken);
    current.view.clear();
    if (options_.add_bos) current.view.push_back(options_.bos_id);
    current.view.insert(current.view.end(), doc.tokens.begin(), doc.tokens.end());
    current.index = pos.tasks_taken;
  }
  const auto length = static_cast<int64_t>(current.view.size());
  const int64_t begin = pos.offset;
  const int64_t end = std::min(length, begin + options_.seq_len + 1);
  write_segment_row(out, s, current.view.data() + begin, begin, end - begin);
  out.task[static_cast<size_t>(s)] = 1;
  pos.offset += options_.seq_len;
  if (pos.offset >= length - 1) {
    ++pos.tasks_taken;
    pos.offset = 0;
  }
}

bool StreamSet::next(Batch& out) {
  out.resize(options_.streams_per_rank, options_.seq_len);
  if (exhausted()) return false;
  for (int s = 0; s < options_.streams_per_rank; ++s) fill_stream(s, out);
  return true;
}

StreamCursor StreamSet::cursor() const {
  return {options_.seed, static_cast<int64_t>(eligible_.size()), global_streams_, first_stream_,
          options_.tasks ? options_.tasks->fingerprint() : 0, positions_};
}

}  // namespace brt::data
