// Every rank of a job runs the same resolved config (docs/reliability.md
// "Preflight"). An mpirun app context or a per-rank override that gives one rank another
// model.d_model crashes inside MPI (the ranks' buffers differ), another optim.lr or
// model.window trains replicas that silently diverge, another train.steps ends only at the
// collective timeout. So before any collective whose sizes depend on the config, each rank
// hashes its resolved config (every key's value in config_keys() order: independent of how it
// was written) and the hashes are all-gathered; if they differ, each distinct config's text is
// broadcast from the first rank holding it, and every rank refuses alike — one message naming
// every differing key and which world ranks have which value, exit status 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launch/config/config.h"

namespace brt::parallel {
class Communicator;
class MpiSession;
}

namespace brt::launch {

// "section.key = value\n" for every key of config_keys(), in order.
std::string canonical_config_text(const RunConfig& config);
// FNV-1a, 64 bits.
uint64_t config_hash(const std::string& canonical_text);

// One distinct config and the world ranks that run it.
struct RankConfig {
  std::string canonical_text;
  std::vector<int> world_ranks;
};
// The refusal naming each key whose value differs between `configs` (at most 16 keys shown),
// e.g. "model.d_model: 32 on world rank 0; 64 on world rank 1".
std::string describe_config_differences(const std::vector<RankConfig>& configs);
// "0", "0-3", "0,2,5-7".
std::string rank_list_text(const std::vector<int>& ranks);

// Collective over `world`: every rank's `mine`, as the distinct texts and the world ranks holding
// each (in rank order of first appearance); every rank gets the same list. One hash per rank is
// all-gathered, then each distinct text broadcast once from its first rank.
std::vector<RankConfig> distinct_texts(parallel::Communicator& world, const std::string& mine);

// Collective over MPI_COMM_WORLD (a communicator of its own, under train.timeout_s); nothing
// with one process. Throws parallel::LaunchRefused on every rank when the configs differ.
void agree_on_config(parallel::MpiSession& session, const RunConfig& config);

}  // namespace brt::launch
