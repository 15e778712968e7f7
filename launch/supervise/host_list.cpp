#include "launch/supervise/host_list.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace brt::launch {

namespace {

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// srun --export=LIST: NONE becomes the variable alone (srun adds SLURM_*), a list without ALL
// gets it appended; ALL (the default) carries it already.
void forward_srun_export(std::vector<std::string>& out, const std::string& name) {
  for (size_t i = 1; i < out.size(); ++i) {
    std::string* list = nullptr;
    if (out[i].rfind("--export=", 0) == 0) {
      list = &out[i];
    } else if (out[i] == "--export" && i + 1 < out.size()) {
      list = &out[++i];
    } else {
      continue;
    }
    const size_t eq = list->rfind("--export=", 0) == 0 ? 9 : 0;
    const std::string value = list->substr(eq);
    if (value.rfind("ALL", 0) == 0) return;
    *list = list->substr(0, eq) + (value == "NONE" ? name : value + "," + name);
    return;
  }
}

}  // namespace

std::vector<HostSlots> parse_host_list(std::string_view text) {
  std::vector<HostSlots> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string_view entry = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (entry.empty()) throw std::invalid_argument("host list '" + std::string(text) + "': an empty entry");
    HostSlots h;
    const size_t colon = entry.find(':');
    h.name = std::string(entry.substr(0, colon));
    if (colon != std::string_view::npos) {
      const std::string n(entry.substr(colon + 1));
      char* end = nullptr;
      const long slots = std::strtol(n.c_str(), &end, 10);
      if (n.empty() || *end != '\0' || slots < 1 || slots > 100000)
        throw std::invalid_argument("host list '" + std::string(text) + "': '" + std::string(entry) +
                                    "' needs a slot count >= 1 after the colon");
      h.slots = int(slots);
    }
    if (h.name.empty()) throw std::invalid_argument("host list '" + std::string(text) + "': an entry without a host");
    out.push_back(h);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string host_list_text(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const HostSlots& h : hosts) out += (out.empty() ? "" : ",") + h.name + ":" + std::to_string(h.slots);
  return out;
}

std::optional<CommandHosts> find_command_hosts(const std::vector<std::string>& command) {
  if (command.empty()) return std::nullopt;
  const std::string name = base_name(command[0]);
  if (name != "mpirun" && name != "mpiexec" && name != "orterun") return std::nullopt;
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& a = command[i];
    CommandHosts where;
    if ((a == "--host" || a == "-host" || a == "-H" || a == "--H") && i + 1 < command.size()) {
      where.value_index = i + 1;
    } else if (a.rfind("--host=", 0) == 0) {
      where.value_index = i;
      where.prefix = 7;
    } else {
      continue;
    }
    where.hosts = parse_host_list(std::string_view(command[where.value_index]).substr(where.prefix));
    return where;
  }
  return std::nullopt;
}

std::vector<std::string> with_command_hosts(std::vector<std::string> command, const CommandHosts& where,
                                            const std::vector<HostSlots>& hosts) {
  std::string& word = command.at(where.value_index);
  word = word.substr(0, where.prefix) + host_list_text(hosts);
  return command;
}

std::optional<CommandRanks> find_command_ranks(const std::vector<std::string>& command) {
  if (command.empty()) return std::nullopt;
  const std::string name = base_name(command[0]);
  if (name != "mpirun" && name != "mpiexec" && name != "orterun") return std::nullopt;
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& a = command[i];
    CommandRanks where;
    if ((a == "-np" || a == "-n" || a == "--np" || a == "--n" || a == "-c") && i + 1 < command.size()) {
      where.value_index = i + 1;
    } else if (a.rfind("--np=", 0) == 0 || a.rfind("--n=", 0) == 0) {
      where.value_index = i;
      where.prefix = a.find('=') + 1;
    } else {
      continue;
    }
    const std::string value = command[where.value_index].substr(where.prefix);
    char* end = nullptr;
    const long n = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || n < 1) return std::nullopt;
    where.ranks = int(n);
    return where;
  }
  return std::nullopt;
}

std::vector<std::string> with_command_ranks(std::vector<std::string> command, const CommandRanks& where, int ranks) {
  std::string& word = command.at(where.value_index);
  word = word.substr(0, where.prefix) + std::to_string(ranks);
  return command;
}

std::optional<std::vector<std::string>> with_srun_exclude(const std::vector<std::string>& command,
                                                          const std::string& host, std::string& excluded) {
  if (command.empty() || base_name(command[0]) != "srun") return std::nullopt;
  std::vector<std::string> out = command;
  for (size_t i = 1; i < out.size(); ++i) {
    std::string* list = nullptr;
    size_t prefix = 0;
    if (out[i].rfind("--exclude=", 0) == 0) {
      list = &out[i];
      prefix = 10;
    } else if ((out[i] == "-x" || out[i] == "--exclude") && i + 1 < out.size()) {
      list = &out[i + 1];
    }
    if (list == nullptr) continue;
    *list += "," + host;
    excluded = list->substr(prefix);
    return out;
  }
  out.insert(out.begin() + 1, "--exclude=" + host);
  excluded = host;
  return out;
}

namespace {

// The value of srun option `word` (short `-X` taking the next word, or `--long=V`/`--long V`):
// its index and prefix, or false.
bool srun_value(const std::vector<std::string>& command, size_t& i, const char* short_flag, const char* long_flag,
                size_t& index, size_t& prefix) {
  const std::string& a = command[i];
  const std::string long_eq = std::string(long_flag) + "=";
  if ((a == short_flag || a == long_flag) && i + 1 < command.size()) {
    index = ++i;
    prefix = 0;
    return true;
  }
  if (a.rfind(long_eq, 0) == 0) {
    index = i;
    prefix = long_eq.size();
    return true;
  }
  return false;
}

}  // namespace

std::optional<SrunShape> find_srun_shape(const std::vector<std::string>& command) {
  if (command.empty() || base_name(command[0]) != "srun") return std::nullopt;
  SrunShape shape;
  for (size_t i = 1; i < command.size(); ++i) {
    if (base_name(command[i]) == "brt-dist") break;
    size_t index = 0, prefix = 0;
    if (srun_value(command, i, "-N", "--nodes", index, prefix)) {
      shape.nodes_index = index;
      shape.nodes_prefix = prefix;
      shape.nodes = std::atoi(command[index].c_str() + prefix);
    } else if (srun_value(command, i, "-n", "--ntasks", index, prefix)) {
      shape.tasks_index = index;
      shape.tasks_prefix = prefix;
      shape.tasks = std::atoi(command[index].c_str() + prefix);
    } else if (srun_value(command, i, "--ntasks-per-node", "--ntasks-per-node", index, prefix)) {
      shape.per_node = std::max(1, std::atoi(command[index].c_str() + prefix));
    }
  }
  return shape;
}

std::vector<std::string> with_srun_size(std::vector<std::string> command, const SrunShape& shape, int nodes, int ranks) {
  if (shape.nodes_index > 0) {
    std::string& w = command[shape.nodes_index];
    w = w.substr(0, shape.nodes_prefix) + std::to_string(nodes);
  }
  if (shape.tasks_index > 0) {
    std::string& w = command[shape.tasks_index];
    w = w.substr(0, shape.tasks_prefix) + std::to_string(ranks);
  }
  return command;
}

std::vector<std::string> with_last_override(std::vector<std::string> command, const std::string& key,
                                            const std::string& value) {
  const std::string prefix = key + "=";
  command.erase(std::remove_if(command.begin() + 1, command.end(),
                               [&](const std::string& w) { return w.rfind(prefix, 0) == 0; }),
                command.end());
  command.push_back(prefix + value);
  return command;
}

std::vector<std::string> with_variable_forwarded(const std::vector<std::string>& command, const std::string& name,
                                                 std::string& note) {
  std::vector<std::string> out = command;
  if (out.empty()) return out;
  const std::string launcher = base_name(out[0]);
  if (launcher == "mpirun" || launcher == "mpiexec" || launcher == "orterun") {
    const bool env_list = std::getenv("OMPI_MCA_mca_base_env_list") != nullptr ||
                          std::any_of(out.begin(), out.end(), [](const std::string& a) {
                            return a.find("mca_base_env_list") != std::string::npos;
                          });
    if (env_list) {
      note = "the command sets mca_base_env_list, which refuses -x beside it: add " + name +
             " to it, or ranks on other hosts do not see it";
      return out;
    }
    out.insert(out.begin() + 1, {"-x", name});
  } else if (launcher == "srun") {
    forward_srun_export(out, name);
  }
  return out;
}

}  // namespace brt::launch
