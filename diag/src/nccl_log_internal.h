#pragma once
// What the NCCL log reader (nccl_log.cpp) hands to the findings
// (nccl_log_findings.cpp): the analysis so far plus the events that become
// findings. Private to diag.
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccscope/diag/nccl_log.h"

namespace ccscope::diag::nccl_log_detail {

// A finding with its words (the log's findings and NCCL RAS's, nccl_ras.cpp).
inline NcclLogFinding finding(NcclSeverity severity, std::string code, std::string message,
                              std::string cause, std::string remedy) {
  NcclLogFinding f;
  f.severity = severity;
  f.code = std::move(code);
  f.message = std::move(message);
  f.cause = std::move(cause);
  f.remedy = std::move(remedy);
  return f;
}

// An error seen in a line, classified.
enum class ErrorKind {
  kConnectionRefused,
  kConnectFailed,
  kPeerClosed,
  kIbCompletion,
  kInvalidUsage,
  kUngroupedSendRecv,  // NCCL 2.29: NET/Socket given a local (AF_UNIX) peer address
  kCudaError,
  kSystemError,
  kRemoteError,
  kInternalError,
  kWatchdogTimeout,
  kBootstrapTimeout,
};

struct ErrorEvent {
  ErrorKind kind;
  size_t rank_index = static_cast<size_t>(-1);  // into analysis.ranks, or -1
  int rank = -1;                                // when only a rank is known (PyTorch lines)
  std::string host;
  std::string peer;     // address or host named in the line
  std::string message;  // as logged
  std::string where;    // "file:line"
  int ib_status = -1;   // ibv_wc_status of a completion error
  long seq = -1;        // watchdog: SeqNum
  std::string op;       // watchdog: OpType
  long numel = -1;      // watchdog: NumelIn
};

struct Parsed {
  NcclLogAnalysis analysis;
  std::vector<ErrorEvent> errors;
  std::map<std::string, std::string> host_of_address;  // bootstrap address -> host
  std::vector<std::string> bare_versions;              // "NCCL version X" without prefix
  // NCCL versions a framework printed (PyTorch's error text, vLLM's banner),
  // with where: used when NCCL's own line is absent.
  std::map<std::string, std::string> framework_versions;  // version -> "PyTorch", "vLLM"
  int framework_world_size = 0;  // PyTorch's "ProcessGroupNCCL initialization options: size: N"
  // Which framework printed it (the first seen), and the ranks its banners named
  // (PyTorch's "global rank: R", vLLM's "rank=R").
  std::string framework_world_size_source;
  std::set<int> framework_ranks;
  // The OFI (libfabric) plugin's WARN lines, kept out of the WARN groups.
  size_t ofi_warn_lines = 0;
  std::set<size_t> ofi_warn_ranks;  // rank indices (before sorting: mapped in finish)
  std::string ofi_warn_example;
  // Per process (host:pid), the NCCL_* variables it printed.
  std::map<std::string, std::map<std::string, std::string>> process_environment;
  std::map<std::string, NcclInitState> process_best_init;
  // Interleaved output: per process (host:pid), its lines that were cut or
  // failed their strict form; per input, cut lines whose process is unknown.
  // A process with such lines may have said what the analysis misses.
  std::map<std::string, size_t> process_unreadable;
  std::map<std::string, size_t> input_unattributed;
  // What unreadable lines could have changed, for the log.garbled_lines finding.
  std::vector<std::string> unreadable_could_change;
};

// The findings of a parsed log, in analysis.findings.
void add_findings(Parsed& parsed);

// An interleaved input's line is used only when its message has the whole
// form NCCL prints for that kind of line (a message cut and glued to another
// rank's tail usually does not). Lines of kinds not listed pass.
bool plausible_message(std::string_view message);

// Text with every run of digits (and hex after 0x) replaced by '#'.
std::string number_pattern(std::string_view text);
// "lo", "docker0", "veth1a2b", "virbr0", ... : not a physical network.
bool is_virtual_interface(std::string_view name);

}  // namespace ccscope::diag::nccl_log_detail
