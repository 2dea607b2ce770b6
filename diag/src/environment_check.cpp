#include "ccscope/diag/environment_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>

#include "ccscope/common/text.h"
#include "ccscope/topo/nccl_env.h"

namespace ccscope::diag {
namespace {

using Variables = std::map<std::string, std::string>;

Variables variables_of(const RankEnvironment& rank) {
  return Variables(rank.variables.begin(), rank.variables.end());
}

std::optional<std::string> variable(const Variables& variables, const std::string& name) {
  const auto it = variables.find(name);
  if (it == variables.end()) return std::nullopt;
  return it->second;
}

topo::NcclEnvironment nccl_environment(const Variables& variables) {
  topo::NcclEnvironment env;
  for (const auto& [name, value] : variables)
    if (name.rfind("NCCL_", 0) == 0) env.emplace(name, value);
  return env;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// NCCL reads its boolean switches with strtoll base 0 (ncclLoadParam): "1" and
// "0x1" are on; the checks flag exactly NCCL's "1".
bool nccl_flag_is_one(const std::optional<std::string>& value) {
  return value.has_value() && std::strtoll(value->c_str(), nullptr, 0) == 1;
}

// "node1 (ranks 0-3), node2 (rank 4)": ranks in order, grouped by host in order
// of first appearance, runs of consecutive ranks joined.
std::string describe_ranks(std::vector<const RankEnvironment*> ranks) {
  std::sort(ranks.begin(), ranks.end(),
            [](const RankEnvironment* a, const RankEnvironment* b) { return a->rank < b->rank; });
  std::vector<std::string> hosts;
  std::map<std::string, std::vector<int>> ranks_of_host;
  for (const RankEnvironment* rank : ranks) {
    if (!ranks_of_host.count(rank->host)) hosts.push_back(rank->host);
    ranks_of_host[rank->host].push_back(rank->rank);
  }
  std::string text;
  for (const std::string& host : hosts) {
    const std::vector<int>& numbers = ranks_of_host[host];
    std::string list;
    for (size_t i = 0; i < numbers.size();) {
      size_t end = i;
      while (end + 1 < numbers.size() && numbers[end + 1] == numbers[end] + 1) ++end;
      if (!list.empty()) list += ",";
      list +=
          end == i ? std::to_string(numbers[i]) : fmt::format("{}-{}", numbers[i], numbers[end]);
      i = end + 1;
    }
    if (!text.empty()) text += ", ";
    text += fmt::format("{} (rank{} {})", host.empty() ? "?" : host, numbers.size() > 1 ? "s" : "",
                        list);
  }
  return text;
}

std::string join(const std::vector<std::string>& items, std::string_view separator = ", ") {
  std::string text;
  for (const std::string& item : items) {
    if (!text.empty()) text += separator;
    text += item;
  }
  return text;
}

// Ranks grouped by what a key gives them, groups in order of their first rank.
template <typename Key>
std::vector<std::pair<Key, std::vector<const RankEnvironment*>>> group_ranks(
    const std::vector<RankEnvironment>& ranks, const std::vector<Key>& keys) {
  std::vector<std::pair<Key, std::vector<const RankEnvironment*>>> groups;
  for (size_t i = 0; i < ranks.size(); ++i) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& group) { return group.first == keys[i]; });
    if (it == groups.end()) {
      groups.push_back({keys[i], {}});
      it = groups.end() - 1;
    }
    it->second.push_back(&ranks[i]);
  }
  return groups;
}

class Findings {
 public:
  void add(std::string name, Status status, const std::vector<const RankEnvironment*>& about,
           std::string message, std::string remedy) {
    Check check;
    check.stage = Stage::kCluster;
    check.name = std::move(name);
    check.status = status;
    std::set<std::string> hosts;
    for (const RankEnvironment* rank : about) hosts.insert(rank->host);
    if (hosts.size() == 1) check.host = *hosts.begin();
    if (about.size() == 1) check.rank = about.front()->rank;
    check.message = std::move(message);
    check.remedy = std::move(remedy);
    checks_.push_back(std::move(check));
  }
  std::vector<Check>& checks() { return checks_; }

 private:
  std::vector<Check> checks_;
};

// Interface names NCCL's default selection puts last or skips, and veth: none
// of them carries traffic between nodes on a real cluster. By name, as NCCL
// judges them (the virtual cluster's eth0 is a veth but not named so).
bool is_local_only_interface(const std::string& name) {
  for (const char* prefix : {"lo", "docker", "veth", "virbr"})
    if (starts_with(name, prefix)) return true;
  return false;
}

std::vector<std::string> interface_names(const std::vector<topo::Nic>& nics) {
  std::vector<std::string> names;
  for (const topo::Nic& nic : nics)
    if (nic.name.find(':') == std::string::npos) names.push_back(nic.name);
  return names;
}

std::vector<std::string> rdma_port_names(const std::vector<topo::Nic>& nics) {
  std::vector<std::string> names;
  for (const topo::Nic& nic : nics)
    if (nic.name.find(':') != std::string::npos) names.push_back(nic.name);
  return names;
}

// Per node and NCCL environment: the interfaces and HCAs the variables name,
// and whether they switch IB off.
void check_nics(const std::vector<RankEnvironment>& ranks, bool several_hosts, Findings& findings) {
  std::vector<std::pair<std::string, topo::NcclEnvironment>> keys;
  for (const RankEnvironment& rank : ranks)
    keys.emplace_back(rank.host, nccl_environment(variables_of(rank)));
  for (const auto& [key, group] : group_ranks(ranks, keys)) {
    const auto& [host, env] = key;
    const std::vector<topo::Nic>& nics = group.front()->nics;
    if (nics.empty()) continue;  // the node's NICs are unknown: nothing to judge against
    const std::string where = describe_ranks(group);

    const auto ifname = env.find("NCCL_SOCKET_IFNAME");
    const std::vector<std::string> sockets = topo::nccl_socket_interfaces(nics, env);
    // NCCL reads a one-character NCCL_SOCKET_IFNAME as unset (ncclFindInterfaces).
    if (ifname != env.end() && ifname->second.size() > 1 && sockets.empty()) {
      findings.add("env.socket_ifname", Status::kFail, group,
                   fmt::format("NCCL_SOCKET_IFNAME={} matches no running interface on {} (it "
                               "has: {})",
                               ifname->second, where, join(interface_names(nics))),
                   fmt::format("set NCCL_SOCKET_IFNAME to an interface of {} (ip -br link), or "
                               "unset it; NCCL fails to bootstrap without one",
                               host));
    } else if (several_hosts && !sockets.empty() &&
               std::all_of(sockets.begin(), sockets.end(), is_local_only_interface)) {
      const bool loopback_only = std::all_of(sockets.begin(), sockets.end(),
                                             [](const auto& n) { return starts_with(n, "lo"); });
      findings.add(
          "env.socket_ifname", loopback_only ? Status::kFail : Status::kWarn, group,
          fmt::format("NCCL's socket interfaces on {} are {} only{}: {}", where, join(sockets),
                      ifname != env.end() ? " (NCCL_SOCKET_IFNAME=" + ifname->second + ")" : "",
                      loopback_only ? "loopback cannot reach other nodes"
                                    : "container/virtual bridges rarely route between nodes"),
          fmt::format("set NCCL_SOCKET_IFNAME to {}'s interface on the cluster network "
                      "(ip -br addr)",
                      host));
    }

    const auto hca = env.find("NCCL_IB_HCA");
    const std::vector<std::string> ports = rdma_port_names(nics);
    if (hca != env.end() && !hca->second.empty()) {
      const topo::InterfaceFilter filter = topo::parse_interface_filter(hca->second);
      const bool any_match = std::any_of(ports.begin(), ports.end(), [&](const std::string& name) {
        const size_t colon = name.rfind(':');
        return filter.matches(name.substr(0, colon), std::atoi(name.c_str() + colon + 1));
      });
      if (!ports.empty() && !any_match)
        findings.add("env.ib_hca", Status::kFail, group,
                     fmt::format("NCCL_IB_HCA={} matches none of the RDMA ports of {} ({}): "
                                 "NCCL falls back to sockets",
                                 hca->second, where, join(ports)),
                     fmt::format("set NCCL_IB_HCA to devices of {} (ibv_devices, ibstat), or "
                                 "unset it",
                                 host));
    }

    // What NCCL picks as configured against what it would pick without the
    // switches that turn IB off.
    topo::NcclEnvironment without_switches = env;
    without_switches.erase("NCCL_IB_DISABLE");
    const auto net = env.find("NCCL_NET");
    const bool net_socket =
        net != env.end() && net->second.size() == 6 &&
        std::equal(net->second.begin(), net->second.end(), "socket",
                   [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
    if (net_socket) without_switches.erase("NCCL_NET");
    const topo::NetworkChoice configured = topo::choose_network(nics, env);
    const topo::NetworkChoice possible = topo::choose_network(nics, without_switches);
    const bool rdma_possible = possible.transport == topo::NetworkChoice::Transport::kInfiniband ||
                               possible.transport == topo::NetworkChoice::Transport::kRoce;
    if (rdma_possible && configured.transport != possible.transport) {
      findings.add("env.ib_disabled", Status::kWarn, group,
                   fmt::format("{} on {} with active {} ports ({}): NCCL uses {} instead",
                               configured.reason.substr(0, configured.reason.find(';')), where,
                               topo::transport_name(possible.transport), join(possible.devices),
                               topo::transport_name(configured.transport)),
                   "unset NCCL_IB_DISABLE / NCCL_NET=Socket unless sockets are wanted on purpose");
    }
  }
}

// Variables whose value is per rank or per node by nature, or judged elsewhere.
bool is_judged_for_mismatch(const std::string& name) {
  if (name == "CUDA_VISIBLE_DEVICES" || name == "NCCL_HOSTID" || name == "NCCL_DEBUG") return false;
  for (const char* prefix :
       {"CCSCOPE_TEST_", "OMPI_COMM_WORLD_", "OMPI_MCA_orte_", "OMPI_MCA_ess_", "OMPI_MCA_pmix",
        "OMPI_MCA_prte", "OMPI_FILE_LOCATION", "OMPI_FIRST_RANKS"})
    if (starts_with(name, prefix)) return false;
  return true;
}

// One "VALUE on WHERE" part per value, "unset" for ranks without it.
std::string describe_values(
    const std::vector<std::pair<std::optional<std::string>, std::vector<const RankEnvironment*>>>&
        groups,
    const std::string& empty_as = "\"\"") {
  std::vector<std::string> parts;
  for (const auto& [value, group] : groups) {
    const std::string shown = !value.has_value() ? "unset" : (value->empty() ? empty_as : *value);
    parts.push_back(fmt::format("{} on {}", shown, describe_ranks(group)));
  }
  return join(parts, "; ");
}

void check_variables(const std::vector<RankEnvironment>& ranks,
                     const std::vector<Variables>& variables, Findings& findings) {
  std::set<std::string> names;
  for (const Variables& of_rank : variables)
    for (const auto& [name, value] : of_rank) names.insert(name);

  const auto values_of = [&](const std::string& name) {
    std::vector<std::optional<std::string>> values;
    for (const Variables& of_rank : variables) values.push_back(variable(of_rank, name));
    return group_ranks(ranks, values);
  };

  for (const std::string& name : names) {
    if (!is_judged_for_mismatch(name)) continue;
    const auto groups = values_of(name);
    if (groups.size() < 2) continue;
    findings.add("env.variable_mismatch", Status::kWarn, {},
                 fmt::format("{} differs between ranks: {}", name, describe_values(groups)),
                 fmt::format("set {} alike on every rank (export it in the job script; "
                             "mpiexec -x / -genv, srun --export)",
                             name));
  }

  const auto debug = values_of("NCCL_DEBUG");
  if (debug.size() > 1)
    findings.add("env.nccl_debug", Status::kWarn, {},
                 fmt::format("NCCL_DEBUG is not alike on every rank: {}; the NCCL log shows "
                             "only part of the cluster",
                             describe_values(debug)),
                 "set NCCL_DEBUG (e.g. INFO) on every rank, or on none");

  for (const auto& [name, check_name, what] :
       {std::tuple{"NCCL_P2P_DISABLE", "env.p2p_disabled",
                   "GPUs of a node talk through host memory instead of NVLink/PCIe P2P"},
        std::tuple{"NCCL_SHM_DISABLE", "env.shm_disabled",
                   "ranks of a node without P2P talk through the network instead of shared "
                   "memory"}}) {
    std::vector<const RankEnvironment*> set_to_one;
    for (size_t i = 0; i < ranks.size(); ++i)
      if (nccl_flag_is_one(variable(variables[i], name))) set_to_one.push_back(&ranks[i]);
    if (set_to_one.empty()) continue;
    findings.add(check_name, Status::kWarn, set_to_one,
                 fmt::format("{}=1 on {}: {} (slower)", name, describe_ranks(set_to_one), what),
                 fmt::format("unset {} unless you are isolating a transport on purpose", name));
  }
}

// The GPU a rank uses: gpu_in_use, else CUDA_VISIBLE_DEVICES' entry for its
// local rank (ccscope picks visible device local_rank % count); "" unknown.
std::string gpu_of(const RankEnvironment& rank, const Variables& variables, std::string* source) {
  if (!rank.gpu_in_use.empty()) {
    *source = "GPU";
    return rank.gpu_in_use;
  }
  const std::optional<std::string> visible = variable(variables, "CUDA_VISIBLE_DEVICES");
  if (!visible.has_value() || rank.gpu_uuids.empty()) return "";
  std::vector<std::string> devices;
  for (const std::string& item : split(*visible, ','))
    if (const std::string_view device = trimmed(item); !device.empty())
      devices.emplace_back(device);
  if (devices.empty()) return "";
  *source = "CUDA_VISIBLE_DEVICES entry";
  return devices[static_cast<size_t>(rank.local_rank) % devices.size()];
}

void check_gpu_sharing(const std::vector<RankEnvironment>& ranks,
                       const std::vector<Variables>& variables, Findings& findings) {
  std::vector<std::pair<std::string, std::string>> keys;  // (host, GPU)
  std::vector<std::string> sources;
  for (size_t i = 0; i < ranks.size(); ++i) {
    std::string source;
    std::string gpu = gpu_of(ranks[i], variables[i], &source);
    // A rank without a known GPU shares nothing: give it a key of its own.
    keys.emplace_back(ranks[i].host, gpu.empty() ? "\n" + std::to_string(i) : gpu);
    sources.push_back(source);
  }
  for (const auto& [key, group] : group_ranks(ranks, keys)) {
    if (group.size() < 2) continue;
    std::set<std::string> host_ids;
    bool every_rank_has_one = true;
    for (const RankEnvironment* rank : group) {
      const auto id = variable(variables[static_cast<size_t>(rank - ranks.data())], "NCCL_HOSTID");
      if (!id.has_value() || id->empty())
        every_rank_has_one = false;
      else
        host_ids.insert(*id);
    }
    const bool isolated = every_rank_has_one && host_ids.size() == group.size();
    const std::string& source = sources[static_cast<size_t>(group.front() - ranks.data())];
    const std::string seen =
        fmt::format("{} share one GPU ({} {})", describe_ranks(group), source, key.second);
    if (isolated)
      findings.add("env.gpu_shared", Status::kWarn, group,
                   seen +
                       ", each with its own NCCL_HOSTID: NCCL connects them over sockets "
                       "(--isolate-ranks), so their bandwidth is not the GPU's",
                   "for real figures give each rank its own GPU");
    else
      findings.add("env.gpu_shared", Status::kFail, group,
                   seen + ": NCCL refuses two ranks on one GPU (\"Duplicate GPU detected\")",
                   "give each local rank its own GPU (CUDA_VISIBLE_DEVICES per local rank, or "
                   "fewer ranks per node), or a NCCL_HOSTID per rank (ccscope --isolate-ranks) "
                   "to test on one GPU");
  }
}

void check_versions(const std::vector<RankEnvironment>& ranks, Findings& findings) {
  struct Version {
    const char* check_name;
    const char* what;
    Status status;
    std::string RankEnvironment::*field;
    const char* remedy;
  };
  for (const Version& version :
       {Version{"env.nccl_version", "NCCL", Status::kFail, &RankEnvironment::nccl_version,
                "run one NCCL build on every node (LD_LIBRARY_PATH, the container image); "
                "NCCL versions may not talk to each other"},
        Version{"env.mpi_version", "the MPI library", Status::kWarn, &RankEnvironment::mpi_library,
                "run one MPI installation on every node (PATH, LD_LIBRARY_PATH, the image)"},
        Version{"env.ccscope_version", "ccscope", Status::kWarn, &RankEnvironment::ccscope_version,
                "install one ccscope build on every node (a shared file system or the image)"}}) {
    std::vector<std::optional<std::string>> values;
    for (const RankEnvironment& rank : ranks) values.push_back(rank.*(version.field));
    const auto groups = group_ranks(ranks, values);
    if (groups.size() < 2) continue;
    findings.add(
        version.check_name, version.status, {},
        fmt::format("{} differs between ranks: {}", version.what, describe_values(groups, "none")),
        version.remedy);
  }
}

}  // namespace

std::vector<Check> check_environment(const std::vector<RankEnvironment>& ranks) {
  Findings findings;
  if (ranks.empty()) {
    findings.add("env.consistent", Status::kSkip, {}, "no rank environments gathered", "");
    return std::move(findings.checks());
  }
  std::vector<Variables> variables;
  std::set<std::string> hosts;
  for (const RankEnvironment& rank : ranks) {
    variables.push_back(variables_of(rank));
    hosts.insert(rank.host);
  }
  check_nics(ranks, hosts.size() > 1, findings);
  check_variables(ranks, variables, findings);
  check_gpu_sharing(ranks, variables, findings);
  check_versions(ranks, findings);
  if (findings.checks().empty())
    findings.add("env.consistent", Status::kPass, {},
                 fmt::format("{} rank{} on {} node{}: variables, versions, interfaces, HCAs and "
                             "GPUs per rank agree",
                             ranks.size(), ranks.size() > 1 ? "s" : "", hosts.size(),
                             hosts.size() > 1 ? "s" : ""),
                 "");
  return std::move(findings.checks());
}

}  // namespace ccscope::diag
