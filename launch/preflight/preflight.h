// Preflight: what every command that writes or allocates checks before any model is built
// (docs/reliability.md "Preflight"), so a run that cannot finish stops in its
// first second with the reason — not at its first save (with checkpoint.every = 0: at its end),
// nor in the kernel's OOM killer or inside libgomp:
//  (a) locations: checkpoint.dir, log.metrics_path, eval's --json and --token-losses, prepare's
//      --out are created and proven writable (a small file written, fsynced and removed); a
//      failure names the path and the errno, and says what is wrong: a regular file where a
//      directory belongs, a dangling symbolic link, a read-only file system, a name too long.
//      The flight-record folder is checked too, with a warning (only a failure report needs it);
//  (b) memory: the bytes a rank will allocate, predicted from the config alone by the planner's
//      model (launch/plan/planner.h predict_rank_memory: what `brt-dist plan` prints and the trainer
//      checks against the allocation), plus the host snapshot a save takes and, on the GPU, the
//      CUDA backend's workspace, against what the host and its memory cgroup allow
//      (launch/preflight/host_memory.h) shared by the ranks of the node — or the GPU's memory;
//      train.memory_check = false starts anyway;
//  (c) threads: train.threads or OMP_NUM_THREADS above kMaxThreadsPerCore × the cores in the
//      rank's affinity mask is refused before OpenMP starts a thread (libgomp crashes creating
//      100000; 20000 make a step thousands of times slower); above the cores, a warning;
//  (d) the ranks' configs agree: launch/preflight/config_agreement.h;
//  and for `train`, the checkpoint directory's lock (launch/preflight/run_lock.h).
// A refusal is parallel::LaunchRefused — exit status 2, one message for the whole job: every
// rank refuses with the same text (the first refusing rank's, broadcast).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "launch/config/config.h"
#include "launch/preflight/host_memory.h"
#include "launch/preflight/run_lock.h"
#include "launch/run/threads.h"
#include "parallel/cpu_share.h"

namespace brt::parallel {
class Communicator;
class MpiSession;
}  // namespace brt::parallel

namespace brt::launch {

// ---- (a) locations ----
// "" when `dir` is (after creating it and its parents if missing) a directory this process can
// write into; otherwise why not, naming `what` ("checkpoint.dir"), the path and the errno.
std::string directory_problem(const std::filesystem::path& dir, const std::string& what);
// "" when `file` can be written: its directory as above, and `file` itself, if it exists, a
// file (not a directory) open for writing.
std::string output_file_problem(const std::filesystem::path& file, const std::string& what);
// World rank 0 checks `outputs` ({what, path}; empty paths skipped: eval's --json and
// --token-losses, which it alone writes); parallel::LaunchRefused on every rank of `world` with
// the first problem.
void preflight_outputs(parallel::Communicator& world, const std::vector<std::pair<std::string, std::string>>& outputs);
// The same for a directory (prepare's --out).
void refuse_unusable_directory(const std::filesystem::path& dir, const std::string& what);

// ---- (b) memory ----
struct MemoryNeed {
  int64_t host = 0, device = 0;    // bytes per rank
  std::string host_parts, device_parts;  // what they are made of, for the message
};
// One training rank's (world_rank of world_size; train.tp and train.zero as configured).
MemoryNeed train_memory_need(const RunConfig& cfg, int world_size, int world_rank);
// eval and generate: the model at `streams` streams, no optimizer, no snapshot.
MemoryNeed inference_memory_need(const RunConfig& cfg, int streams, int tp);
// "" when `need` fits; else the refusal "not enough memory: ... needs X GiB per rank, ...,
// Y GiB available (MemAvailable ... / N ranks on this node)". `host` is shared by
// `ranks_on_node`; `device_bytes` (0: none) is the GPU's memory. `advice` says what to lower.
std::string memory_problem(const MemoryNeed& need, const MemoryBudget& host, int ranks_on_node, int64_t device_bytes,
                           const std::string& advice);

// ---- (c) threads ----
inline constexpr int kMaxThreadsPerCore = 4;
// "" or the refusal of `choice` on a rank with `share`'s cores.
std::string thread_problem(const ThreadChoice& choice, const parallel::CpuShare& share);
// "" or a warning: more threads than the rank's cores.
std::string thread_warning(const ThreadChoice& choice, const parallel::CpuShare& share);
// choose_threads, refused as thread_problem says (eval, generate).
ThreadChoice preflight_threads(int configured, const parallel::CpuShare& share);

// ---- the commands ----
// Throws parallel::LaunchRefused on every rank of `world` (null: one process) with the first
// refusing rank's problem when any rank's `problem` is not empty.
void agree_on_problem(parallel::Communicator* world, const std::string& problem);

struct TrainPreflight {
  CheckpointDirLock checkpoint_lock;  // held (by world rank 0) until the run ends
};
// `brt-dist train` after agree_on_config and the layout check, before the process groups and
// the model: (a)-(c) on every rank, agreed, warnings printed by world rank 0; then the lock of
// checkpoint.dir. `threads`: the run's choice (threads = 0: chosen here from cfg). Collective over
// MPI_COMM_WORLD. `command` is the command line (for the lock).
TrainPreflight preflight_train(parallel::MpiSession& session, const RunConfig& cfg, const ThreadChoice& threads,
                               const std::string& command);
// eval / generate (`command`), before the backend: (b) for `streams` streams over `world`, plus
// `extra` host bytes (eval --task: its documents, made whole; `extra.host_parts` names them).
void preflight_inference_memory(parallel::Communicator& world, const RunConfig& cfg, int streams,
                                const std::string& command, const MemoryNeed& extra = {});

// argv joined with spaces (the lock file's command).
std::string command_line_text(int argc, char** argv);

}  // namespace brt::launch
