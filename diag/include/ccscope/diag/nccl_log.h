#pragma once
// What NCCL's debug output (NCCL_DEBUG=INFO or WARN) says about a job: per rank
// its host, process, device, versions and how far init got; the network and
// transports NCCL chose, per rank pair; and findings (misconfigurations, WARN
// lines, errors with their likely cause, and whether a log shows the root cause
// or only a failure caused elsewhere). Any number of ranks, interleaved in one
// text or one per rank, mixed with other output and launcher prefixes; damaged
// input gives a partial result that counts what could not be read.
//
// A pure function over texts: the `ccscope diag nccl-log` verb reads the files.
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/diag/check.h"

namespace ccscope::diag {

struct NcclLogInput {
  std::string name;  // file path, for messages
  std::string text;
};

enum class NcclSeverity { kInfo, kWarn, kFail };
const char* nccl_severity_name(NcclSeverity severity);  // "info", "warn", "fail"

// How far a rank's communicator init got, in order.
enum class NcclInitState {
  kSeen,          // only lines without init progress
  kBootstrap,     // "Bootstrap : Using ..." / "NCCL version ..."
  kInitStart,     // "... - Init START"
  kConnecting,    // channel/transport lines
  kInitComplete,  // "... - Init COMPLETE"
  kDestroyed,     // "... - Destroy COMPLETE" after init completed
  kAborted,       // "... - Abort COMPLETE", or an error returned during init
};
const char* nccl_init_state_name(NcclInitState state);  // "seen", ..., "aborted"

// Does this log show the root cause of a failure, or one caused on another
// rank or node?
enum class NcclRole { kNone, kRoot, kSecondary, kUnknown };
const char* nccl_role_name(NcclRole role);  // "", "root", "secondary", "unknown"

// One communicator a rank belongs to ("ncclCommInitRank comm 0x... rank R
// nranks N ... commId 0x... - Init START").
struct NcclCommMembership {
  std::string comm;     // the comm pointer "0x5606fec057c0"
  std::string comm_id;  // "0x8a143a0b90d98ea4", "" before NCCL 2.12
  int rank = -1;
  int nranks = 0;
  NcclInitState init = NcclInitState::kSeen;
};

// A process and one of its GPUs (host:pid [cudaDev] in the line prefix).
struct NcclRankInfo {
  std::string host;
  long pid = 0;
  int cuda_device = -1;
  int rank = -1;                        // in the largest communicator it belongs to; -1 unknown
  int nranks = 0;                       // that communicator's size
  std::string nccl_version;             // "2.28.3"
  std::string nccl_cuda;                // CUDA NCCL was built for: "13.0"
  std::string cuda_driver;              // from cudaDriverVersion 13000: "13.0"
  std::string network;                  // "IB", "Socket", "AWS Libfabric" ("Using network X")
  std::string bootstrap_interface;      // "eth0"
  std::string bootstrap_address;        // "192.0.2.2"
  std::vector<std::string> ib_devices;  // "mlx5_0:1/IB", "mlx5_1:1/RoCE"
  bool ib_no_device = false;            // "NET/IB : No device found."
  std::vector<std::string> socket_interfaces;  // "eth0"
  std::vector<std::string> gdr_enabled_hcas;   // "GPU Direct RDMA Enabled for HCA 0 'mlx5_0'"
  std::vector<std::string> gdr_disabled_hcas;
  std::optional<bool> nvls_support;                // "NVLS multicast support is [not] available"
  bool nvls_connected = false;                     // "Connected NVLS ..."
  std::vector<std::string> collnet;                // "COLLNET/SHARP/0/GDRDMA"
  std::string net_plugin;                          // a loaded external plugin, else ""
  std::vector<std::string> plugin_failures;        // why an external plugin did not load
  std::map<std::string, std::string> environment;  // NCCL_* "set by environment to"
  std::vector<NcclCommMembership> communicators;
  NcclInitState init = NcclInitState::kSeen;  // of the largest communicator
  std::vector<std::string> sources;           // the inputs its lines came from
  size_t lines = 0;
  size_t warn_lines = 0;
};

// Transports between two ranks of one communicator, from its channel lines.
struct NcclLink {
  int from = -1;
  int to = -1;
  std::string transport;               // class: "P2P/IPC", "P2P/CUMEM", "SHM", "NET/IB", ...
  std::vector<std::string> details;    // as logged, device index dropped: "NET/IB/GDRDMA"
  size_t channels = 0;                 // distinct channel ids
  std::optional<bool> gdrdma_send;     // from the [send] side, NET only
  std::optional<bool> gdrdma_receive;  // from the [receive] side, NET only
  std::vector<int> pxn_proxies;        // PXN: the rank the send goes through
};

struct NcclCommunicator {
  std::string id;  // commId, else the comm pointer, else "" (unknown)
  int nranks = 0;
  int nnodes = 0;  // from "nNodes"; 0 unknown
  std::vector<int> ranks_seen;
  std::vector<NcclLink> links;  // sorted by (from, to, transport)
};

// Every WARN line with the same text modulo numbers and addresses.
struct NcclWarnGroup {
  std::string pattern;     // numbers replaced by '#'
  std::string example;     // the first one, as logged
  std::string first_seen;  // "file:line"
  size_t count = 0;
  std::vector<std::string> hosts;
  std::vector<int> ranks;
};

struct NcclLogFinding {
  NcclSeverity severity = NcclSeverity::kInfo;
  std::string code;  // stable id: "net.socket_with_ib", "error.peer_closed", ...
  std::string host;  // "" for the whole job
  int rank = -1;
  std::string peer;  // the other end (a host or an address), else ""
  std::string message;
  std::string cause;   // the likely cause
  std::string remedy;  // what to do
  NcclRole role = NcclRole::kNone;
  size_t count = 1;        // occurrences folded into this finding
  std::vector<int> ranks;  // every rank it concerns
  std::vector<std::string> hosts;
};

// What was read of one input.
struct NcclInputSummary {
  std::string name;
  size_t bytes = 0;
  size_t lines = 0;
  size_t nccl_lines = 0;             // parsed NCCL lines
  size_t other_lines = 0;            // other program output
  size_t garbled_lines = 0;          // mention NCCL but cannot be read (cut or interleaved)
  bool binary = false;               // NUL bytes or mostly non-text
  bool truncated_last_line = false;  // no final newline
  std::vector<std::string> notes;
};

struct NcclLogAnalysis {
  std::vector<NcclInputSummary> inputs;
  std::vector<NcclRankInfo> ranks;  // sorted by rank, then host, pid, device
  std::vector<std::string> hosts;   // as logged, sorted
  int nodes = 0;
  std::string nodes_source;                // "nNodes", "hosts" or ""
  std::vector<std::string> nccl_versions;  // distinct, sorted
  std::string network;         // "IB", "Socket", ... ("mixed" when ranks differ), "" unknown
  std::string network_source;  // "Using network", "channels", ""
  std::string net_plugin;
  std::vector<std::string> ib_devices;
  std::vector<std::string> socket_interfaces;
  std::vector<std::string> bootstrap_interfaces;
  std::string gdr;  // "enabled", "disabled", "mixed", "" unknown
  std::vector<NcclCommunicator> communicators;
  std::vector<NcclWarnGroup> warnings;
  std::vector<NcclLogFinding> findings;  // fail first, then warn, then info
};

NcclLogAnalysis analyze_nccl_logs(const std::vector<NcclLogInput>& inputs);

// The documented JSON (schema "ccscope.nccl_log/1"), one object, ending "\n".
std::string nccl_log_json(const NcclLogAnalysis& analysis);
// The human summary: inputs, ranks, network, transport matrix, findings.
std::string nccl_log_text(const NcclLogAnalysis& analysis);
// Findings as checklist checks "nccl_log.<code>": info PASS, warn WARN, fail FAIL.
std::vector<Check> nccl_log_checks(const NcclLogAnalysis& analysis, Stage stage);
// The worst severity of the findings (kInfo when none).
NcclSeverity worst_severity(const NcclLogAnalysis& analysis);

// One NCCL line's prefix, found anywhere in a line of text (launcher prefixes,
// timestamps before it). Exposed for tests.
struct NcclLinePrefix {
  std::string host;
  long pid = 0;
  long tid = 0;
  int cuda_device = -1;
  std::string level;     // "INFO", "WARN", "TRACE"
  std::string location;  // "misc/socket.cc:71" before "NCCL WARN", else ""
  std::string message;   // after "NCCL INFO "
};
std::optional<NcclLinePrefix> parse_nccl_line(std::string_view line);

}  // namespace ccscope::diag
