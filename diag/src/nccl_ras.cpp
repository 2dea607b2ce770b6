#include "ccscope/diag/nccl_ras.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <regex>
#include <stdexcept>

#include "ccscope/common/socket.h"
#include "ccscope/common/text.h"
#include "nccl_log_internal.h"

namespace ccscope::diag {
namespace {

int parse_port(std::string_view text, std::string_view whole) {
  int port = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (error != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535)
    throw std::invalid_argument(
        fmt::format("'{}': the port must be a number from 1 to 65535", whole));
  return port;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

long long to_number(const std::string& text) { return text.empty() ? -1 : std::stoll(text); }

std::string process_text(long pid, const std::string& host) {
  return pid > 0 ? fmt::format("pid {} on {}", pid, host) : std::string("process unknown");
}

}  // namespace

NcclRasAddress parse_nccl_ras_address(std::string_view text) {
  NcclRasAddress address;
  const std::string_view whole = text;
  if (text.empty()) throw std::invalid_argument("an empty RAS address: give host:port");
  if (text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos)
      throw std::invalid_argument(fmt::format("'{}': no ']' after the IPv6 address", whole));
    address.host = std::string(text.substr(1, close - 1));
    text.remove_prefix(close + 1);
    if (!text.empty()) {
      if (text.front() != ':')
        throw std::invalid_argument(fmt::format("'{}': ':port' expected after ']'", whole));
      address.port = parse_port(text.substr(1), whole);
    }
    return address;
  }
  const size_t colon = text.rfind(':');
  if (colon != std::string_view::npos) {
    if (colon > 0) address.host = std::string(text.substr(0, colon));
    address.port = parse_port(text.substr(colon + 1), whole);
  } else if (std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    address.port = parse_port(text, whole);
  } else {
    address.host = std::string(text);
  }
  return address;
}

std::optional<NcclRasAddress> nccl_ras_address_from_environment(
    const std::function<std::optional<std::string>(const char*)>& get) {
  if (const auto enable = get("NCCL_RAS_ENABLE"); enable && trim(*enable) == "0")
    return std::nullopt;
  if (const auto addr = get("NCCL_RAS_ADDR"); addr && !trim(*addr).empty())
    return parse_nccl_ras_address(trim(*addr));
  return NcclRasAddress{};
}

std::string to_string(const NcclRasAddress& address) {
  return address.host.find(':') != std::string::npos
             ? fmt::format("[{}]:{}", address.host, address.port)
             : fmt::format("{}:{}", address.host, address.port);
}

NcclRasStatus parse_nccl_ras_status(std::string_view text) {
  NcclRasStatus status;
  // The report's blocks: a word at the start of a line, then indented lines.
  enum class Block { kNone, kMissing, kDead, kTimeout, kCommIncomplete, kCommError, kCommMismatch };
  Block block = Block::kNone;
  std::string comm;
  // A mismatch's operation counts, per collective: the ranks RAS lists (the
  // outliers) with their counts, and the most any group reached.
  std::vector<NcclRasRank> listed;
  long long group_operations = -1, most_operations = -1;
  std::string collective;
  auto close_collective = [&] {
    for (NcclRasRank& r : listed)
      if (r.operations >= 0 && r.operations < most_operations) {
        r.others = most_operations;
        status.behind.push_back(r);
      }
    listed.clear();
    group_operations = most_operations = -1;
  };
  static const std::regex kBlockComm(
      R"(^#(\d+-\d+) \(([0-9a-fA-F]+)\) (INCOMPLETE|ERROR|MISMATCH)$)");
  static const std::regex kProcess(R"(^Process (\d+) on node (\S+) managing GPUs? (.*)$)");
  static const std::regex kRank(
      R"(^Rank (\d+)(?: has launched up to operation (\d+)| has (not) launched any operations| has status \w+)? -- (?:GPU (.*) managed by process (\d+) on node (\S+)|\[process information not found\])$)");
  static const std::regex kGroup(R"(^(\d+) ranks have launched up to operation (\d+)$)");
  static const std::regex kGroupNone(R"(^(\d+) ranks have not launched any operations$)");
  static const std::regex kDifferent(
      R"(^Communicator ranks have different (\S+) operation counts$)");
  static const std::regex kMissingCount(R"(^Missing communicator data from (\d+) job process)");
  static const std::regex kDeadCount(R"(^(\d+) job process(?:es)? (?:is|are) considered dead)");
  static const std::regex kTimeouts(R"(^Encountered (\d+) communication timeout)");
  size_t start = 0;
  std::string previous;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    const std::string line(trim(raw));
    const bool indented = !raw.empty() && (raw.front() == ' ' || raw.front() == '\t');
    std::smatch m;
    if (line.empty()) continue;  // blocks and their parts end with a blank line
    if (!indented) {
      if (block == Block::kCommMismatch) close_collective();
      if (line.find_first_not_of('=') == std::string::npos && !line.empty()) {
        if (previous == "Errors") status.report = true;
        if (previous == "Warnings") status.report = status.complete = true;
        continue;
      }
      previous = line;
      if (line.rfind("Group ", 0) == 0 && line.find("Comms") != std::string::npos)
        status.report = true;
      block = Block::kNone;
      if (line == "INCOMPLETE") block = Block::kMissing;
      if (line == "DEAD") block = Block::kDead;
      if (line == "TIMEOUT") block = Block::kTimeout;
      if (std::regex_match(line, m, kBlockComm)) {
        comm = fmt::format("#{} ({})", m[1].str(), m[2].str());
        block = m[3] == "INCOMPLETE" ? Block::kCommIncomplete
                : m[3] == "ERROR"    ? Block::kCommError
                                     : Block::kCommMismatch;
        collective.clear();
      }
      continue;
    }
    switch (block) {
      case Block::kMissing:
      case Block::kDead:
        if (std::regex_search(line, m, kMissingCount))
          status.missing_count = static_cast<size_t>(std::stoul(m[1]));
        else if (std::regex_search(line, m, kDeadCount))
          status.dead_count = static_cast<size_t>(std::stoul(m[1]));
        else if (std::regex_match(line, m, kProcess))
          (block == Block::kDead ? status.dead : status.missing)
              .push_back({std::stol(m[1]), m[2].str(), m[3].str()});
        break;
      case Block::kTimeout:
        if (std::regex_search(line, m, kTimeouts)) status.timeouts += std::stoul(m[1]);
        break;
      case Block::kCommError:
        status.errors.push_back(comm + ": " + line);
        break;
      case Block::kCommIncomplete:
      case Block::kCommMismatch:
        if (std::regex_match(line, m, kDifferent)) {
          close_collective();
          collective = m[1].str();
        } else if (std::regex_match(line, m, kGroup)) {
          group_operations = std::stoll(m[2]);
          most_operations = std::max(most_operations, group_operations);
        } else if (std::regex_match(line, m, kGroupNone)) {
          group_operations = 0;
          most_operations = std::max<long long>(most_operations, 0);
        } else if (line.rfind("Communicator ranks have different status", 0) == 0 ||
                   line.find(" ranks have status ") != std::string::npos) {
          group_operations = -1;  // a status group: its ranks carry no operation count
        } else if (std::regex_match(line, m, kRank)) {
          NcclRasRank r;
          r.comm = comm;
          r.rank = std::stoi(m[1]);
          r.gpu = m[4].str();
          r.pid = m[5].matched ? std::stol(m[5]) : 0;
          r.host = m[6].str();
          if (block == Block::kCommIncomplete) {
            status.incomplete_ranks.push_back(r);
            break;
          }
          if (collective.empty()) break;  // a rank with a different status
          r.collective = collective;
          r.operations = m[2].matched ? to_number(m[2].str()) : m[3].matched ? 0 : group_operations;
          most_operations = std::max(most_operations, r.operations);
          listed.push_back(r);
        }
        break;
      case Block::kNone:
        break;
    }
  }
  if (block == Block::kCommMismatch) close_collective();
  return status;
}

std::vector<NcclLogFinding> nccl_ras_findings(const NcclRasStatus& status,
                                              const std::string& where) {
  std::vector<NcclLogFinding> findings;
  auto add = [&](NcclSeverity severity, std::string code, std::string message, std::string cause,
                 std::string remedy) -> NcclLogFinding& {
    NcclLogFinding f = nccl_log_detail::finding(severity, std::move(code), std::move(message),
                                                std::move(cause), std::move(remedy));
    f.role = severity == NcclSeverity::kInfo ? NcclRole::kNone : NcclRole::kRoot;
    findings.push_back(std::move(f));
    return findings.back();
  };
  auto hosts_of = [](NcclLogFinding& f, const std::string& host) {
    if (!host.empty() && std::find(f.hosts.begin(), f.hosts.end(), host) == f.hosts.end())
      f.hosts.push_back(host);
    if (f.hosts.size() == 1) f.host = f.hosts.front();
  };
  auto processes = [](const std::vector<NcclRasProcess>& list) {
    std::vector<std::string> out;
    for (const NcclRasProcess& p : list)
      out.push_back(fmt::format("pid {} on {} (GPU {})", p.pid, p.host, p.gpus));
    return fmt::format("{}", fmt::join(out, ", "));
  };
  if (!status.dead.empty() || status.dead_count > 0) {
    const size_t n = std::max(status.dead.size(), status.dead_count);
    auto& f = add(NcclSeverity::kFail, "ras.dead_processes",
                  fmt::format("NCCL RAS ({}): {} process{} considered dead, unreachable over RAS's "
                              "network{}{}",
                              where, n, n == 1 ? "" : "es", status.dead.empty() ? "" : ": ",
                              processes(status.dead)),
                  "the process exited or was killed, or its node or network link is down",
                  "look at that node: the job's stderr for the process's exit, the kernel log "
                  "(dmesg: GPU Xid errors, the OOM killer), its network link");
    for (const NcclRasProcess& p : status.dead) hosts_of(f, p.host);
    f.count = n;
  }
  if (!status.behind.empty()) {
    std::vector<std::string> lines;
    for (const NcclRasRank& r : status.behind)
      lines.push_back(
          fmt::format("rank {} ({}, GPU {}) launched {} {} operation{} where others "
                      "reached {}",
                      r.rank, process_text(r.pid, r.host), r.gpu, r.operations, r.collective,
                      r.operations == 1 ? "" : "s", r.others));
    auto& f = add(NcclSeverity::kFail, "ras.ranks_behind",
                  fmt::format("NCCL RAS ({}): {} in {}", where, fmt::join(lines, "; "),
                              status.behind.front().comm),
                  "the rank behind never called the collective the others wait in: it is stuck "
                  "before it (compute, a data loader, I/O, a different code path) or hung in an "
                  "earlier NCCL call",
                  "attach to that process (py-spy dump --pid, gdb -p) to see where it waits; the "
                  "others are only waiting for it");
    for (const NcclRasRank& r : status.behind) {
      hosts_of(f, r.host);
      f.ranks.push_back(r.rank);
    }
    if (f.ranks.size() == 1) f.rank = f.ranks.front();
  }
  if (!status.incomplete_ranks.empty()) {
    std::vector<std::string> lines;
    for (const NcclRasRank& r : status.incomplete_ranks)
      lines.push_back(fmt::format("rank {} ({})", r.rank, process_text(r.pid, r.host)));
    auto& f = add(NcclSeverity::kFail, "ras.incomplete_ranks",
                  fmt::format("NCCL RAS ({}): no data from {} of {}", where, fmt::join(lines, ", "),
                              status.incomplete_ranks.front().comm),
                  "those processes did not answer RAS's query: hung inside a CUDA or NCCL call, "
                  "stopped, or on a node that is cut off",
                  "attach to them (py-spy dump, gdb -p) or check their node");
    for (const NcclRasRank& r : status.incomplete_ranks) {
      hosts_of(f, r.host);
      f.ranks.push_back(r.rank);
    }
    if (f.ranks.size() == 1) f.rank = f.ranks.front();
  }
  if (!status.missing.empty() || status.missing_count > 0) {
    const size_t n = std::max(status.missing.size(), status.missing_count);
    auto& f = add(NcclSeverity::kWarn, "ras.missing_processes",
                  fmt::format("NCCL RAS ({}): no communicator data from {} process{}{}{}", where, n,
                              n == 1 ? "" : "es", status.missing.empty() ? "" : ": ",
                              processes(status.missing)),
                  "alive on RAS's network but did not report its communicators in time (busy, "
                  "stopped, or finished with NCCL)",
                  "ask again with a longer timeout; a process that stays silent is hung");
    for (const NcclRasProcess& p : status.missing) hosts_of(f, p.host);
    f.count = n;
  }
  if (!status.errors.empty())
    add(NcclSeverity::kFail, "ras.errors",
        fmt::format("NCCL RAS ({}): {}", where, fmt::join(status.errors, "; ")),
        "NCCL returned an error on those ranks (initialization or asynchronous)",
        "run with NCCL_DEBUG=WARN (or INFO) and read the WARN lines of those ranks: ccscope diag "
        "nccl-log");
  if (status.timeouts > 0)
    add(NcclSeverity::kWarn, "ras.timeouts",
        fmt::format("NCCL RAS ({}): {} timeout{} while gathering the communicators' state", where,
                    status.timeouts, status.timeouts == 1 ? "" : "s"),
        "some RAS threads answered late: a loaded or partly unreachable node",
        "the processes named above, if any, are the likely ones");
  if (findings.empty())
    add(NcclSeverity::kInfo, "ras.healthy",
        status.report
            ? fmt::format("NCCL RAS ({}): every process answered, none dead, operation counts "
                          "agree{}",
                          where, status.complete ? "" : " (the report ended early)")
            : fmt::format("NCCL RAS ({}): the answer is no RAS status report", where),
        "", "");
  return findings;
}

NcclLogFinding nccl_ras_unreachable(const std::string& where, const std::string& error) {
  NcclLogFinding f;
  f.severity = NcclSeverity::kInfo;
  f.code = "ras.unreachable";
  f.message = fmt::format("NCCL RAS ({}) not asked: {}", where, error);
  f.cause =
      "RAS runs inside NCCL >= 2.24 processes while they have a communicator, unless "
      "NCCL_RAS_ENABLE=0; it listens on NCCL_RAS_ADDR (default localhost:28028)";
  f.remedy = "ask from a node where the job runs, or name its address (NCCL_RAS_ADDR)";
  return f;
}

std::string query_nccl_ras(const NcclRasAddress& address, std::chrono::milliseconds timeout) {
  const auto deadline = SocketClock::now() + timeout;
  const std::string where = to_string(address);
  std::string error;
  Fd fd = connect_tcp(address.host, address.port, deadline, error);
  if (!fd.valid()) throw std::runtime_error(where + ": " + error);
  std::string pending;  // read but not yet consumed
  auto fail = [&](const std::string& what) -> std::runtime_error {
    return std::runtime_error(
        fmt::format("{}: {}{}", where, what,
                    errno == ETIMEDOUT ? fmt::format(" (no answer within {} ms)", timeout.count())
                    : errno != 0       ? ": " + std::string(std::strerror(errno))
                                       : std::string()));
  };
  auto send = [&](const std::string& line) {
    if (!write_all(fd.get(), line.data(), line.size(), deadline)) throw fail("cannot send");
  };
  // Reads until EOF (until_eof) or a whole line; false at EOF.
  auto receive = [&](bool until_eof) {
    char buffer[4096];
    for (;;) {
      if (!until_eof && pending.find('\n') != std::string::npos) return true;
      if (!wait_for(fd.get(), POLLIN, deadline)) throw fail("the answer stopped");
      const ssize_t got = ::recv(fd.get(), buffer, sizeof buffer, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw fail("cannot read");
      if (got == 0) return false;
      pending.append(buffer, static_cast<size_t>(got));
      if (pending.size() > (size_t{64} << 20)) throw fail("an answer over 64 MiB");
    }
  };
  auto line = [&](const char* expected_what) {
    errno = 0;
    if (!receive(false)) throw fail(std::string("closed before ") + expected_what);
    const size_t newline = pending.find('\n');
    std::string text = pending.substr(0, newline);
    pending.erase(0, newline + 1);
    if (!text.empty() && text.back() == '\r') text.pop_back();
    return text;
  };
  send("CLIENT PROTOCOL 2\n");
  const std::string hello = line("its protocol line");
  if (hello.rfind("SERVER PROTOCOL ", 0) != 0)
    throw std::runtime_error(
        fmt::format("{}: not NCCL's RAS service (it answered '{}')", where, hello.substr(0, 80)));
  // RAS waits this long for each peer; a second less than ours, so that it
  // answers with what it has before we give up.
  const long long seconds =
      std::max<long long>(1, std::chrono::duration_cast<std::chrono::seconds>(timeout).count() - 1);
  send(fmt::format("TIMEOUT {}\n", seconds));
  const std::string ok = line("OK");
  if (ok != "OK") throw std::runtime_error(fmt::format("{}: TIMEOUT answered '{}'", where, ok));
  send("STATUS\n");
  errno = 0;
  try {
    receive(true);
  } catch (const std::runtime_error&) {
    // Cut short: what arrived is still RAS's view (the parse says it is incomplete).
    if (pending.empty()) throw;
  }
  return pending;
}

std::vector<NcclLogFinding> ask_nccl_ras(const NcclRasAddress& address,
                                         std::chrono::milliseconds timeout) {
  try {
    return nccl_ras_findings(parse_nccl_ras_status(query_nccl_ras(address, timeout)),
                             to_string(address));
  } catch (const std::exception& e) {
    return {nccl_ras_unreachable(to_string(address), e.what())};
  }
}

bool nccl_version_has_ras(const std::string& version) {
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return true;  // unknown: may
  return major > 2 || (major == 2 && minor >= 24);
}

std::string nccl_ras_stall_evidence(const std::vector<NcclLogFinding>& findings) {
  std::vector<const NcclLogFinding*> worst_first;
  for (const NcclLogFinding& f : findings) worst_first.push_back(&f);
  std::stable_sort(worst_first.begin(), worst_first.end(),
                   [](const NcclLogFinding* a, const NcclLogFinding* b) {
                     return static_cast<int>(a->severity) > static_cast<int>(b->severity);
                   });
  std::string out;
  for (const NcclLogFinding* f : worst_first) {
    std::string severity = nccl_severity_name(f->severity);
    for (char& c : severity) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    out += fmt::format("NCCL RAS: {} {}: {}\n", severity, f->code, f->message);
  }
  return out;
}

std::vector<Check> nccl_ras_checks(const std::vector<NcclLogFinding>& findings, Stage stage) {
  NcclLogAnalysis analysis;
  analysis.findings = findings;
  std::vector<Check> checks = nccl_log_checks(analysis, stage);
  for (Check& c : checks)
    if (c.name.rfind("nccl_log.ras.", 0) == 0)
      c.name = "nccl_ras." + c.name.substr(std::string("nccl_log.ras.").size());
  return checks;
}

}  // namespace ccscope::diag
