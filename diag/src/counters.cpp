#include "ccscope/diag/counters.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "ccscope/common/small_file.h"
#include "ccscope/common/statistics.h"
#include "ccscope/common/text.h"

namespace ccscope::diag {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kHeader = "ccscope-counters 1";
constexpr double kModifiedZ = 3.5;

// The port counters (IBA PortCounters, as the kernel names them) that only
// move on errors.
constexpr std::array<const char*, 11> kPortErrorCounters = {
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_xmit_discards",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "port_rcv_constraint_errors",
    "port_xmit_constraint_errors",
    "VL15_dropped",
};
// These say the link went down or retrained under the traffic: FAIL.
constexpr std::array<const char*, 2> kLinkLossCounters = {"link_downed", "link_error_recovery"};

// hw_counters hold traffic and congestion counts too (ECN marks, CNPs):
// only names that say error, loss or retry count.
bool is_error_counter_name(std::string_view name) {
  for (std::string_view word : {"err", "discard", "drop", "timeout", "retr", "out_of_buffer",
                                "out_of_sequence", "duplicate"})
    if (name.find(word) != std::string_view::npos) return true;
  return false;
}

bool has_space(std::string_view text) {
  return text.empty() || std::any_of(text.begin(), text.end(), [](char c) {
           return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0';
         });
}

std::optional<uint64_t> parse_count(std::string_view text) {
  text = trimmed(text);
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// Sorted entry names of a directory; none when it is absent or unreadable.
std::vector<std::string> entries(const fs::path& directory) {
  std::vector<std::string> names;
  std::error_code error;
  if (!fs::is_directory(directory, error)) return names;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void read_counter(const fs::path& path, const std::string& key, CounterSnapshot& snapshot) {
  std::error_code error;
  if (has_space(key) || !fs::is_regular_file(path, error)) return;
  if (const auto value = parse_count(read_small_file(path, 64))) snapshot.values[key] = *value;
}

// "Prefix: name name ..." then "Prefix: value value ..." blocks, as
// /proc/net/snmp and /proc/net/netstat write them.
void read_proc_table(const fs::path& path, std::string_view prefix, std::string_view key_prefix,
                     bool (*wanted)(std::string_view), CounterSnapshot& snapshot) {
  std::istringstream in(read_small_file(path, 1 << 20));
  std::optional<std::string> header;  // the names line, waiting for its values line
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || std::string_view(line).substr(0, colon) != prefix) continue;
    if (!header) {
      header = line.substr(colon + 1);
      continue;
    }
    std::istringstream names(*header), values(line.substr(colon + 1));
    header.reset();
    std::vector<std::pair<std::string, std::string>> fields;
    std::string name, value;
    while (names >> name) {
      if (!(values >> value)) {
        fields.clear();  // fewer values than names: not this table's layout
        break;
      }
      fields.emplace_back(name, value);
    }
    if (values >> value) continue;  // more values than names
    for (const auto& [field, text] : fields) {
      if (!wanted(field) || has_space(field)) continue;
      if (const auto count = parse_count(text))
        snapshot.values[std::string(key_prefix) + field] = *count;
    }
  }
}

bool any_tcp_field(std::string_view) { return true; }
bool retransmission_field(std::string_view field) {
  for (std::string_view word : {"Retrans", "Lost", "Timeouts", "Loss"})
    if (field.find(word) != std::string_view::npos) return true;
  return false;
}

bool is_tcp_key(std::string_view key) {
  return key.starts_with("tcp/") || key.starts_with("tcpext/");
}

// after - before; a counter that went down was reset in between: its after
// value is what is known to have happened since.
std::optional<uint64_t> delta(const CounterSnapshot& before, const CounterSnapshot& after,
                              const std::string& key, bool reset_counts) {
  const auto b = before.values.find(key);
  const auto a = after.values.find(key);
  if (b == before.values.end() || a == after.values.end()) return std::nullopt;
  if (a->second >= b->second) return a->second - b->second;
  if (reset_counts) return a->second;
  return std::nullopt;
}

std::string percent(double rate) { return fmt::format("{:.2f}%", 100 * rate); }

void ib_checks(const std::vector<std::string>& hosts, const std::vector<CounterSnapshot>& before,
               const std::vector<CounterSnapshot>& after, std::vector<Check>& checks) {
  size_t ports = 0;
  std::set<size_t> nodes_with_ports;
  std::vector<Check> found;
  for (size_t node = 0; node < hosts.size(); ++node) {
    // "dev/port" -> its counters that moved, in key order.
    std::map<std::string, std::vector<std::pair<std::string, uint64_t>>> moved_by_port;
    std::set<std::string> node_ports;
    for (const auto& [key, value] : after[node].values) {
      if (is_tcp_key(key)) continue;
      const size_t first = key.find('/');
      const size_t second = first == std::string::npos ? first : key.find('/', first + 1);
      if (second == std::string::npos) continue;
      const std::string port = key.substr(0, second);
      node_ports.insert(port);
      const auto moved = delta(before[node], after[node], key, true);
      if (moved && *moved > 0) moved_by_port[port].emplace_back(key.substr(second + 1), *moved);
    }
    ports += node_ports.size();
    if (!node_ports.empty()) nodes_with_ports.insert(node);
    for (const auto& [port, moved] : moved_by_port) {
      Check check;
      check.stage = Stage::kCluster;
      check.name = "cluster.ib_port_errors";
      check.host = hosts[node];
      check.status = Status::kWarn;
      check.expected = 0;
      std::string list;
      double total = 0;
      for (const auto& [counter, count] : moved) {
        list += fmt::format("{}{} +{}", list.empty() ? "" : ", ", counter, count);
        total += static_cast<double>(count);
        for (const char* link_loss : kLinkLossCounters)
          if (counter == link_loss) check.status = Status::kFail;
      }
      check.measured = total;
      const size_t slash = port.find('/');
      check.message = fmt::format("{} port {}: error counters moved during the measurement: {}",
                                  port.substr(0, slash), port.substr(slash + 1), list);
      check.remedy =
          check.status == Status::kFail
              ? "the link went down or retrained under load: reseat or replace the cable or "
                "transceiver, check the switch port (ibstat, ibdiagnet); then re-run"
              : "a marginal link: check the cable, transceiver and switch port (perfquery, "
                "ibdiagnet; port_xmit_discards alone often means congestion or a stalled peer); "
                "then re-run";
      found.push_back(check);
    }
  }
  Check summary;
  summary.stage = Stage::kCluster;
  summary.name = "cluster.ib_port_errors";
  if (ports == 0) {
    summary.status = Status::kSkip;
    summary.message = "no InfiniBand ports on any node";
    checks.push_back(summary);
  } else if (found.empty()) {
    summary.status = Status::kPass;
    summary.measured = 0;
    summary.expected = 0;
    summary.message = fmt::format("no error counter moved on {} InfiniBand ports of {} nodes",
                                  ports, nodes_with_ports.size());
    checks.push_back(summary);
  } else {
    checks.insert(checks.end(), found.begin(), found.end());
  }
}

void tcp_checks(const std::vector<std::string>& hosts, const std::vector<CounterSnapshot>& before,
                const std::vector<CounterSnapshot>& after, const CounterOptions& options,
                std::vector<Check>& checks) {
  struct Rate {
    size_t node;
    uint64_t retransmitted, sent;
    double rate;
  };
  std::vector<Rate> rates;
  size_t with_counters = 0;
  for (size_t node = 0; node < hosts.size(); ++node) {
    const auto retransmitted = delta(before[node], after[node], "tcp/RetransSegs", false);
    const auto sent = delta(before[node], after[node], "tcp/OutSegs", false);
    if (after[node].values.count("tcp/OutSegs")) ++with_counters;
    if (!retransmitted || !sent || *sent < std::max<uint64_t>(options.min_segments, 1)) continue;
    rates.push_back({node, *retransmitted, *sent,
                     static_cast<double>(*retransmitted) / static_cast<double>(*sent)});
  }
  Check summary;
  summary.stage = Stage::kCluster;
  summary.name = "cluster.tcp_retransmissions";
  summary.unit = "%";
  if (rates.empty()) {
    summary.status = Status::kSkip;
    summary.message =
        with_counters == 0
            ? "no node has TCP counters (/proc/net/snmp)"
            : fmt::format(
                  "too little TCP traffic to judge (under {} segments sent per node; the "
                  "measurement went over InfiniBand or shared memory)",
                  options.min_segments);
    checks.push_back(summary);
    return;
  }
  std::vector<double> values;
  for (const Rate& rate : rates) values.push_back(rate.rate);
  const double center = median(values);
  const double mad = median_absolute_deviation(values);
  std::vector<Check> found;
  for (const Rate& rate : rates) {
    const bool absolute = rate.rate >= options.retransmission_rate;
    const bool stands_out = (mad > 0 ? kModifiedZScale * (rate.rate - center) / mad > kModifiedZ
                                     : rate.rate > center) &&
                            rate.rate >= options.outlier_factor * center &&
                            rate.rate >= options.outlier_floor_rate;
    if (!absolute && !stands_out) continue;
    std::string evidence;
    for (const auto& [key, value] : after[rate.node].values) {
      if (!key.starts_with("tcpext/")) continue;
      const auto moved = delta(before[rate.node], after[rate.node], key, false);
      if (moved && *moved > 0)
        evidence += fmt::format("{}{} +{}", evidence.empty() ? "" : ", ", key.substr(7), *moved);
    }
    Check check = summary;
    check.status = Status::kWarn;
    check.host = hosts[rate.node];
    check.measured = 100 * rate.rate;
    check.expected = 100 * center;
    check.message = fmt::format(
        "retransmitted {} of its TCP segments ({} of {}) during the measurement; median {} over "
        "{} nodes{}",
        percent(rate.rate), rate.retransmitted, rate.sent, percent(center), rates.size(),
        evidence.empty() ? "" : " (" + evidence + ")");
    check.remedy =
        "packet loss on the path out of this node: check its link (ethtool -S errors and drops, "
        "cable, switch port), MTU and any tc qdisc (tc -s qdisc); loss into a node shows as "
        "retransmissions of the nodes sending to it";
    found.push_back(check);
  }
  if (found.empty()) {
    summary.status = Status::kPass;
    summary.measured = 100 * center;
    summary.expected = std::numeric_limits<double>::quiet_NaN();
    summary.message =
        fmt::format("median retransmission rate {} over {} nodes, highest {}", percent(center),
                    rates.size(), percent(*std::max_element(values.begin(), values.end())));
    checks.push_back(summary);
  } else {
    checks.insert(checks.end(), found.begin(), found.end());
  }
}

}  // namespace

CounterSnapshot read_ib_error_counters(const std::string& sysfs_root) {
  CounterSnapshot snapshot;
  const fs::path devices = fs::path(sysfs_root) / "class" / "infiniband";
  for (const std::string& device : entries(devices)) {
    const fs::path ports = devices / device / "ports";
    for (const std::string& port : entries(ports)) {
      const std::string prefix = device + "/" + port + "/";
      for (const char* counter : kPortErrorCounters)
        read_counter(ports / port / "counters" / counter, prefix + counter, snapshot);
      const fs::path hw = ports / port / "hw_counters";
      for (const std::string& counter : entries(hw))
        if (is_error_counter_name(counter))
          read_counter(hw / counter, prefix + "hw_counters/" + counter, snapshot);
    }
  }
  return snapshot;
}

CounterSnapshot read_tcp_counters(const std::string& proc_root) {
  CounterSnapshot snapshot;
  const fs::path net = fs::path(proc_root) / "net";
  read_proc_table(net / "snmp", "Tcp", "tcp/", any_tcp_field, snapshot);
  read_proc_table(net / "netstat", "TcpExt", "tcpext/", retransmission_field, snapshot);
  return snapshot;
}

std::string serialize(const CounterSnapshot& snapshot) {
  std::string text(kHeader);
  text += '\n';
  for (const auto& [key, value] : snapshot.values) {
    if (has_space(key))
      throw std::invalid_argument(fmt::format("counter name '{}' holds whitespace", key));
    text += fmt::format("{} {}\n", key, value);
  }
  return text;
}

CounterSnapshot deserialize(const std::string& text) {
  const auto shown = [](std::string_view line) {
    return std::string(line.substr(0, 80)) + (line.size() > 80 ? "..." : "");
  };
  CounterSnapshot snapshot;
  std::string_view rest = text;
  size_t line_number = 0;
  while (!rest.empty()) {
    const size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    ++line_number;
    if (line_number == 1) {
      if (line != kHeader)
        throw std::runtime_error(fmt::format("counter snapshot: expected '{}' on line 1, got '{}'",
                                             kHeader, shown(line)));
      continue;
    }
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    const std::string_view key = line.substr(0, space);
    const auto value =
        space == std::string_view::npos ? std::nullopt : parse_count(line.substr(space + 1));
    if (has_space(key) || !value ||
        line.substr(space + 1).find_first_of(" \t") != std::string_view::npos)
      throw std::runtime_error(
          fmt::format("counter snapshot line {}: expected '<name> <count>', got '{}'", line_number,
                      shown(line)));
    if (!snapshot.values.emplace(std::string(key), *value).second)
      throw std::runtime_error(
          fmt::format("counter snapshot line {}: '{}' given twice", line_number, shown(key)));
  }
  if (line_number == 0)
    throw std::runtime_error(
        fmt::format("counter snapshot: empty text, expected '{}' on line 1", kHeader));
  return snapshot;
}

std::vector<Check> judge_counter_deltas(const std::vector<std::string>& hosts,
                                        const std::vector<CounterSnapshot>& before,
                                        const std::vector<CounterSnapshot>& after,
                                        const CounterOptions& options) {
  if (before.size() != hosts.size() || after.size() != hosts.size())
    throw std::invalid_argument(
        fmt::format("counter deltas: {} hosts but {} snapshots before and {} after", hosts.size(),
                    before.size(), after.size()));
  std::vector<Check> checks;
  ib_checks(hosts, before, after, checks);
  tcp_checks(hosts, before, after, options, checks);
  return checks;
}

void tcp_segment_deltas(const CounterSnapshot& before, const CounterSnapshot& after, uint64_t& sent,
                        uint64_t& retransmitted) {
  auto delta = [&](const std::string& key) -> uint64_t {
    const auto b = before.values.find(key), a = after.values.find(key);
    if (b == before.values.end() || a == after.values.end() || a->second < b->second) return 0;
    return a->second - b->second;
  };
  sent = delta("tcp/OutSegs");
  retransmitted = delta("tcp/RetransSegs");
}

std::vector<Check> judge_pair_retransmissions(const std::vector<PairRetransmissions>& pairs,
                                              const CounterOptions& options) {
  // One figure per direction: what the sending end retransmitted of what it
  // sent while the pair ran (a lost segment is retransmitted by its sender).
  struct Direction {
    std::string from, to;
    double rate;
  };
  std::vector<Direction> directions;
  std::set<std::string> nodes;
  for (const PairRetransmissions& p : pairs) {
    if (p.sent_a + p.sent_b < options.min_segments) continue;
    auto rate = [](uint64_t retransmitted, uint64_t sent) {
      return sent > 0 ? static_cast<double>(retransmitted) / static_cast<double>(sent) : 0.0;
    };
    directions.push_back({p.a, p.b, rate(p.retransmitted_a, p.sent_a)});
    directions.push_back({p.b, p.a, rate(p.retransmitted_b, p.sent_b)});
    nodes.insert(p.a);
    nodes.insert(p.b);
  }
  auto make = [](Status status, std::string host, std::string peer, double measured,
                 double expected, std::string message, std::string remedy) {
    Check c;
    c.stage = Stage::kCluster;
    c.name = "cluster.packet_loss";
    c.status = status;
    c.host = std::move(host);
    c.peer = std::move(peer);
    c.measured = measured;
    c.expected = expected;
    c.unit = "%";
    c.message = std::move(message);
    c.remedy = status == Status::kPass ? "" : std::move(remedy);
    return c;
  };
  if (directions.empty()) {
    Check c = make(Status::kSkip, "", "", std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::quiet_NaN(),
                   "no node pair sent enough TCP segments to judge retransmissions", "");
    c.unit.clear();
    return {c};
  }
  const double threshold = options.retransmission_rate * 100;
  // A node is named when every direction into it (or out of it) retransmits
  // at least the floor rate and clearly more (outlier_factor x) than every
  // direction that does not touch it: the loss has that node in common.
  std::vector<Check> checks;
  if (nodes.size() > 2) {
    for (const std::string& node : nodes) {
      for (bool into : {true, false}) {
        double lowest = 1, others = 0;
        std::string evidence;
        for (const Direction& d : directions) {
          const bool touches = d.from == node || d.to == node;
          if (!touches) {
            others = std::max(others, d.rate);
          } else if ((into ? d.to : d.from) == node) {
            lowest = std::min(lowest, d.rate);
            evidence += fmt::format("{}{} {} {:.2f}%", evidence.empty() ? "" : ", ",
                                    into ? "from" : "to", into ? d.from : d.to, d.rate * 100);
          }
        }
        if (lowest < options.outlier_floor_rate || lowest < options.outlier_factor * others)
          continue;
        checks.push_back(
            make(Status::kWarn, node, "", lowest * 100, others * 100,
                 fmt::format("TCP segments {} {} are retransmitted ({}), the directions without it "
                             "at most {:.2f}%: packets {} {} are lost",
                             into ? "sent to" : "sent by", node, evidence, others * 100,
                             into ? "to" : "from", node),
                 "packets between this node and the others are lost: check its link (ethtool -S "
                 "errors and drops, the cable and switch port), the MTU on both ends, and any tc "
                 "qdisc (tc -s qdisc)"));
        break;  // into or out of: one finding per node
      }
    }
  }
  if (!checks.empty()) return checks;
  size_t lossy = 0;
  double worst = 0, lowest = 1;
  for (const Direction& d : directions) {
    lossy += d.rate >= options.retransmission_rate;
    worst = std::max(worst, d.rate);
    lowest = std::min(lowest, d.rate);
  }
  if (lossy == 0)
    return {make(Status::kPass, "", "", worst * 100, threshold,
                 fmt::format("{} directions between {} nodes, none retransmitted {:.2g}% or more "
                             "of its TCP segments (worst {:.3f}%)",
                             directions.size(), nodes.size(), threshold, worst * 100),
                 "")};
  if (lossy == directions.size() && nodes.size() > 2)
    return {make(Status::kWarn, "", "", lowest * 100, threshold,
                 fmt::format("every direction between {} nodes retransmitted at least {:.3f}% of "
                             "its TCP segments: loss across the whole fabric, not one node",
                             nodes.size(), lowest * 100),
                 "check the switch (port error counters, buffer drops), the MTU everywhere, and "
                 "settings every node shares")};
  for (const Direction& d : directions)
    if (d.rate >= options.retransmission_rate)
      checks.push_back(make(
          Status::kWarn, d.from, d.to, d.rate * 100, threshold,
          fmt::format("{} retransmitted {:.2f}% of its TCP segments to {}{}", d.from, d.rate * 100,
                      d.to, nodes.size() == 2 ? " (two nodes: either end's link)" : ""),
          "packets on the path between these two nodes are lost: check the "
          "switch ports and cables between them"));
  return checks;
}

}  // namespace ccscope::diag
