#include "launch/preflight/preflight.h"

#include "core/sharding/context_parallel.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <memory>
#include <optional>

#include "launch/plan/backend_workspace.h"
#include "launch/plan/planner.h"
#include "launch/preflight/errno_text.h"
#include "launch/process/checkpoint_space.h"
#include "launch/run/device_backend.h"
#include "launch/run/gpu_binding.h"
#include "parallel/communicator.h"
#include "parallel/mpi/launch_env.h"
#include "parallel/launch_refused.h"
#include "parallel/mpi/mpi_communicator.h"
#include "parallel/mpi/mpi_session.h"

namespace brt::launch {

namespace fs = std::filesystem;

namespace {

// ---- (a) locations ----

std::string type_phrase(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "something else";
}

// The first component of `path` that keeps it from being a directory — a dangling symbolic link
// (mkdir would say only "File exists") or something that is not a directory — and why.
std::optional<std::pair<fs::path, std::string>> blocking_component(const fs::path& path) {
  fs::path prefix;
  for (const auto& part : path) {
    prefix /= part;
    struct stat st {};
    if (::lstat(prefix.c_str(), &st) != 0) return std::nullopt;  // missing from here on: creatable
    if (S_ISLNK(st.st_mode)) {
      if (::stat(prefix.c_str(), &st) != 0) {
        std::error_code ec;
        const fs::path target = fs::read_symlink(prefix, ec);
        return std::make_pair(prefix, "is a dangling symbolic link (to " + (ec ? std::string("?") : target.string()) +
                                          "): its target does not exist");
      }
    }
    if (!S_ISDIR(st.st_mode)) return std::make_pair(prefix, "is " + type_phrase(st.st_mode) + ", not a directory");
  }
  return std::nullopt;
}

// Why a name may be too long, for ENAMETOOLONG: the longest component or the whole path.
std::string name_length_hint(const fs::path& path, int error) {
  if (error != ENAMETOOLONG) return "";
  size_t longest = 0;
  for (const auto& part : path) longest = std::max(longest, part.string().size());
  if (longest > NAME_MAX)
    return "; a name in it is " + std::to_string(longest) + " characters long, file systems allow " +
           std::to_string(NAME_MAX);
  return "; the path is " + std::to_string(path.string().size()) + " characters long";
}

// A path as messages show it: a component longer than a line is cut ("nnnn...(300 characters)"),
// so the reason after it stays readable.
std::string shown_path(const fs::path& path) {
  constexpr size_t kLongest = 40;
  fs::path out;
  for (const auto& part : path) {
    const std::string name = part.string();
    out /= name.size() > kLongest ? name.substr(0, 16) + "...(" + std::to_string(name.size()) + " characters)" : name;
  }
  return out.string();
}

std::string host_name() {
  char host[256] = {};
  return ::gethostname(host, sizeof host - 1) == 0 ? host : "host";
}

// Writes, fsyncs and removes a small file in `dir`: "" or the errno text of the failing call.
std::string probe_write(const fs::path& dir) {
  const fs::path probe = dir / (".brt-dist-probe." + host_name() + "." + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return "a file cannot be created there: " + errno_text(errno) + name_length_hint(probe, errno);
  static constexpr char kText[] = "brt-dist preflight: this directory can be written\n";
  int error = 0;
  if (::write(fd, kText, sizeof kText - 1) != ssize_t(sizeof kText - 1)) error = errno ? errno : EIO;
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  ::unlink(probe.c_str());
  return error == 0 ? "" : "a file cannot be written there: " + errno_text(error);
}

// ---- (b) memory ----

std::string memory_parts(const MemoryPrediction& m) {
  return "parameters " + gib_text(m.parameters) + ", gradients " + gib_text(m.gradients) +
         (m.optimizer > 0 ? ", optimizer " + gib_text(m.optimizer) : "") + ", activations " + gib_text(m.activations) +
         ", backward scratch " + gib_text(m.backward_scratch) + ", carried state " + gib_text(m.carried_state);
}

int64_t device_memory_bytes(const RunConfig& cfg) {
  if (cfg.train.device != "cuda") return 0;
  const parallel::LaunchInfo where = parallel::query_launch_info(MPI_COMM_WORLD, parallel::process_env());
  const GpuBinding gpu = bind_gpu_for_local_rank(where.local_rank);  // the binding train makes next
  return gpu.device < 0 ? 0 : int64_t(run_device_memory_gb(cfg.train, gpu.device) * 1e9);
}

std::unique_ptr<parallel::MpiCommunicator> world_communicator(parallel::MpiSession& session, const RunConfig& cfg,
                                                              const char* name) {
  if (session.world_size() == 1) return nullptr;
  parallel::CommOptions options;
  options.timeout = std::chrono::milliseconds(int64_t(cfg.train.timeout_s * 1000));
  options.monitor = &session.monitor();
  return std::make_unique<parallel::MpiCommunicator>(MPI_COMM_WORLD, name, options);
}

// World rank 0's checks of where train writes: refusals, and the flight folder's warning.
std::string train_location_problem(const RunConfig& cfg, bool uses_checkpoint_dir, std::vector<std::string>& warnings) {
  if (uses_checkpoint_dir) {
    if (auto p = directory_problem(cfg.checkpoint.dir, "checkpoint.dir"); !p.empty()) return p;
    // Room for one checkpoint (launch/process/checkpoint_space.h), or the run is lost at its first save.
    if (auto p = checkpoint_space_problem(cfg.checkpoint.dir, "checkpoint.dir " + cfg.checkpoint.dir,
                                          predicted_checkpoint_bytes(cfg), free_bytes_at(cfg.checkpoint.dir));
        !p.empty())
      return p;
  }
  if (!cfg.log.metrics_path.empty())
    if (auto p = output_file_problem(cfg.log.metrics_path, "log.metrics_path"); !p.empty()) return p;
  // Flight records go to <checkpoint.dir>/flight (just checked), else ./flight: written only for
  // a failure report, so an unwritable working directory is a warning, not a refusal.
  if (cfg.checkpoint.dir.empty())
    if (auto p = probe_write("."); !p.empty())
      warnings.push_back("warning: the flight-record folder ./flight cannot be created in the working directory (" +
                         p + "): a stall or error report would lack the ranks' flight records; start from a "
                             "writable directory or set checkpoint.dir");
  return "";
}

constexpr const char* kTrainMemoryAdvice =
    "Lower train.batch, model.seq_len, model.d_model, model.d_ff or model.layers; spread the model over more "
    "ranks (train.zero=1 shards the optimizer state, --tp splits the layers); or set train.memory_check=false "
    "to start anyway.";

}  // namespace

std::string directory_problem(const fs::path& dir, const std::string& what) {
  if (dir.empty()) return "";
  const std::string named = what + " " + shown_path(dir);
  if (const auto blocked = blocking_component(dir))
    return named + (blocked->first == dir ? " " : ": " + blocked->first.string() + " ") + blocked->second;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) return "cannot create " + named + ": " + errno_text(ec.value()) + name_length_hint(dir, ec.value());
  }
  if (const std::string p = probe_write(dir); !p.empty()) return "cannot write into " + named + ": " + p;
  return "";
}

std::string output_file_problem(const fs::path& file, const std::string& what) {
  if (file.empty()) return "";
  struct stat st {};
  if (::stat(file.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return what + " " + shown_path(file) + " is a directory, not a file";
    const int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return "cannot write " + what + " " + shown_path(file) + ": " + errno_text(errno);
    ::close(fd);
  }
  const fs::path parent = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  return directory_problem(parent, what + " " + shown_path(file) + ": its directory");
}

void preflight_outputs(parallel::Communicator& world, const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::string problem;
  if (world.rank() == 0)
    for (const auto& [what, path] : outputs)
      if (problem.empty()) problem = output_file_problem(path, what);
  agree_on_problem(&world, problem);
}

void refuse_unusable_directory(const fs::path& dir, const std::string& what) {
  if (const std::string p = directory_problem(dir, what); !p.empty()) throw parallel::LaunchRefused(p);
}

MemoryNeed train_memory_need(const RunConfig& cfg, int world_size, int world_rank) {
  const int tp = std::max(1, cfg.train.tp), dp_cp = std::max(1, world_size / tp), dp_cp_rank = world_rank / tp;
  const int elem_bytes = cfg.train.precision == "fp64" ? 8 : 4;
  // dp_cp, dp_cp_rank: the dp_cp group's (DP x CP); the layers hold N / train.cp tokens.
  MemoryPrediction m = predict_rank_memory(cfg.model, cfg.optim, cfg.train.batch, dp_cp, cfg.train.zero == 1,
                                           dp_cp_rank, elem_bytes, tp, std::max(1, cfg.train.cp));
  // Gradient accumulation (launch/train/grad_accum.h): every micro-step group's carried state
  // beside the model's own (a save copies the groups', so the snapshot below is generous by one).
  if (cfg.train.grad_accum > 1) m.carried_state *= int64_t{cfg.train.grad_accum} + 1;
  // A save copies parameters, optimizer state and carried state to the host (checkpoint.async
  // keeps that copy for the whole run; a synchronous save holds it while it writes).
  const int64_t snapshot = cfg.checkpoint.dir.empty() ? 0 : m.parameters + m.optimizer + m.carried_state;
  MemoryNeed need;
  if (cfg.train.device == "cuda") {
    const int64_t workspace =
        cuda_backend_workspace(core::chunk_config(cfg.model, std::max(1, cfg.train.cp)), cfg.train.batch,
                               cfg.train.precision == "bf16", tp, m.parameters).total();
    need.device = m.total() + workspace;
    need.device_parts = memory_parts(m) + ", CUDA backend workspace " + gib_text(workspace);
    need.host = snapshot;
    need.host_parts = "the host copy of the state a checkpoint save takes";
  } else {
    need.host = m.total() + snapshot;
    need.host_parts = memory_parts(m) + (snapshot > 0 ? ", checkpoint snapshot " + gib_text(snapshot) : "");
  }
  return need;
}

MemoryNeed inference_memory_need(const RunConfig& cfg, int streams, int tp) {
  MemoryPrediction m = predict_rank_memory(cfg.model, cfg.optim, streams, 1, false, 0, 4, tp);
  m.optimizer = 0;  // eval and generate build no optimizer
  MemoryNeed need;
  if (cfg.train.device == "cuda") {
    const int64_t workspace =
        cuda_backend_workspace(cfg.model, streams, cfg.train.precision == "bf16", tp, m.parameters).total();
    need.device = m.total() + workspace;
    need.device_parts = memory_parts(m) + ", CUDA backend workspace " + gib_text(workspace);
  } else {
    need.host = m.total();
    need.host_parts = memory_parts(m);
  }
  return need;
}

std::string memory_problem(const MemoryNeed& need, const MemoryBudget& host, int ranks_on_node, int64_t device_bytes,
                           const std::string& advice) {
  const int ranks = std::max(1, ranks_on_node);
  if (need.host > 0 && host.bytes >= 0 && need.host > host.bytes / ranks)
    return "not enough memory: this run needs " + gib_text(need.host) + " per rank (" + need.host_parts +
           "; predicted from the config, as brt-dist plan does), " + gib_text(host.bytes / ranks) +
           " available (" + host.source + (ranks > 1 ? " / " + std::to_string(ranks) + " ranks on this node" : "") +
           "). " + advice;
  if (need.device > 0 && device_bytes > 0 && need.device > device_bytes)
    return "not enough GPU memory: this run needs " + gib_text(need.device) + " per GPU (" + need.device_parts +
           "; predicted from the config, as brt-dist plan does), " + gib_text(device_bytes) +
           " available (the GPU's memory). " + advice;
  return "";
}

std::string thread_problem(const ThreadChoice& choice, const parallel::CpuShare& share) {
  const int cores = std::max(1, share.cores_in_mask);
  if (choice.threads <= kMaxThreadsPerCore * cores) return "";
  return "threads: " + std::to_string(choice.threads) + " per rank (" + choice.why + ") is more than " +
         std::to_string(kMaxThreadsPerCore) + " x the " + std::to_string(cores) + " core" + (cores == 1 ? "" : "s") +
         " this rank may run on (its affinity mask): OpenMP would start that many threads (libgomp crashes "
         "creating 100000, and far fewer take turns on the cores, each parallel loop waiting for the slowest: "
         "a step many times slower). Use at most " + std::to_string(kMaxThreadsPerCore * cores) +
         ", or leave train.threads = 0 and OMP_NUM_THREADS unset to fit the cores.";
}

std::string thread_warning(const ThreadChoice& choice, const parallel::CpuShare& share) {
  const int cores = std::max(1, share.cores_in_mask);
  if (choice.threads <= cores) return "";
  return "warning: threads: " + std::to_string(choice.threads) + " per rank (" + choice.why + ") on " +
         std::to_string(cores) + " core" + (cores == 1 ? "" : "s") +
         ": the threads take turns on the cores and every parallel loop waits for the last one; expect a "
         "slower step than with " + std::to_string(cores);
}

ThreadChoice preflight_threads(int configured, const parallel::CpuShare& share) {
  const ThreadChoice choice = choose_threads(configured, share);
  if (const std::string p = thread_problem(choice, share); !p.empty()) throw parallel::LaunchRefused(p);
  return choice;
}

void agree_on_problem(parallel::Communicator* world, const std::string& problem) {
  if (world == nullptr || world->size() == 1) {
    if (!problem.empty()) throw parallel::LaunchRefused(problem);
    return;
  }
  const int64_t refusing = world->all_reduce_value<int64_t>(problem.empty() ? 0 : 1);
  if (refusing == 0) return;
  // The lowest refusing rank speaks for all: max of (size − rank) over the refusing ranks.
  const int64_t first = world->size() - world->all_reduce_value<int64_t>(
                                            problem.empty() ? 0 : world->size() - world->rank(), parallel::ReduceOp::kMax);
  std::string message = problem;
  parallel::broadcast_string(*world, message, int(first));
  if (refusing > 1)
    message += " [" + std::to_string(refusing) + " of " + std::to_string(world->size()) +
               " ranks refused; world rank " + std::to_string(first) + "'s reason is shown]";
  throw parallel::LaunchRefused(message);
}

TrainPreflight preflight_train(parallel::MpiSession& session, const RunConfig& cfg, const ThreadChoice& run_threads,
                               const std::string& command) {
  const auto world = world_communicator(session, cfg, "world (preflight)");
  const bool rank0 = session.world_rank() == 0;
  const parallel::CpuShare share = parallel::query_cpu_share(MPI_COMM_WORLD);
  const int64_t device_bytes = cfg.train.memory_check ? device_memory_bytes(cfg) : 0;
  // --resume of a path that does not exist is refused by the resume plan (launch/train/checkpoint/resume.h) with
  // its own message before anything is written: checkpoint.dir (by default that path) is then
  // neither created nor locked here.
  std::error_code ec;
  const bool uses_checkpoint_dir = !cfg.checkpoint.dir.empty() &&
                                   (cfg.checkpoint.resume_from.empty() || fs::exists(cfg.checkpoint.resume_from, ec));
  std::vector<std::string> warnings;
  std::string problem;
  try {
    // What has no side effect first; then world rank 0 creates and probes the locations.
    const ThreadChoice threads = run_threads.threads > 0 ? run_threads : choose_threads(cfg.train.threads, share);
    problem = thread_problem(threads, share);
    if (problem.empty() && rank0)
      if (auto w = thread_warning(threads, share); !w.empty()) warnings.push_back(w);
    if (problem.empty() && cfg.train.memory_check)
      problem = memory_problem(train_memory_need(cfg, session.world_size(), session.world_rank()),
                               host_memory_budget(), share.local_size, device_bytes, kTrainMemoryAdvice);
    if (problem.empty() && rank0) problem = train_location_problem(cfg, uses_checkpoint_dir, warnings);
  } catch (const std::exception& e) {
    problem = e.what();
  }
  agree_on_problem(world.get(), problem);
  for (const auto& w : warnings) std::fprintf(stderr, "%s\n", w.c_str());
  TrainPreflight result;
  if (uses_checkpoint_dir) {
    result.checkpoint_lock =
        lock_checkpoint_dir(cfg.checkpoint.dir, cfg.checkpoint.lock_wait_s, command, world.get(), rank0);
    for (const auto& note : result.checkpoint_lock.notes) std::fprintf(stderr, "%s\n", note.c_str());
  }
  std::fflush(stderr);
  return result;
}

void preflight_inference_memory(parallel::Communicator& world, const RunConfig& cfg, int streams,
                                const std::string& command, const MemoryNeed& extra) {
  const std::string advice =
      (extra.host > 0 ? "Give shorter --lengths, " : "") +
      (command == "eval" ? std::string("Lower model.seq_len or --batch, use ") : std::string("Use ")) +
      "more ranks with --tp (it splits the model), or set train.memory_check=false to start anyway.";
  std::string problem;
  if (cfg.train.memory_check) {
    try {
      const int64_t device_bytes = device_memory_bytes(cfg);
      MemoryNeed need = inference_memory_need(cfg, streams, cfg.train.tp);
      if (extra.host > 0) {
        need.host += extra.host;
        need.host_parts += (need.host_parts.empty() ? "" : ", ") + extra.host_parts;
      }
      problem = memory_problem(need, host_memory_budget(),
                               parallel::query_cpu_share(MPI_COMM_WORLD).local_size, device_bytes, advice);
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  agree_on_problem(&world, problem);
}

std::string command_line_text(int argc, char** argv) {
  std::string out;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) out += ' ';
    out += argv[i];
  }
  return out;
}

}  // namespace brt::launch
