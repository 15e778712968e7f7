// Which run a metrics file belongs to (docs/training.md, "Runs"). Every run has an id — its UTC
// start time and a short hash, "20261203-172501-3fa9c2" — that every metrics record carries with
// its wall-clock time, so runs that share a folder stay apart in the file and in the plots.
// A run resumed from a checkpoint keeps the id of the file it was writing; any other start
// finding another run's records moves them aside (metrics.<their id>.jsonl, and the resolved
// config beside them) instead of appending to them.
#pragma once

#include <string>

namespace brt::launch {

// A new id: UTC start time (seconds) and 6 hex digits of a hash of `salt`, the time in
// nanoseconds, the host and the process.
std::string new_run_id(const std::string& salt);

// The run_id of the last record of `metrics_path` that has one: "" for no file or a file without
// ids (written before runs had them), "-" for a file with records but no id.
std::string metrics_file_run(const std::string& metrics_path);

struct MetricsRun {
  std::string id;             // the id this start writes its records with
  bool continued = false;     // a resumed run appending to its own file
  std::string moved_to;       // another run's records moved here ("" when nothing was moved)
};

// Settles the run id for a start: `resumed` and the file's last id known → continue it; else a
// new id, and another run's non-empty file (and its .config.toml) renamed to
// <stem>.<its id>.jsonl first (a numbered suffix if that exists). Throws naming the file and the
// reason if it cannot be renamed.
MetricsRun settle_metrics_run(const std::string& metrics_path, bool resumed, const std::string& salt);

// runs/x/metrics.jsonl -> runs/x/metrics.config.toml: the resolved config beside the metrics.
std::string config_path_beside(const std::string& metrics_path);

}  // namespace brt::launch
