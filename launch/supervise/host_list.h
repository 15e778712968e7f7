// The hosts of a launcher's command line, and the command relaunched on others: mpirun's
// `--host` / `-host` / `-H` list ("h1:2,h2:2", a host's slots after the colon, 1 without), and
// the hosts to check and replace after a fault (launch/supervise/restarts.h). Hostfiles and
// srun's allocation are not rewritten here: a command without a host list relaunches as it was.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace brt::launch {

struct HostSlots {
  std::string name;
  int slots = 1;
  bool operator==(const HostSlots&) const = default;
};

// "h1:2,h2" -> {h1, 2}, {h2, 1}; throws std::invalid_argument naming a bad entry.
std::vector<HostSlots> parse_host_list(std::string_view text);
std::string host_list_text(const std::vector<HostSlots>& hosts);

// Where a launcher command names its hosts: the index of the list's value, or nullopt.
struct CommandHosts {
  size_t value_index = 0;     // command[value_index] is "h1:1,h2:1" (or "--host=h1:1,h2:1")
  size_t prefix = 0;          // characters before the list in that word ("--host=": 7)
  std::vector<HostSlots> hosts;
};
std::optional<CommandHosts> find_command_hosts(const std::vector<std::string>& command);
// `command` with its host list replaced by `hosts`.
std::vector<std::string> with_command_hosts(std::vector<std::string> command, const CommandHosts& where,
                                            const std::vector<HostSlots>& hosts);

// mpirun's rank count (`-np N`, `-n N`, `--np N`, `-c N`, `--np=N`, `--n=N`): where its value is and
// the count; nullopt without one (mpirun then starts one rank per slot).
struct CommandRanks {
  size_t value_index = 0, prefix = 0;
  int ranks = 0;
};
std::optional<CommandRanks> find_command_ranks(const std::vector<std::string>& command);
std::vector<std::string> with_command_ranks(std::vector<std::string> command, const CommandRanks& where, int ranks);
// `command` with the environment variable `name` (the heartbeat's interval, the attempt's number)
// carried to the ranks: mpirun/mpiexec/orterun get `-x NAME` after their name (Open MPI passes
// only named variables to other hosts) unless the command sets mca_base_env_list (which refuses
// -x beside it); srun's --export list gets the name when it is a list without ALL. `note` says
// when the variable cannot be carried.
std::vector<std::string> with_variable_forwarded(const std::vector<std::string>& command, const std::string& name,
                                                 std::string& note);

// srun's excluded nodes (`--exclude=LIST`, `-x LIST`) with `host` added (inserted after srun's
// name when it has none): the relaunch's step avoids the host inside the same allocation.
// nullopt when `command` is not srun.
std::optional<std::vector<std::string>> with_srun_exclude(const std::vector<std::string>& command,
                                                          const std::string& host, std::string& excluded);

// srun's size, from its options (before the program, a word ending in brt-dist): nodes
// (`-N N`, `--nodes=N`), tasks (`-n N`, `--ntasks=N`) and tasks per node (`--ntasks-per-node=K`,
// 1 without). nullopt when `command` is not srun.
struct SrunShape {
  size_t nodes_index = 0, nodes_prefix = 0, tasks_index = 0, tasks_prefix = 0;  // 0: not given
  int nodes = 0, tasks = 0, per_node = 1;
  int ranks() const { return tasks > 0 ? tasks : nodes * per_node; }
};
std::optional<SrunShape> find_srun_shape(const std::vector<std::string>& command);
// `command` on `nodes` nodes and `ranks` tasks (each given where srun had it).
std::vector<std::string> with_srun_size(std::vector<std::string> command, const SrunShape& shape, int nodes, int ranks);

// `command` with `key=value` as its last word, an earlier `key=...` word removed (the launched
// program's last override wins: brt-dist train's config overrides).
std::vector<std::string> with_last_override(std::vector<std::string> command, const std::string& key,
                                            const std::string& value);

}  // namespace brt::launch
