// Reading NCCL debug output: every line is searched for NCCL's prefix
// "host:pid:tid [cudaDev] [file:line ]NCCL INFO|WARN|TRACE", wherever it
// starts (launchers and log collectors put their own prefixes first), and the
// message after it is matched against the INFO/WARN strings of NCCL 2.7-2.29
// (src/init.cc, bootstrap.cc, transport/*.cc, graph/topo.cc). Other lines are
// only searched for the errors PyTorch prints (watchdog timeouts, ncclXxxError).
// Hand-written tokenising: logs of thousands of ranks have millions of lines.
#include "ccscope/diag/nccl_log.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "ccscope/topo/nvidia_smi.h"
#include "nccl_log_internal.h"

namespace ccscope::diag {

const char* nccl_severity_name(NcclSeverity severity) {
  switch (severity) {
    case NcclSeverity::kInfo:
      return "info";
    case NcclSeverity::kWarn:
      return "warn";
    case NcclSeverity::kFail:
      return "fail";
  }
  return "info";
}

const char* nccl_init_state_name(NcclInitState state) {
  switch (state) {
    case NcclInitState::kSeen:
      return "seen";
    case NcclInitState::kBootstrap:
      return "bootstrap";
    case NcclInitState::kInitStart:
      return "init_start";
    case NcclInitState::kConnecting:
      return "connecting";
    case NcclInitState::kInitComplete:
      return "init_complete";
    case NcclInitState::kDestroyed:
      return "destroyed";
    case NcclInitState::kAborted:
      return "aborted";
  }
  return "seen";
}

const char* nccl_role_name(NcclRole role) {
  switch (role) {
    case NcclRole::kNone:
      return "";
    case NcclRole::kRoot:
      return "root";
    case NcclRole::kSecondary:
      return "secondary";
    case NcclRole::kUnknown:
      return "unknown";
  }
  return "";
}

namespace nccl_log_detail {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t'; }
bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_digit);
}
bool contains(std::string_view text, std::string_view what) {
  return text.find(what) != std::string_view::npos;
}
bool starts_with(std::string_view text, std::string_view what) {
  return text.substr(0, what.size()) == what;
}
std::string_view trim(std::string_view s) {
  while (!s.empty() && (is_space(s.front()) || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (is_space(s.back()) || s.back() == '\r')) s.remove_suffix(1);
  return s;
}
// Digits at the start of `s` as a number (bounded: logs are not trusted).
std::optional<long> leading_number(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && n < 15 && is_digit(s[n])) ++n;
  if (n == 0) return std::nullopt;
  return std::strtol(std::string(s.substr(0, n)).c_str(), nullptr, 10);
}
// The word after `key ` in `text`: "rank 3 nranks" -> key "rank" gives "3".
std::string_view word_after(std::string_view text, std::string_view key) {
  for (size_t at = 0; (at = text.find(key, at)) != std::string_view::npos; at += key.size()) {
    const bool starts_word = at == 0 || is_space(text[at - 1]);
    const size_t end = at + key.size();
    if (!starts_word || end >= text.size() || !is_space(text[end])) continue;
    std::string_view rest = text.substr(end);
    while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
    size_t n = 0;
    while (n < rest.size() && !is_space(rest[n])) ++n;
    return rest.substr(0, n);
  }
  return {};
}
int number_after(std::string_view text, std::string_view key, int otherwise) {
  const auto w = word_after(text, key);
  const auto v = leading_number(w);
  return v && *v < (1L << 30) ? static_cast<int>(*v) : otherwise;
}
void add_unique(std::vector<std::string>& list, std::string value) {
  if (!value.empty() && std::find(list.begin(), list.end(), value) == list.end())
    list.push_back(std::move(value));
}

// The NCCL level word at `at` ("NCCL INFO"), or "".
std::string_view level_at(std::string_view line, size_t at) {
  for (std::string_view level : {"INFO", "WARN", "TRACE", "ABORT"}) {
    const size_t end = at + 5 + level.size();
    if (line.substr(at + 5, level.size()) == level && (end == line.size() || is_space(line[end])))
      return level;
  }
  return {};
}

struct Header {
  size_t start = 0;    // where "host:pid:tid" begins
  bool cut = false;    // another NCCL line starts inside its message
  bool glued = false;  // other text (not a launcher's ':', '>', ']', '|') sits right before it
  NcclLinePrefix prefix;
};

// The prefix ending just before "NCCL <LEVEL>" at `keyword`, if it is one.
std::optional<Header> header_before(std::string_view line, size_t keyword) {
  std::string_view head = line.substr(0, keyword);
  while (!head.empty() && is_space(head.back())) head.remove_suffix(1);
  Header h;
  // "misc/socket.cc:71 NCCL WARN": the source location WARN lines carry.
  if (!head.empty() && head.back() != ']') {
    const size_t space = head.find_last_of(" \t");
    const std::string_view token = space == std::string_view::npos ? head : head.substr(space + 1);
    const size_t colon = token.rfind(':');
    // "misc/socket.cc:71", or a plugin's function ("nccl_net_ofi_rdma_init:7839").
    if (colon == std::string_view::npos || colon == 0 || !all_digits(token.substr(colon + 1)) ||
        !std::all_of(token.begin(), token.begin() + colon, [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' ||
                 c == '-';
        }))
      return std::nullopt;
    h.prefix.location = std::string(token);
    head = space == std::string_view::npos ? std::string_view{} : head.substr(0, space);
    while (!head.empty() && is_space(head.back())) head.remove_suffix(1);
  }
  if (head.empty() || head.back() != ']') return std::nullopt;
  const size_t open = head.rfind('[');
  if (open == std::string_view::npos) return std::nullopt;
  const auto device = head.substr(open + 1, head.size() - open - 2);
  if (!all_digits(device) || device.size() > 6) return std::nullopt;
  h.prefix.cuda_device = static_cast<int>(*leading_number(device));
  head = head.substr(0, open);
  while (!head.empty() && is_space(head.back())) head.remove_suffix(1);
  const size_t space = head.find_last_of(" \t");
  const size_t token_start = space == std::string_view::npos ? 0 : space + 1;
  std::string_view token = head.substr(token_start);
  // host:pid:tid, with whatever a launcher glued before the host
  // ("[1,0]<stderr>:host:pid:tid").
  const size_t c2 = token.rfind(':');
  if (c2 == std::string_view::npos || c2 == 0) return std::nullopt;
  const size_t c1 = token.rfind(':', c2 - 1);
  if (c1 == std::string_view::npos) return std::nullopt;
  const auto pid = token.substr(c1 + 1, c2 - c1 - 1);
  const auto tid = token.substr(c2 + 1);
  if (!all_digits(pid) || !all_digits(tid) || pid.size() > 12 || tid.size() > 12)
    return std::nullopt;
  // The host: the hostname characters before ":pid"; before them only the
  // token's start or a launcher's ':', '>', ']' or '|' ("[1,0]<stderr>:host").
  std::string_view host = token.substr(0, c1);
  size_t host_start = host.size();
  while (host_start > 0 && (std::isalnum(static_cast<unsigned char>(host[host_start - 1])) ||
                            host[host_start - 1] == '.' || host[host_start - 1] == '-' ||
                            host[host_start - 1] == '_'))
    --host_start;
  // Glued to other text ("[sevm:479:..."): a line cut by this one. The reader
  // decides, with the hosts of the whole log, which part is the host.
  h.glued = host_start > 0 &&
            std::string_view(":>]|").find(host[host_start - 1]) == std::string_view::npos;
  host = host.substr(host_start);
  if (host.empty()) return std::nullopt;
  h.start = token_start + host_start;
  h.prefix.host = std::string(host);
  h.prefix.pid = *leading_number(pid);
  h.prefix.tid = *leading_number(tid);
  return h;
}

// Every NCCL prefix in the line, in order (more than one: lines interleaved).
std::vector<Header> find_headers(std::string_view line, size_t* keywords) {
  std::vector<Header> out;
  *keywords = 0;
  for (size_t at = 0; (at = line.find("NCCL ", at)) != std::string_view::npos; at += 5) {
    const auto level = level_at(line, at);
    if (level.empty()) continue;
    ++*keywords;
    if (!out.empty()) out.back().cut = true;
    auto h = header_before(line, at);
    if (!h) continue;
    if (!out.empty() && h->start < out.back().start) continue;
    h->prefix.level = std::string(level);
    size_t msg = at + 5 + level.size();
    while (msg < line.size() && is_space(line[msg])) ++msg;
    h->prefix.message = std::string(line.substr(msg));
    out.push_back(std::move(*h));
  }
  return out;
}

}  // namespace
}  // namespace nccl_log_detail

std::optional<NcclLinePrefix> parse_nccl_line(std::string_view line) {
  size_t keywords = 0;
  auto headers = nccl_log_detail::find_headers(line, &keywords);
  if (headers.empty() || headers.back().cut || headers.back().glued) return std::nullopt;
  return std::move(headers.back().prefix);
}

namespace nccl_log_detail {

std::string number_pattern(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, 2) == "0x") {
      size_t j = i + 2;
      while (j < text.size() && std::isxdigit(static_cast<unsigned char>(text[j]))) ++j;
      if (j > i + 2) {
        out += '#';
        i = j;
        continue;
      }
    }
    if (is_digit(text[i])) {
      while (i < text.size() && is_digit(text[i])) ++i;
      out += '#';
      continue;
    }
    out += text[i++];
  }
  return out;
}

bool is_virtual_interface(std::string_view name) {
  if (name == "lo") return true;
  for (std::string_view p : {"docker", "veth", "virbr", "br-", "cni", "flannel", "cali", "kube-",
                             "tun", "tap", "vxlan", "weave", "lxcbr", "lxc"})
    if (starts_with(name, p)) return true;
  return false;
}

namespace {

struct LinkBuild {
  std::set<std::string> details;
  std::set<long> channels;
  std::optional<bool> gdr_send, gdr_receive;
  std::set<int> pxn;
};

struct CommBuild {
  int nranks = 0;
  int nnodes = 0;
  std::set<int> ranks;
  std::map<std::tuple<int, int, std::string>, LinkBuild> links;
};

// Where the rank's current communicator's lines go: the latest Init START of
// that process and device (channel lines name no communicator).
struct RankBuild {
  std::string current_comm;  // key into comms
  std::string bus_id;        // "busId" of its init lines
  int inferred_rank = -1;    // from lines that name it without "comm 0x.."
  size_t error_lines = 0;
};

bool ends_with(std::string_view text, std::string_view what) {
  return text.size() >= what.size() && text.substr(text.size() - what.size()) == what;
}
std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < text.size();) {
    while (i < text.size() && is_space(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && !is_space(text[j])) ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}
bool is_hex_word(std::string_view w) {
  if (starts_with(w, "0x")) w.remove_prefix(2);
  return !w.empty() && std::all_of(w.begin(), w.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
}
// "2.28.3" or "2.28.3+cuda13.0".
bool version_form(std::string_view v) {
  const size_t plus = v.find('+');
  std::string_view number = v.substr(0, plus);
  int dots = 0;
  for (const char c : number) {
    if (c == '.')
      ++dots;
    else if (!is_digit(c))
      return false;
  }
  if (dots != 2 || number.front() == '.' || number.back() == '.' || contains(number, ".."))
    return false;
  if (plus == std::string_view::npos) return true;
  const auto cuda = v.substr(plus + 1);
  return starts_with(cuda, "cuda") && cuda.size() > 4 && is_digit(cuda.back()) &&
         std::all_of(cuda.begin() + 4, cuda.end(), [](char c) { return is_digit(c) || c == '.'; });
}
// "0[1c000]" or "0".
bool channel_end_form(std::string_view w) {
  const size_t open = w.find('[');
  if (open == std::string_view::npos) return all_digits(w);
  return all_digits(w.substr(0, open)) && w.back() == ']' &&
         is_hex_word(w.substr(open + 1, w.size() - open - 2));
}
// "NET/IB/0(8)/GDRDMA", "P2P/CUMEM/read", "SHM/direct/direct", "P2P/direct pointer".
bool via_form(std::string_view via) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t slash; (slash = via.find('/', start)) != std::string_view::npos; start = slash + 1)
    parts.push_back(via.substr(start, slash - start));
  parts.push_back(via.substr(start));
  for (const auto part : parts)
    if (part.empty() || !std::all_of(part.begin(), part.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '(' || c == ')' || c == '_' ||
                 c == '-' || c == ' ';
        }))
      return false;
  const auto kind = parts[0];
  if (!std::all_of(kind.begin(), kind.end(), [](char c) {
        return std::isupper(static_cast<unsigned char>(c)) || is_digit(c);
      }))
    return false;
  if (kind == "NET" || kind == "COLLNET") {
    if (parts.size() < 3 || !std::isalpha(static_cast<unsigned char>(parts[1][0]))) return false;
    const auto nic = parts[2].substr(0, parts[2].find('('));
    if (!all_digits(nic)) return false;
    for (size_t i = 3; i < parts.size(); ++i)
      if (!std::isalpha(static_cast<unsigned char>(parts[i][0]))) return false;
  }
  return true;
}
bool channel_form(std::string_view m) {
  const size_t colon = m.find(" : ");
  if (colon == std::string_view::npos) return false;
  const auto head = words(m.substr(0, colon));
  if (head.size() != 2) return false;
  const size_t slash = head[1].find('/');
  if (!all_digits(head[1].substr(0, slash)) ||
      (slash != std::string_view::npos && !all_digits(head[1].substr(slash + 1))))
    return false;
  const auto rest = m.substr(colon + 3);
  const size_t via_at = rest.find(" via ");
  if (via_at == std::string_view::npos) {  // ring order: "0 1 2 3"
    const auto ranks = words(rest);
    return !ranks.empty() && std::all_of(ranks.begin(), ranks.end(), all_digits);
  }
  auto pair = words(rest.substr(0, via_at));
  if (!pair.empty() && (pair.back() == "[send]" || pair.back() == "[receive]")) pair.pop_back();
  if (pair.size() == 3) {
    if (pair[1] != "->" || !channel_end_form(pair[0]) || !channel_end_form(pair[2])) return false;
  } else if (pair.size() != 1 || !channel_end_form(pair[0])) {
    return false;
  }
  return via_form(trim(rest.substr(via_at + 5)));
}
// "ncclCommInitRank comm 0x.. rank 0 nranks 2 ... commId 0x.. - Init START": each
// key once with a number after it, and the line ends with its state.
bool comm_form(std::string_view m) {
  const size_t dash = m.rfind(" - ");
  if (dash != std::string_view::npos) {
    const auto state = trim(m.substr(dash + 3));
    if (state != "Init START" && state != "Init COMPLETE" && state != "Destroy COMPLETE" &&
        state != "Abort COMPLETE")
      return false;
    m = m.substr(0, dash);
  }
  const auto w = words(m);
  // Before "comm": nothing, or the function ("ncclCommInitRank", "ncclCommInitRankConfig").
  const size_t comm_at = std::find(w.begin(), w.end(), "comm") - w.begin();
  if (comm_at > 1 ||
      (comm_at == 1 && w[0] != "ncclCommInitRank" && w[0] != "ncclCommInitRankConfig" &&
       w[0] != "ncclCommInitAll" && w[0] != "ncclCommSplit" && w[0] != "ncclCommInitRankScalable" &&
       w[0] != "ncclCommShrink"))
    return false;
  std::set<std::string_view> keys;
  for (size_t i = 0; i < w.size(); ++i) {
    static constexpr std::string_view kKeys[] = {"comm",   "rank",       "nranks",    "nRanks",
                                                 "nNodes", "cudaDev",    "nvmlDev",   "busId",
                                                 "commId", "localRanks", "localRank", "MNNVL"};
    if (std::find(std::begin(kKeys), std::end(kKeys), w[i]) == std::end(kKeys)) continue;
    if (!keys.insert(w[i]).second || i + 1 >= w.size() || !is_hex_word(w[i + 1])) return false;
  }
  return true;
}

}  // namespace

namespace {
std::vector<std::string_view> indexed_items(std::string_view list);
}  // namespace

bool plausible_message(std::string_view m) {
  if (starts_with(m, "NET/IB") && contains(m, ": Using ")) {
    // "[0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB ib0:10.0.0.1<0>"
    auto list = m.substr(m.find(": Using ") + 8);
    list = list.substr(0, list.find(';'));
    for (const auto item : indexed_items(list)) {
      const size_t colon = item.find(':'), slash = item.find('/');
      if (colon == std::string_view::npos || slash < colon || slash == std::string_view::npos ||
          !all_digits(item.substr(colon + 1, slash - colon - 1)) ||
          (item.substr(slash + 1) != "IB" && item.substr(slash + 1) != "RoCE"))
        return false;
    }
  }
  if (starts_with(m, "NCCL version ")) return version_form(trim(m.substr(13)));
  if (starts_with(m, "cudaDriverVersion ")) return all_digits(trim(m.substr(18)));
  if ((starts_with(m, "Bootstrap") || starts_with(m, "NET/Socket") || starts_with(m, "NET/IB")) &&
      contains(m, "Using ") && !contains(m, "No device"))
    return ends_with(m, ">");
  if (starts_with(m, "Using network ")) {
    const auto net = m.substr(14);
    return !net.empty() && std::all_of(net.begin(), net.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == ' ' || c == '_' || c == '-';
    });
  }
  if (const size_t at = m.find(" set by environment to "); at != std::string_view::npos) {
    const auto var = m.substr(0, at), value = m.substr(at + 23);
    return std::all_of(var.begin(), var.end(),
                       [](char c) {
                         return std::isupper(static_cast<unsigned char>(c)) || is_digit(c) ||
                                c == '_';
                       }) &&
           !value.empty() && value.find(' ') == std::string_view::npos;
  }
  if (starts_with(m, "Channel ") || starts_with(m, "Ring ") || starts_with(m, "CollNet ") ||
      starts_with(m, "Coll "))
    return channel_form(m);
  if (contains(m, "comm 0x") &&
      (contains(m, " rank ") || contains(m, "- Init") || contains(m, "COMPLETE")))
    return comm_form(m);
  if (starts_with(m, "NET/Plugin") && contains(m, "Could not find: ")) {
    const auto lib = trim(m.substr(m.find("Could not find: ") + 16));
    return starts_with(lib, "libnccl-net") && (ends_with(lib, ".so") || ends_with(lib, ".so."));
  }
  if (contains(m, "GPU Direct RDMA ") && contains(m, "'"))
    return std::count(m.begin(), m.end(), '\'') == 2;
  if (contains(m, "NVLS multicast support is ")) return ends_with(m, "available");
  return true;
}

namespace {

// "cudaDev N" in the message is the device of the prefix ("[N]").
bool same_device(const NcclLinePrefix& p) {
  const auto dev = word_after(p.message, "cudaDev");
  return dev.empty() || leading_number(dev) == p.cuda_device;
}

// Each non-empty line of `text`, colour escapes and CRs removed, with its number.
template <typename Fn>
void each_line(std::string_view text, Fn&& fn) {
  size_t line_no = 0;
  std::string clean;
  for (size_t start = 0; start < text.size();) {
    size_t end = start;
    while (end < text.size() && text[end] != '\n' && text[end] != '\0') ++end;
    std::string_view raw = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    // Colour escapes ("\x1b[0m") of log collectors, and a CR of CRLF files.
    clean.clear();
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\x1b' && i + 1 < raw.size() && raw[i + 1] == '[') {
        size_t j = i + 2;
        while (j < raw.size() && !std::isalpha(static_cast<unsigned char>(raw[j]))) ++j;
        i = j;
        continue;
      }
      if (raw[i] != '\r') clean += raw[i];
    }
    if (!trim(clean).empty()) fn(line_no, std::string_view(clean));
  }
}

// Which hosts the prefixes name, over every input, before any line is read:
// a fragment of another rank's line glued before a host ("86vm:478:478",
// "nvlsPerRankSivm:478:478") is told from a host by the process id. A
// candidate that ends with a host seen unglued, with the same pid and at
// least as often, is that host; a glued candidate without one is unreadable.
class HostResolver {
 public:
  void survey(std::string_view text, bool* interleaved) {
    each_line(text, [&](size_t, std::string_view line) {
      size_t keywords = 0;
      const auto headers = find_headers(line, &keywords);
      if (headers.size() > 1 || (headers.empty() && keywords > 0)) *interleaved = true;
      for (const auto& h : headers) {
        auto& seen = candidates_[{h.prefix.host, h.prefix.pid}];
        ++seen.count;
        ++devices_[{h.prefix.host, h.prefix.pid, h.prefix.cuda_device}];
        ++threads_[{h.prefix.host, h.prefix.pid, h.prefix.tid}];
        if (const auto comm = word_after(h.prefix.message, "comm"); starts_with(comm, "0x"))
          ++comm_owners_[std::string(comm)][{h.prefix.host, h.prefix.pid}];
        for (const auto& value : counted_values(trim(h.prefix.message))) ++values_[value];
        if (const auto [var, value] = environment_value(trim(h.prefix.message)); !var.empty())
          ++environment_[var][value];
        if (h.glued || h.cut) *interleaved = true;
        if (!h.glued) ++seen.unglued;
      }
    });
    damaged_ |= *interleaved;
  }
  void resolve() {
    std::map<long, std::vector<std::string>> hosts_of_pid;
    for (const auto& [key, seen] : candidates_)
      if (seen.unglued > 0) hosts_of_pid[key.second].push_back(key.first);
    // Two hosts of one pid, one the end of the other ("e-a", "node-a"): a
    // stream cut inside a prefix, even where no line shows two prefixes.
    for (const auto& [pid, hosts] : hosts_of_pid)
      for (const auto& x : hosts)
        for (const auto& y : hosts)
          damaged_ |= x.size() < y.size() && y.compare(y.size() - x.size(), x.size(), x) == 0;
    // The longest host of the same pid, seen as often, that `candidate` ends with.
    const auto shorter_host = [&](const std::string& candidate, long pid, size_t count,
                                  const std::set<std::string>* among) {
      std::string best;
      for (const auto& host : hosts_of_pid[pid]) {
        if (host.size() >= candidate.size() || host.size() <= best.size()) continue;
        if (candidate.compare(candidate.size() - host.size(), host.size(), host) != 0) continue;
        if (among && !among->count(host)) continue;
        if (candidates_.at({host, pid}).count >= count) best = host;
      }
      return best;
    };
    // A host that starts with no letter or digit, or (damaged) the end of a
    // host seen more often with that pid ("-b" of "node-b"), was cut in front.
    const auto cut_in_front = [&](const std::string& candidate, long pid, size_t count) {
      bool cut = !std::isalnum(static_cast<unsigned char>(candidate[0]));
      for (const auto& host : hosts_of_pid[pid])
        cut |= damaged_ && host.size() > candidate.size() &&
               host.compare(host.size() - candidate.size(), candidate.size(), candidate) == 0 &&
               candidates_.at({host, pid}).count > count;
      return cut;
    };
    // Hosts that are no other host with a fragment before it ("86vm" is "vm").
    std::map<long, std::set<std::string>> roots;
    for (const auto& [pid, hosts] : hosts_of_pid)
      for (const auto& host : hosts) {
        const size_t count = candidates_.at({host, pid}).count;
        if (shorter_host(host, pid, count, nullptr).empty() && !cut_in_front(host, pid, count))
          roots[pid].insert(host);
      }
    for (const auto& [key, seen] : candidates_) {
      const auto& [candidate, pid] = key;
      std::string best = shorter_host(candidate, pid, seen.count, &roots[pid]);
      // In a damaged stream, a process seen in one line only is more likely
      // a prefix cut inside its pid ("node-a:3" + ":3401 [0] ...") than a
      // process that printed one line.
      if (best.empty() && seen.unglued > 0 && (seen.count > 1 || !damaged_) &&
          !cut_in_front(candidate, pid, seen.count))
        best = candidate;
      if (best != candidate) {
        alias_[key] = best;
        aliased_ |= !best.empty();
      }
    }
    // Devices and threads counted per host as resolved.
    for (auto* counts : {&devices_, &threads_}) {
      std::map<std::tuple<std::string, long, long>, size_t> by_host;
      for (const auto& [key, n] : *counts) {
        const auto& [host, pid, id] = key;
        if (const auto h = resolved(host, pid); !h.empty()) by_host[{h, pid, id}] += n;
      }
      *counts = std::move(by_host);
    }
  }
  std::string resolved(const std::string& host, long pid) const {
    const auto it = alias_.find({host, pid});
    return it == alias_.end() ? host : it->second;
  }
  // The host a prefix names, "" when it cannot be told. In a damaged stream a
  // process's device or thread seen once is a prefix cut inside its tid
  // ("node-b:3404:340" + "1 [0] NCCL INFO ...", "node-b:3404:34" + "3404 [3]
  // ..."); a thread that printed one line is lost with them.
  std::string host_of(const NcclLinePrefix& p) const {
    const std::string host = resolved(p.host, p.pid);
    if (damaged_ && !host.empty()) {
      const auto d = devices_.find({host, p.pid, p.cuda_device});
      if (d != devices_.end() && d->second < 2) return {};
      const auto t = threads_.find({host, p.pid, p.tid});
      if (t != threads_.end() && t->second < 2) return {};
    }
    return host;
  }
  bool any_alias() const { return aliased_ || damaged_; }
  // In how many lines "key value" appears: every rank of a communicator
  // prints its commId and size, so (two ranks or more) a value seen once in a
  // damaged stream was cut and glued ("0x8a143" + "368 - Init COMPLETE",
  // "nranks 8" + "6 cudaDev ...").
  // The network ("Using network Socket") likewise.
  static std::vector<std::string> counted_values(std::string_view msg) {
    std::vector<std::string> out;
    if (contains(msg, "comm 0x")) {
      for (const char* key : {"commId", "nranks", "nRanks", "nNodes"})
        if (const auto v = word_after(msg, key); !v.empty())
          out.push_back(std::string(key) + " " + std::string(v));
    }
    if (starts_with(msg, "Using network ") || starts_with(msg, "NET/Plugin") ||
        starts_with(msg, "NET/OFI"))
      out.emplace_back(number_pattern(msg));
    return out;
  }
  // "NCCL_X set by environment to V": a value seen once, where another value
  // of the variable was seen more often ("eth0" + "10.0.0.1<0>"); values that
  // differ on purpose (NCCL_HOSTID per rank) are each seen once and kept.
  static std::pair<std::string, std::string> environment_value(std::string_view msg) {
    const size_t at = msg.find(" set by environment to ");
    if (at == std::string_view::npos) return {};
    return {std::string(msg.substr(0, at)), std::string(msg.substr(at + 23))};
  }
  // A comm pointer is one process's: in a damaged stream, a line naming one
  // that another process printed more often is a tail glued to this prefix.
  bool comm_of_this_process(const NcclLinePrefix& p) const {
    const auto comm = word_after(p.message, "comm");
    const auto owners = comm_owners_.find(std::string(comm));
    if (owners == comm_owners_.end()) return true;
    const auto mine = owners->second.find({p.host, p.pid});
    const size_t own = mine == owners->second.end() ? 0 : mine->second;
    for (const auto& [process, n] : owners->second)
      if (n > own) return false;
    return true;
  }
  bool value_seen_twice(std::string_view msg) const {
    for (const auto& value : counted_values(msg)) {
      const auto it = values_.find(value);
      if (it == values_.end() || it->second < 2) return false;
    }
    if (const auto [var, value] = environment_value(msg); !var.empty()) {
      const auto values = environment_.find(var);
      if (values == environment_.end()) return true;
      const auto it = values->second.find(value);
      size_t most = 0;
      for (const auto& [v, n] : values->second) most = std::max(most, n);
      return (it != values->second.end() && it->second > 1) || most < 2;
    }
    return true;
  }
  // The host of a process whose prefix starts `text` ("node-b:3404:3404 [3] NCCL IN",
  // the head of a cut line), "" when `text` starts with no known process.
  std::string process_at_start(std::string_view text) const {
    const size_t c1 = text.find(':');
    if (c1 == std::string_view::npos || c1 == 0) return {};
    size_t c2 = c1 + 1;  // the pid ends at its tid's ':' or where the line was cut
    while (c2 < text.size() && is_digit(text[c2])) ++c2;
    if (c2 == c1 + 1 || c2 - c1 - 1 > 12) return {};
    NcclLinePrefix p;
    p.host = std::string(text.substr(0, c1));
    p.pid = *leading_number(text.substr(c1 + 1));
    if (!candidates_.count({p.host, p.pid})) return {};
    return host_of(p) + ":" + std::to_string(p.pid);
  }

 private:
  struct Seen {
    size_t count = 0;
    size_t unglued = 0;
  };
  std::map<std::pair<std::string, long>, Seen> candidates_;
  std::map<std::pair<std::string, long>, std::string> alias_;
  std::map<std::tuple<std::string, long, long>, size_t> devices_, threads_;
  std::map<std::string, size_t> values_;
  std::map<std::string, std::map<std::pair<std::string, long>, size_t>> comm_owners_;
  std::map<std::string, std::map<std::string, size_t>> environment_;
  bool aliased_ = false;
  bool damaged_ = false;  // some input has lines written over each other
};

class Reader {
 public:
  explicit Reader(const HostResolver& hosts) : hosts_(hosts) {}
  void read(const NcclLogInput& input, bool interleaved);
  Parsed finish();

 private:
  size_t rank_for(const NcclLinePrefix& p, const std::string& source);
  void nccl_line(size_t r, const NcclLinePrefix& p, const std::string& source, size_t line_no,
                 NcclInputSummary& summary);
  void other_line(std::string_view line);
  void framework_version(std::string_view line);
  void framework_job(std::string_view line);
  bool init_line(size_t r, std::string_view msg);
  void init_timings_line(size_t r, std::string_view msg);
  bool channel_line(size_t r, std::string_view msg);
  void classify_error(std::string_view msg, ErrorEvent base);
  void raise(NcclRankInfo& info, NcclInitState state) {
    if (info.init < state) info.init = state;
  }

  const HostResolver& hosts_;
  bool strict_ = false;  // the input being read is damaged: check lines against each other
  Parsed parsed_;
  std::map<std::tuple<std::string, long, int>, size_t> index_;
  std::vector<RankBuild> builds_;
  std::map<std::string, CommBuild> comms_;
  std::map<std::string, std::string> comm_key_of_pointer_;  // "host:pid:0x.." -> key
  std::map<std::string, size_t> warn_index_;
  std::vector<std::set<size_t>> warn_ranks_;  // per warning group: rank indices
};

size_t Reader::rank_for(const NcclLinePrefix& p, const std::string& source) {
  const auto key = std::make_tuple(p.host, p.pid, p.cuda_device);
  auto it = index_.find(key);
  if (it == index_.end()) {
    it = index_.emplace(key, parsed_.analysis.ranks.size()).first;
    NcclRankInfo info;
    info.host = p.host;
    info.pid = p.pid;
    info.cuda_device = p.cuda_device;
    parsed_.analysis.ranks.push_back(std::move(info));
    builds_.emplace_back();
  }
  auto& info = parsed_.analysis.ranks[it->second];
  add_unique(info.sources, source);
  return it->second;
}

// "eth0:192.0.2.2<0>", "[0]lo:127.0.0.1<0>", "ib0:fe80::1%ib0<0>": (name, address).
std::pair<std::string, std::string> interface_and_address(std::string_view item) {
  item = trim(item);
  if (!item.empty() && item.front() == '[') {
    const size_t close = item.find(']');
    if (close != std::string_view::npos) item.remove_prefix(close + 1);
  }
  const size_t colon = item.find(':');
  if (colon == std::string_view::npos) return {std::string(item), ""};
  std::string_view address = item.substr(colon + 1);
  const size_t lt = address.find('<');
  if (lt != std::string_view::npos) address = address.substr(0, lt);
  return {std::string(item.substr(0, colon)), std::string(address)};
}

// "[0]eth0:1.2.3.4<0> [1]eth1:..." -> the items after each "[n]".
std::vector<std::string_view> indexed_items(std::string_view list) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while ((at = list.find('[', at)) != std::string_view::npos) {
    const size_t close = list.find(']', at);
    if (close == std::string_view::npos) break;
    if (!all_digits(list.substr(at + 1, close - at - 1))) {
      at = close;
      continue;
    }
    size_t end = close + 1;
    while (end < list.size() && !is_space(list[end]) && list[end] != ';') ++end;
    if (end > close + 1) out.push_back(list.substr(close + 1, end - close - 1));
    at = end;
  }
  return out;
}

std::string cuda_version_of(long code) {  // 13000 -> "13.0", 12020 -> "12.2"
  return std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 10);
}

// False when the line contradicts what the rank said before (a damaged
// stream's line glued to another rank's tail).
bool Reader::init_line(size_t r, std::string_view msg) {
  auto& info = parsed_.analysis.ranks[r];
  const auto pointer = word_after(msg, "comm");
  if (!starts_with(pointer, "0x")) return true;
  const std::string pointer_key =
      info.host + ":" + std::to_string(info.pid) + ":" + std::string(pointer);
  NcclCommMembership* m = nullptr;
  for (auto& c : info.communicators)
    if (c.comm == pointer) m = &c;
  const auto bus = word_after(msg, "busId");
  auto& known_bus = builds_[r].bus_id;
  const auto comm_id = word_after(msg, "commId");
  if (strict_ && ((!bus.empty() && !known_bus.empty() && bus != known_bus) ||
                  (m && m->init >= NcclInitState::kInitStart && contains(msg, "- Init START"))))
    return false;  // another busId, a second Init START of one communicator, a cut value
  if (known_bus.empty()) known_bus = std::string(bus);
  if (!m) {
    info.communicators.push_back({});
    m = &info.communicators.back();
    m->comm = std::string(pointer);
  }
  if (m->comm_id.empty() && starts_with(comm_id, "0x")) m->comm_id = std::string(comm_id);
  m->rank = number_after(msg, "rank", m->rank);
  m->nranks = number_after(msg, "nranks", number_after(msg, "nRanks", m->nranks));
  // Before its commId is known (an Init START that was cut, or NCCL < 2.12),
  // the rank's lines go to its comm pointer; finish() merges them.
  const std::string key = m->comm_id.empty() ? "ptr " + pointer_key : m->comm_id;
  comm_key_of_pointer_[pointer_key] = key;
  auto& comm = comms_[key];
  if (m->nranks > comm.nranks) comm.nranks = m->nranks;
  if (m->rank >= 0) comm.ranks.insert(m->rank);
  const int nnodes = number_after(msg, "nNodes", 0);
  if (nnodes > comm.nnodes) comm.nnodes = nnodes;
  NcclInitState state = NcclInitState::kSeen;
  if (contains(msg, "- Init START")) {
    state = NcclInitState::kInitStart;
    builds_[r].current_comm = key;
  } else if (contains(msg, "- Init COMPLETE")) {
    state = NcclInitState::kInitComplete;
  } else if (contains(msg, "- Destroy COMPLETE")) {
    state = NcclInitState::kDestroyed;
  } else if (contains(msg, "- Abort COMPLETE")) {
    state = NcclInitState::kAborted;
  } else if (nnodes > 0 && m->init < NcclInitState::kInitStart) {
    state = NcclInitState::kInitStart;  // "comm 0x.. rank 1 nRanks 2 nNodes 2 ..."
  }
  if (state == NcclInitState::kDestroyed && m->init != NcclInitState::kInitComplete &&
      m->init != NcclInitState::kDestroyed)
    state = m->init;  // destroyed before init completed: keep what init reached
  if (state == NcclInitState::kAborted || m->init < state) m->init = state;
  if (state >= NcclInitState::kInitStart && state != NcclInitState::kAborted &&
      builds_[r].current_comm.empty())
    builds_[r].current_comm = key;
  return true;
}

// "Init timings - ncclCommInitRank: rank 6 nranks 8 total 0.45 (...)": NCCL
// prints it right after Init COMPLETE (2.23+), so it says init completed when
// that line was lost.
void Reader::init_timings_line(size_t r, std::string_view msg) {
  auto& info = parsed_.analysis.ranks[r];
  const int rank = number_after(msg, "rank", -1);
  if (rank >= 0) builds_[r].inferred_rank = rank;
  const std::string process = info.host + ":" + std::to_string(info.pid) + ":";
  for (auto& m : info.communicators)
    if (m.rank == rank && m.init < NcclInitState::kInitComplete &&
        m.init >= NcclInitState::kInitStart &&
        (m.comm_id == builds_[r].current_comm ||
         "ptr " + process + m.comm == builds_[r].current_comm))
      m.init = NcclInitState::kInitComplete;
}

// The class of a transport as logged: "P2P/CUMEM/read" -> "P2P/CUMEM";
// "NET/IB/0(8)/GDRDMA" -> "NET/IB". `detail` gets it without device indices.
std::string transport_class(std::string_view via, std::string* detail, std::optional<bool>* gdr,
                            std::optional<int>* proxy) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t slash; (slash = via.find('/', start)) != std::string_view::npos; start = slash + 1)
    parts.push_back(via.substr(start, slash - start));
  parts.push_back(via.substr(start));
  const std::string kind(parts[0]);
  *detail = std::string(via);
  if ((kind == "NET" || kind == "COLLNET") && parts.size() >= 2) {
    std::string d = kind + "/" + std::string(parts[1]);
    bool has_gdr = false;
    for (size_t i = 2; i < parts.size(); ++i) {
      const auto part = parts[i];
      if (i == 2 && !part.empty() && is_digit(part[0])) {
        const size_t open = part.find('(');
        if (open != std::string_view::npos) {
          const auto v = leading_number(part.substr(open + 1));
          if (v && *v < (1L << 30)) *proxy = static_cast<int>(*v);
        }
        continue;  // the NIC index: channels spread over NICs fold into one
      }
      if (starts_with(part, "GDRDMA")) has_gdr = true;
      d += "/" + std::string(part);
    }
    *gdr = has_gdr;
    *detail = d;
    return kind + "/" + std::string(parts[1]);
  }
  if (kind == "P2P" && parts.size() >= 2) {
    std::string mechanism(parts[1]);
    if (starts_with(mechanism, "direct")) mechanism = "direct";
    return "P2P/" + mechanism;
  }
  return kind;
}

// "Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA" (2.12+),
// "Channel 00 : 0[1c000] -> 1[1d000] via P2P/IPC" (2.7-2.11),
// "Ring 00 : 0 -> 1 [send] via NET/IB/0" (older). False when it looked like
// one but could not be read (a cut line).
bool Reader::channel_line(size_t r, std::string_view msg) {
  const size_t space = msg.find(' ');
  std::string_view rest = msg.substr(space + 1);
  const auto channel = leading_number(rest);
  if (!channel) return false;
  const size_t colon = rest.find(" : ");
  if (colon == std::string_view::npos) return false;
  rest = rest.substr(colon + 3);
  const size_t via_at = rest.find(" via ");
  if (via_at == std::string_view::npos) return !contains(rest, "->");  // ring order lines
  std::string_view pair = rest.substr(0, via_at);
  const std::string_view via = trim(rest.substr(via_at + 5));
  if (via.empty()) return false;
  std::optional<bool> side_send;
  if (contains(pair, "[send]")) side_send = true;
  if (contains(pair, "[receive]")) side_send = false;
  const size_t arrow = pair.find("->");
  if (arrow == std::string_view::npos) {
    // "CollNet 00/0 : 0 [send] via COLLNET/..." and NVLS lines: one rank, no pair.
    add_unique(parsed_.analysis.ranks[r].collnet, std::string(via));
    return true;
  }
  const auto from = leading_number(trim(pair.substr(0, arrow)));
  const auto to = leading_number(trim(pair.substr(arrow + 2)));
  if (!from || !to || *from >= (1L << 30) || *to >= (1L << 30)) return false;
  std::string detail;
  std::optional<bool> gdr;
  std::optional<int> proxy;
  const std::string cls = transport_class(via, &detail, &gdr, &proxy);
  if (starts_with(cls, "COLLNET")) {
    add_unique(parsed_.analysis.ranks[r].collnet, std::string(via));
    return true;
  }
  auto& comm = comms_[builds_[r].current_comm];
  auto& link = comm.links[{static_cast<int>(*from), static_cast<int>(*to), cls}];
  link.details.insert(detail);
  link.channels.insert(*channel);
  if (gdr && side_send) {
    auto& slot = *side_send ? link.gdr_send : link.gdr_receive;
    slot = slot.value_or(false) || *gdr;
  }
  if (proxy) link.pxn.insert(*proxy);
  if (side_send) builds_[r].inferred_rank = static_cast<int>(*side_send ? *from : *to);
  auto& info = parsed_.analysis.ranks[r];
  raise(info, NcclInitState::kConnecting);
  for (auto& m : info.communicators)
    if ((m.comm_id == builds_[r].current_comm ||
         "ptr " + info.host + ":" + std::to_string(info.pid) + ":" + m.comm ==
             builds_[r].current_comm) &&
        m.init < NcclInitState::kConnecting && m.init >= NcclInitState::kInitStart)
      m.init = NcclInitState::kConnecting;
  return true;
}

// The address or host an error line names as the other end.
std::string peer_in(std::string_view msg) {
  for (std::string_view key :
       {"remote peer ", "from peer ", "Connect to ", "connect to ", "peer "}) {
    const size_t at = msg.find(key);
    if (at == std::string_view::npos) continue;
    std::string_view rest = msg.substr(at + key.size());
    size_t n = 0;
    while (n < rest.size() && !is_space(rest[n]) && rest[n] != '<' && rest[n] != ',') ++n;
    std::string_view peer = rest.substr(0, n);
    while (!peer.empty() && (peer.back() == ':' || peer.back() == '.')) peer.remove_suffix(1);
    if (!peer.empty() && peer != "with" && peer != "closed") return std::string(peer);
  }
  return {};
}

void Reader::classify_error(std::string_view msg, ErrorEvent e) {
  auto add = [&](ErrorKind kind) {
    e.kind = kind;
    e.message = std::string(trim(msg).substr(0, 400));
    if (e.peer.empty()) e.peer = peer_in(msg);
    parsed_.errors.push_back(e);
  };
  if (contains(msg, "Watchdog caught collective operation timeout")) {
    const size_t seq = msg.find("SeqNum=");
    if (seq != std::string_view::npos) e.seq = leading_number(msg.substr(seq + 7)).value_or(-1);
    const size_t op = msg.find("OpType=");
    if (op != std::string_view::npos) {
      std::string_view o = msg.substr(op + 7);
      e.op = std::string(o.substr(0, o.find_first_of(", )")));
    }
    const size_t numel = msg.find("NumelIn=");
    if (numel != std::string_view::npos)
      e.numel = leading_number(msg.substr(numel + 8)).value_or(-1);
    const size_t r = msg.find("[Rank ");
    if (r != std::string_view::npos && e.rank < 0) {
      const auto v = leading_number(msg.substr(r + 6));
      if (v && *v < (1L << 30)) e.rank = static_cast<int>(*v);
    }
    return add(ErrorKind::kWatchdogTimeout);
  }
  if (contains(msg, "Got completion from peer")) {
    size_t at = msg.find("status=");
    if (at != std::string_view::npos) {
      e.ib_status = static_cast<int>(leading_number(msg.substr(at + 7)).value_or(-1));
    } else if ((at = msg.find("with error ")) != std::string_view::npos) {
      e.ib_status = static_cast<int>(leading_number(msg.substr(at + 11)).value_or(-1));
    }
    return add(ErrorKind::kIbCompletion);
  }
  // NCCL 2.29: a send posted outside a group before its peer's receive makes
  // NET/Socket connect to the peer's local (AF_UNIX, family 1) address.
  if (contains(msg, "ncclSocketInit: connecting to address") && contains(msg, "family 1 "))
    return add(ErrorKind::kUngroupedSendRecv);
  if (contains(msg, "Connection refused")) return add(ErrorKind::kConnectionRefused);
  if (contains(msg, "Connection closed by remote peer") || contains(msg, "peer closed") ||
      contains(msg, "Connection reset by peer") || contains(msg, "remote process exited") ||
      contains(msg, "Broken pipe") || contains(msg, "ncclRemoteError"))
    return add(contains(msg, "ncclRemoteError") || contains(msg, "remote process exited")
                   ? ErrorKind::kRemoteError
                   : ErrorKind::kPeerClosed);
  if (contains(msg, "Bootstrap") && (contains(msg, "timeout") || contains(msg, "timed out")))
    return add(ErrorKind::kBootstrapTimeout);
  if (contains(msg, "socketStartConnect") || contains(msg, "No route to host") ||
      contains(msg, "Connection timed out") || contains(msg, "Call to connect timeout") ||
      contains(msg, "connection abort"))
    return add(ErrorKind::kConnectFailed);
  if (contains(msg, "ncclInvalidUsage") || contains(msg, "invalid usage") ||
      contains(msg, "ungrouped") || contains(msg, "without a matching") ||
      contains(msg, "invalid root") || contains(msg, "Invalid config") ||
      contains(msg, "collective mismatch") || contains(msg, "argcheck") ||
      contains(msg, "Message truncated : received"))
    return add(ErrorKind::kInvalidUsage);
  if (contains(msg, "Cuda failure") || contains(msg, "CUDA error") ||
      contains(msg, "ncclUnhandledCudaError") || contains(msg, "unhandled cuda error"))
    return add(ErrorKind::kCudaError);
  if (contains(msg, "ncclSystemError") || contains(msg, "unhandled system error") ||
      (contains(msg, "Call to ibv_") && contains(msg, "failed")))
    return add(ErrorKind::kSystemError);
  if (contains(msg, "ncclInternalError") || contains(msg, "internal error"))
    return add(ErrorKind::kInternalError);
}

void Reader::nccl_line(size_t r, const NcclLinePrefix& p, const std::string& source, size_t line_no,
                       NcclInputSummary& summary) {
  auto& info = parsed_.analysis.ranks[r];
  ++info.lines;
  std::string_view msg = trim(p.message);
  if (p.level == "WARN" && starts_with(msg, "NET/OFI")) {
    // The OFI (libfabric) plugin, loaded and failing on nodes that use
    // another network: one finding, not an error.
    ++parsed_.ofi_warn_lines;
    parsed_.ofi_warn_ranks.insert(r);
    if (parsed_.ofi_warn_example.empty())
      parsed_.ofi_warn_example = std::string(msg.substr(0, 300));
    return;
  }
  if (p.level == "WARN" || p.level == "ABORT") {
    ++info.warn_lines;
    ++builds_[r].error_lines;
    const std::string pattern = number_pattern(msg.substr(0, 300));
    auto [it, added] = warn_index_.emplace(pattern, parsed_.analysis.warnings.size());
    if (added) {
      NcclWarnGroup g;
      g.pattern = pattern;
      g.example = std::string(msg.substr(0, 300));
      g.first_seen = source + ":" + std::to_string(line_no);
      parsed_.analysis.warnings.push_back(std::move(g));
      warn_ranks_.emplace_back();
    }
    auto& g = parsed_.analysis.warnings[it->second];
    ++g.count;
    add_unique(g.hosts, info.host);
    warn_ranks_[it->second].insert(r);  // numbers known in finish()
    ErrorEvent e;
    e.rank_index = r;
    e.host = info.host;
    e.where = p.location;
    classify_error(msg, e);
    return;
  }
  if (contains(msg, " -> ") && !p.message.empty() && msg.find(".cc:") != std::string_view::npos &&
      msg.find(" -> ") < 60 && !starts_with(msg, "Channel")) {
    ++builds_[r].error_lines;  // "misc/socket.cc:80 -> 6": an error returned up the stack
    return;
  }
  if (starts_with(msg, "NCCL version ")) {
    std::string_view v = msg.substr(13);
    v = v.substr(0, v.find_first_of(" \t"));
    const size_t plus = v.find('+');
    info.nccl_version = std::string(v.substr(0, plus));
    if (plus != std::string_view::npos && starts_with(v.substr(plus + 1), "cuda"))
      info.nccl_cuda = std::string(v.substr(plus + 5));
    raise(info, NcclInitState::kBootstrap);
    return;
  }
  if (starts_with(msg, "cudaDriverVersion ")) {
    if (const auto v = leading_number(msg.substr(18))) info.cuda_driver = cuda_version_of(*v);
    return;
  }
  if (starts_with(msg, "Bootstrap") && contains(msg, "Using ")) {
    const auto list = msg.substr(msg.find("Using ") + 6);
    const auto [name, address] = interface_and_address(list.substr(0, list.find(' ')));
    info.bootstrap_interface = name;
    info.bootstrap_address = address;
    if (!address.empty()) parsed_.host_of_address.emplace(address, info.host);
    raise(info, NcclInitState::kBootstrap);
    return;
  }
  if (starts_with(msg, "NET/Plugin") || starts_with(msg, "NET/OFI")) {
    if (starts_with(msg, "NET/OFI")) {
      const size_t using_at = msg.find("Using ");
      if (using_at != std::string_view::npos && info.net_plugin.empty() &&
          !contains(msg, "Using Libfabric version"))
        info.net_plugin = std::string(trim(msg.substr(using_at + 6)));
      return;
    }
    if (contains(msg, "Loaded net plugin") || contains(msg, "Loaded plugin")) {
      const size_t at = msg.find("plugin ");
      info.net_plugin = std::string(trim(msg.substr(at + 7)));
    } else if (contains(msg, "load returned") || contains(msg, "Could not find") ||
               contains(msg, "No plugin found") || contains(msg, "Failed") ||
               contains(msg, "dlerror") || contains(msg, "failed")) {
      std::string_view what = msg.substr(msg.find_first_of(":") + 1);
      add_unique(info.plugin_failures, std::string(trim(what).substr(0, 300)));
    }
    return;
  }
  if (contains(msg, "GPU Direct RDMA ")) {
    const bool enabled = contains(msg, "GPU Direct RDMA Enabled");
    std::string hca;
    const size_t q = msg.find('\'');
    if (q != std::string_view::npos) {
      const size_t q2 = msg.find('\'', q + 1);
      hca = std::string(msg.substr(q + 1, q2 == std::string_view::npos ? 0 : q2 - q - 1));
    } else {
      const auto w = word_after(msg, "HCA");
      hca = w.empty() ? "?" : "HCA " + std::string(w);
    }
    add_unique(enabled ? info.gdr_enabled_hcas : info.gdr_disabled_hcas, hca);
    return;
  }
  if (starts_with(msg, "NET/IB")) {
    if (contains(msg, "No device found")) info.ib_no_device = true;
    const size_t using_at = msg.find(": Using ");
    if (using_at != std::string_view::npos) {
      std::string_view list = msg.substr(using_at + 8);
      const size_t semi = list.find(';');
      for (const auto item : indexed_items(list.substr(0, semi)))
        add_unique(info.ib_devices, std::string(item));
    }
    return;
  }
  if (starts_with(msg, "NET/Socket") && contains(msg, "Using ")) {
    for (const auto item : indexed_items(msg.substr(msg.find("Using ") + 6)))
      add_unique(info.socket_interfaces, interface_and_address(item).first);
    return;
  }
  if (starts_with(msg, "Using network ")) {
    info.network = std::string(trim(msg.substr(14)));
    return;
  }
  if (starts_with(msg, "Using internal Network ")) {  // NCCL < 2.7
    info.network = std::string(trim(msg.substr(23)));
    return;
  }
  if (starts_with(msg, "NCCL_") && contains(msg, " set by environment to ")) {
    const size_t at = msg.find(" set by environment to ");
    std::string_view value = trim(msg.substr(at + 23));
    if (!value.empty() && value.back() == '.') value.remove_suffix(1);
    info.environment[std::string(msg.substr(0, at))] = std::string(value);
    parsed_.process_environment[info.host + ":" + std::to_string(info.pid)]
                               [std::string(msg.substr(0, at))] = std::string(value);
    return;
  }
  if (contains(msg, "NVLS multicast support is ")) {
    info.nvls_support = !contains(msg, "is not available");
    return;
  }
  if (starts_with(msg, "Connected NVLS")) {
    info.nvls_connected = true;
    return;
  }
  if (starts_with(msg, "Channel ") || starts_with(msg, "Ring ") || starts_with(msg, "CollNet ") ||
      starts_with(msg, "Coll ")) {
    if (!channel_line(r, msg)) ++summary.garbled_lines;
    return;
  }
  if (contains(msg, "comm 0x") &&
      (contains(msg, " rank ") || contains(msg, "- Init") || contains(msg, "COMPLETE"))) {
    if (!init_line(r, msg)) {
      --summary.nccl_lines;
      ++summary.garbled_lines;
      ++parsed_.process_unreadable[info.host + ":" + std::to_string(info.pid)];
    }
    return;
  }
  if (starts_with(msg, "Init timings - ")) {
    init_timings_line(r, msg);
    return;
  }
  // An INFO line can carry an error too ("[Service thread] Connection closed by localRank").
  if (contains(msg, "ncclRemoteError") || contains(msg, "remote process exited")) {
    ErrorEvent e;
    e.rank_index = r;
    e.host = info.host;
    classify_error(msg, e);
  }
}

// PyTorch and launcher output: only the errors it reports about NCCL.
void Reader::other_line(std::string_view line) {
  framework_version(line);
  framework_job(line);
  if (contains(line, "Message truncated : received")) {
    ErrorEvent e;
    classify_error(line, e);
    return;
  }
  // PyTorch's "Last error:" text under an ncclRemoteError names the peer.
  if (contains(line, "remote peer ") && !parsed_.errors.empty() &&
      parsed_.errors.back().kind == ErrorKind::kRemoteError && parsed_.errors.back().peer.empty()) {
    parsed_.errors.back().peer = peer_in(line);
    return;
  }
  // A program's own report of NCCL's result ("NCCL error ...: 'internal error - please
  // report this issue to the NCCL developers'").
  if (contains(line, "internal error - please report")) {
    ErrorEvent e;
    classify_error(line, e);
    return;
  }
  if (!contains(line, "Watchdog caught collective operation timeout") &&
      !contains(line, "ncclRemoteError") && !contains(line, "ncclSystemError") &&
      !contains(line, "ncclInvalidUsage") && !contains(line, "ncclUnhandledCudaError") &&
      !contains(line, "ncclInternalError"))
    return;
  ErrorEvent e;
  // "[rank3]:[E321 ...] ... [Rank 3] Watchdog ..." or "[Rank 3] ..."
  for (std::string_view key : {"[Rank ", "[rank"}) {
    const size_t at = line.find(key);
    if (at == std::string_view::npos) continue;
    const auto v = leading_number(line.substr(at + key.size()));
    if (v && *v < (1L << 30)) {
      e.rank = static_cast<int>(*v);
      break;
    }
  }
  classify_error(line, e);
}

// The world size and rank frameworks print: PyTorch's ProcessGroupNCCL options
// ("initialization options: size: 4, global rank: 0"), vLLM's distributed init
// ("world_size=4 rank=0 local_rank=0 distributed_init_method=..."), DeepSpeed's
// launcher ("dist_world_size=4"), Megatron's arguments ("using world size: 8,
// data-parallel size: 4, ...").
void Reader::framework_job(std::string_view line) {
  const auto number_after = [&](std::string_view key) -> std::optional<int> {
    const size_t at = line.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    const auto n = leading_number(line.substr(at + key.size()));
    if (!n || *n < 0 || *n >= (1L << 30)) return std::nullopt;
    return static_cast<int>(*n);
  };
  const auto world = [&](std::optional<int> n, const char* source) {
    if (!n || *n <= 0) return false;
    if (parsed_.framework_world_size_source.empty()) parsed_.framework_world_size_source = source;
    parsed_.framework_world_size = std::max(parsed_.framework_world_size, *n);
    return true;
  };
  if (world(number_after("initialization options: size: "), "PyTorch")) {
    if (const auto r = number_after(", global rank: ")) parsed_.framework_ranks.insert(*r);
    return;
  }
  if (contains(line, "distributed_init_method=") && world(number_after("world_size="), "vLLM")) {
    if (const auto r = number_after(" rank=")) parsed_.framework_ranks.insert(*r);
    return;
  }
  if (world(number_after("dist_world_size="), "DeepSpeed")) return;
  world(number_after("using world size: "), "Megatron");
}

// The NCCL version a framework prints: PyTorch's errors ("..., NCCL version
// 2.20.5"), vLLM ("vLLM is using nccl==2.21.5"), DeepSpeed/Megatron/JAX
// environment reports ("nccl version 2.18.1", "NCCL version: (2, 18, 1)").
void Reader::framework_version(std::string_view line) {
  const auto version_at = [&](size_t at, const char* source, bool tuple) {
    std::string v;
    if (tuple) {  // "(2, 18, 1)"
      for (size_t i = at; i < line.size() && i < at + 16 && line[i] != ')'; ++i)
        if (is_digit(line[i]) || line[i] == ',') v += line[i] == ',' ? '.' : line[i];
    } else {
      size_t end = at;
      while (end < line.size() && (is_digit(line[end]) || line[end] == '.')) ++end;
      v = std::string(line.substr(at, end - at));
    }
    while (!v.empty() && v.back() == '.') v.pop_back();
    if (std::count(v.begin(), v.end(), '.') == 2) parsed_.framework_versions.emplace(v, source);
  };
  if (size_t at = line.find("nccl=="); at != std::string_view::npos)
    return version_at(at + 6, "vLLM", false);
  for (std::string_view key :
       {"NCCL version ", "nccl version ", "NCCL version: ", "NCCL version=", "nccl_version "}) {
    const size_t at = line.find(key);
    if (at == std::string_view::npos) continue;
    const bool tuple = at + key.size() < line.size() && line[at + key.size()] == '(';
    const char* source = contains(line, "ProcessGroupNCCL") || contains(line, "torch") ? "PyTorch"
                         : contains(line, "DeepSpeed") || contains(line, "deepspeed")  ? "DeepSpeed"
                         : contains(line, "jax") || contains(line, "JAX")              ? "JAX"
                         : contains(line, "megatron") || contains(line, "Megatron")
                             ? "Megatron"
                             : "framework output";
    return version_at(at + key.size() + (tuple ? 1 : 0), source, tuple);
  }
}

void Reader::read(const NcclLogInput& input, bool interleaved) {
  NcclInputSummary summary;
  summary.name = input.name;
  summary.bytes = input.text.size();
  const std::string_view text = input.text;
  size_t nul = 0, control = 0;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0)
      ++nul;
    else if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != 0x1b) || c == 0x7f)
      ++control;
  }
  if (nul > 0 || (text.size() >= 64 && control * 10 > text.size())) {
    summary.binary = true;
    summary.notes.push_back(std::to_string(nul) + " NUL and " + std::to_string(control) +
                            " other control bytes: binary data; only its text lines were read");
  }
  if (!text.empty() && text.back() != '\n') summary.truncated_last_line = true;
  strict_ = interleaved;
  const auto process_of = [](const std::string& host, long pid) {
    return host + ":" + std::to_string(pid);
  };
  // A line that cannot be read: counted against its process when its prefix
  // says which, else against the input.
  const auto unreadable = [&](const std::string& host, long pid) {
    ++summary.garbled_lines;
    if (host.empty())
      ++parsed_.input_unattributed[input.name];
    else
      ++parsed_.process_unreadable[process_of(host, pid)];
  };
  const auto unreadable_process = [&](const std::string& process) {
    ++summary.garbled_lines;
    ++parsed_.process_unreadable[process];
  };
  each_line(text, [&](size_t line_no, std::string_view line) {
    ++summary.lines;
    size_t keywords = 0;
    const auto headers = find_headers(line, &keywords);
    if (headers.empty()) {
      if (const auto process = hosts_.process_at_start(line); !process.empty()) {
        unreadable_process(process);  // a prefix cut before or inside its level word
      } else if (keywords > 0) {
        unreadable({}, 0);
      } else if (const size_t at = line.find("NCCL version ");
                 at != std::string_view::npos && at < 48 &&
                 line.find(" NCCL INFO") == std::string_view::npos) {
        // Older NCCL prints this once per job, without a prefix (a launcher's may be there).
        auto v = line.substr(at + 13);
        v = v.substr(0, v.find_first_of(" \t+"));
        add_unique(parsed_.bare_versions, std::string(v));
        ++summary.nccl_lines;
      } else {
        ++summary.other_lines;
        other_line(line);
      }
      return;
    }
    // Several prefixes in one line: output of ranks written over each other;
    // all but the last were cut.
    for (size_t i = 0; i + 1 < headers.size(); ++i)
      unreadable(hosts_.host_of(headers[i].prefix), headers[i].prefix.pid);
    // A fragment glued before the first prefix ("...NCCL INFnode-a:..",
    // "86vm:478:.."): the head of a line cut there; its process when its own
    // prefix is still readable.
    const auto& first = headers.front();
    if (const auto process = hosts_.process_at_start(line.substr(0, first.start)); !process.empty())
      unreadable_process(process);
    else if (first.glued || hosts_.host_of(first.prefix) != first.prefix.host)
      unreadable({}, 0);
    auto p = headers.back().prefix;
    p.host = hosts_.host_of(p);
    if (headers.back().cut || p.host.empty() ||
        (interleaved &&
         (!plausible_message(trim(p.message)) || !hosts_.value_seen_twice(trim(p.message)) ||
          !same_device(p) || !hosts_.comm_of_this_process(headers.back().prefix)))) {
      unreadable(p.host, p.pid);
      return;
    }
    const size_t r = rank_for(p, input.name);
    ++summary.nccl_lines;
    nccl_line(r, p, input.name, line_no, summary);
  });
  if (summary.truncated_last_line) summary.notes.push_back("the last line has no newline: cut");
  if (summary.garbled_lines > 0)
    summary.notes.push_back(std::to_string(summary.garbled_lines) +
                            " NCCL line(s) cut or interleaved: not read");
  if (summary.nccl_lines == 0)
    summary.notes.push_back("no NCCL lines (was NCCL_DEBUG=INFO set for this run?)");
  parsed_.analysis.inputs.push_back(std::move(summary));
}

Parsed Reader::finish() {
  auto& a = parsed_.analysis;
  // Each rank's number: in its largest communicator.
  for (size_t i = 0; i < a.ranks.size(); ++i) {
    auto& info = a.ranks[i];
    const NcclCommMembership* best = nullptr;
    for (auto& m : info.communicators) {
      if (builds_[i].error_lines > 0 &&
          (m.init == NcclInitState::kInitStart || m.init == NcclInitState::kConnecting))
        m.init = NcclInitState::kAborted;  // an error returned before init completed
      if (!best || m.nranks > best->nranks) best = &m;
    }
    if (best) {
      info.rank = best->rank;
      info.nranks = best->nranks;
      NcclInitState state = best->init;
      // Channel lines without an Init line (NCCL < 2.12 prints no START).
      if (state < info.init && state < NcclInitState::kInitComplete) state = info.init;
      info.init = state;
    } else if (builds_[i].error_lines > 0 && info.init >= NcclInitState::kConnecting) {
      info.init = NcclInitState::kAborted;
    }
    // Every line with its communicator's rank number lost (a damaged stream):
    // the number its Init timings or [send]/[receive] channel lines give.
    if (info.rank < 0 && builds_[i].inferred_rank >= 0) {
      info.rank = builds_[i].inferred_rank;
      std::string key = builds_[i].current_comm;
      if (key.empty()) {
        std::vector<std::string> ids;
        for (const auto& [k, build] : comms_)
          if (!k.empty() && !starts_with(k, "ptr ")) ids.push_back(k);
        if (ids.size() == 1) key = ids[0];
      }
      if (!key.empty()) comms_[key].ranks.insert(info.rank);
    }
    const std::string process = info.host + ":" + std::to_string(info.pid);
    auto& best_init = parsed_.process_best_init[process];
    if (best_init < info.init) best_init = info.init;
  }
  std::stable_sort(a.ranks.begin(), a.ranks.end(), [](const auto& x, const auto& y) {
    const int rx = x.rank < 0 ? (1 << 30) : x.rank, ry = y.rank < 0 ? (1 << 30) : y.rank;
    return std::tie(rx, x.host, x.pid, x.cuda_device) < std::tie(ry, y.host, y.pid, y.cuda_device);
  });
  // The sort moved ranks: map old indices (in errors and warnings) to new ones.
  std::map<std::tuple<std::string, long, int>, size_t> new_index;
  for (size_t i = 0; i < a.ranks.size(); ++i)
    new_index[{a.ranks[i].host, a.ranks[i].pid, a.ranks[i].cuda_device}] = i;
  std::vector<size_t> moved(index_.size());
  for (const auto& [key, old] : index_) moved[old] = new_index[key];
  for (auto& e : parsed_.errors)
    if (e.rank_index < moved.size()) {
      e.rank_index = moved[e.rank_index];
      if (e.rank < 0) e.rank = a.ranks[e.rank_index].rank;
    }
  {
    std::set<size_t> ofi;
    for (const size_t old : parsed_.ofi_warn_ranks) ofi.insert(moved[old]);
    parsed_.ofi_warn_ranks = std::move(ofi);
  }
  // Warning groups' ranks, now that every rank's number is known.
  for (size_t g = 0; g < a.warnings.size(); ++g) {
    std::set<int> numbers;
    for (const size_t old : warn_ranks_[g])
      if (a.ranks[moved[old]].rank >= 0) numbers.insert(a.ranks[moved[old]].rank);
    a.warnings[g].ranks.assign(numbers.begin(), numbers.end());
    std::sort(a.warnings[g].hosts.begin(), a.warnings[g].hosts.end());
  }
  std::set<std::string> hosts, versions, plugins;
  std::set<std::string> networks;
  for (const auto& info : a.ranks) {
    hosts.insert(info.host);
    if (!info.nccl_version.empty()) versions.insert(info.nccl_version);
    if (!info.network.empty()) networks.insert(info.network);
    if (!info.net_plugin.empty()) plugins.insert(info.net_plugin);
    for (const auto& d : info.ib_devices) add_unique(a.ib_devices, d);
    for (const auto& s : info.socket_interfaces) add_unique(a.socket_interfaces, s);
    add_unique(a.bootstrap_interfaces, info.bootstrap_interface);
  }
  if (versions.empty())
    for (const auto& v : parsed_.bare_versions) versions.insert(v);
  if (versions.empty())
    for (const auto& [v, source] : parsed_.framework_versions) versions.insert(v);
  a.hosts.assign(hosts.begin(), hosts.end());
  a.nccl_versions.assign(versions.begin(), versions.end());
  for (const auto& p : plugins) a.net_plugin += (a.net_plugin.empty() ? "" : ", ") + p;
  // Lines kept under a comm pointer join its commId, or (none known) the
  // communicator without one.
  // A membership whose commId lines were all lost belongs to the one
  // communicator of its size, when there is only one.
  std::map<int, std::vector<std::string>> ids_of_size;
  for (const auto& [key, build] : comms_)
    if (!key.empty() && !starts_with(key, "ptr ")) ids_of_size[build.nranks].push_back(key);
  for (auto& info : a.ranks)
    for (auto& m : info.communicators) {
      const auto ids = ids_of_size.find(m.nranks);
      if (m.comm_id.empty() && ids != ids_of_size.end() && ids->second.size() == 1)
        m.comm_id = ids->second.front();
    }
  for (const auto& info : a.ranks)
    for (const auto& m : info.communicators) {
      const auto from =
          comms_.find("ptr " + info.host + ":" + std::to_string(info.pid) + ":" + m.comm);
      if (from == comms_.end()) continue;
      auto& into = comms_[m.comm_id];
      into.nranks = std::max(into.nranks, from->second.nranks);
      into.nnodes = std::max(into.nnodes, from->second.nnodes);
      into.ranks.insert(from->second.ranks.begin(), from->second.ranks.end());
      for (auto& [k, lb] : from->second.links) {
        auto& link = into.links[k];
        link.details.insert(lb.details.begin(), lb.details.end());
        link.channels.insert(lb.channels.begin(), lb.channels.end());
        for (auto [slot, value] :
             {std::pair{&link.gdr_send, lb.gdr_send}, std::pair{&link.gdr_receive, lb.gdr_receive}})
          if (value) *slot = slot->value_or(false) || *value;
        link.pxn.insert(lb.pxn.begin(), lb.pxn.end());
      }
      comms_.erase(from);
    }
  // Communicators, their links.
  std::set<std::string> link_networks;
  for (auto& [key, build] : comms_) {
    NcclCommunicator c;
    c.id = key;
    c.nranks = build.nranks;
    c.nnodes = build.nnodes;
    c.ranks_seen.assign(build.ranks.begin(), build.ranks.end());
    for (auto& [k, lb] : build.links) {
      NcclLink l;
      std::tie(l.from, l.to, l.transport) = k;
      l.details.assign(lb.details.begin(), lb.details.end());
      l.channels = lb.channels.size();
      l.gdrdma_send = lb.gdr_send;
      l.gdrdma_receive = lb.gdr_receive;
      l.pxn_proxies.assign(lb.pxn.begin(), lb.pxn.end());
      if (starts_with(l.transport, "NET/")) link_networks.insert(l.transport.substr(4));
      c.links.push_back(std::move(l));
    }
    if (c.nranks == 0 && c.links.empty() && c.ranks_seen.empty()) continue;
    a.communicators.push_back(std::move(c));
  }
  std::stable_sort(a.communicators.begin(), a.communicators.end(),
                   [](const auto& x, const auto& y) { return x.nranks > y.nranks; });
  if (networks.size() == 1) {
    a.network = *networks.begin();
    a.network_source = "Using network";
  } else if (networks.size() > 1) {
    a.network = "mixed";
    a.network_source = "Using network";
  } else if (link_networks.size() == 1) {
    a.network = *link_networks.begin();
    a.network_source = "channels";
  } else if (link_networks.size() > 1) {
    a.network = "mixed";
    a.network_source = "channels";
  }
  for (const auto& c : a.communicators)
    if (c.nnodes > a.nodes) a.nodes = c.nnodes;
  if (a.nodes > 0) {
    a.nodes_source = "nNodes";
  } else if (!a.hosts.empty()) {
    a.nodes = static_cast<int>(a.hosts.size());
    a.nodes_source = "hosts";
  }
  // GPUDirect RDMA: the HCA lines, else the NET channel lines.
  bool any_on = false, any_off = false;
  for (const auto& info : a.ranks) {
    any_on |= !info.gdr_enabled_hcas.empty();
    any_off |= !info.gdr_disabled_hcas.empty();
  }
  if (!any_on && !any_off)
    for (const auto& c : a.communicators)
      for (const auto& l : c.links) {
        if (!starts_with(l.transport, "NET/IB") && !starts_with(l.transport, "NET/AWS")) continue;
        const bool on = l.gdrdma_send.value_or(false) || l.gdrdma_receive.value_or(false);
        (on ? any_on : any_off) = true;
      }
  a.gdr = any_on && any_off ? "mixed" : any_on ? "enabled" : any_off ? "disabled" : "";
  return std::move(parsed_);
}

}  // namespace
}  // namespace nccl_log_detail

NcclLogAnalysis analyze_nccl_logs(const std::vector<NcclLogInput>& inputs) {
  nccl_log_detail::HostResolver hosts;
  std::vector<char> interleaved(inputs.size(), 0);
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool flag = false;
    hosts.survey(inputs[i].text, &flag);
    interleaved[i] = flag;
  }
  hosts.resolve();
  nccl_log_detail::Reader reader(hosts);
  for (size_t i = 0; i < inputs.size(); ++i)
    reader.read(inputs[i], interleaved[i] != 0 || hosts.any_alias());
  auto parsed = reader.finish();
  nccl_log_detail::add_findings(parsed);
  // An `nvidia-smi topo -m` (and `nvlink -s`) pasted into the log: its findings.
  auto& findings = parsed.analysis.findings;
  for (const auto& input : inputs) {
    const auto matrix = topo::find_nvidia_smi_topo(input.text);
    if (!matrix) continue;
    for (const auto& t :
         topo::check_nvidia_smi(*matrix, topo::find_nvidia_smi_nvlink_status(input.text))) {
      NcclLogFinding f;
      f.severity = t.severity == topo::Finding::Severity::kFail   ? NcclSeverity::kFail
                   : t.severity == topo::Finding::Severity::kWarn ? NcclSeverity::kWarn
                                                                  : NcclSeverity::kInfo;
      f.code = "topo." + t.check;
      f.message = input.name + ": " + t.message;
      f.cause = "the node's topology (nvidia-smi topo -m in the log)";
      f.remedy = t.remedy;
      findings.push_back(std::move(f));
    }
  }
  std::stable_sort(findings.begin(), findings.end(), [](const auto& x, const auto& y) {
    return static_cast<int>(x.severity) > static_cast<int>(y.severity);
  });
  return std::move(parsed.analysis);
}

NcclSeverity worst_severity(const NcclLogAnalysis& analysis) {
  NcclSeverity worst = NcclSeverity::kInfo;
  for (const auto& f : analysis.findings)
    if (static_cast<int>(f.severity) > static_cast<int>(worst)) worst = f.severity;
  return worst;
}

}  // namespace ccscope::diag
