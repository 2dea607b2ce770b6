#pragma once
// NCCL's RAS service (NCCL >= 2.24): every NCCL process runs a RAS thread, the
// threads keep each other alive over their own TCP network, and one of them
// answers the `ncclras` client on a TCP port (NCCL_RAS_ADDR, default
// localhost:28028; NCCL_RAS_ENABLE=0 turns it off). Its STATUS report is NCCL's
// own view of a hang: processes it considers dead, processes that did not
// answer, communicators whose ranks report different operation counts (the rank
// behind), and initialization or asynchronous errors.
//
// The query (query_nccl_ras) speaks the client's text protocol: "CLIENT
// PROTOCOL 2" -> "SERVER PROTOCOL n", "TIMEOUT s" -> "OK", then "STATUS", the
// report streamed until the service closes the connection; every step within
// one deadline. parse_nccl_ras_status and nccl_ras_findings are pure.
#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/diag/nccl_log.h"

namespace ccscope::diag {

inline constexpr int kNcclRasDefaultPort = 28028;

struct NcclRasAddress {
  std::string host = "localhost";
  int port = kNcclRasDefaultPort;
};

// "host:port", "host", ":port", "port" or "[v6addr]:port" (NCCL_RAS_ADDR's form);
// std::invalid_argument with the reason for anything else.
NcclRasAddress parse_nccl_ras_address(std::string_view text);

// Where this process's NCCL would answer, from NCCL_RAS_ENABLE and NCCL_RAS_ADDR
// (`get` reads a variable: nullopt when unset); nullopt when RAS is disabled.
std::optional<NcclRasAddress> nccl_ras_address_from_environment(
    const std::function<std::optional<std::string>(const char*)>& get);

// One process RAS lists ("Process 4242 on node node1 managing GPU 1").
struct NcclRasProcess {
  long pid = 0;
  std::string host;
  std::string gpus;
};

// One communicator rank RAS lists.
struct NcclRasRank {
  std::string comm;  // "#0-0 (0123456789abcdef)"
  int rank = -1;     // in that communicator
  long pid = 0;      // 0: unknown ("[process information not found]")
  std::string host;
  std::string gpu;
  std::string collective;     // "AllReduce" for an operation count, else ""
  long long operations = -1;  // operations launched (0: none), -1 unknown
  long long others = -1;      // the most the other ranks launched
};

struct NcclRasStatus {
  bool report = false;               // the text is a RAS status report (its section headers seen)
  bool complete = false;             // the Warnings section arrived (the report's end)
  std::vector<NcclRasProcess> dead;  // DEAD: unreachable over RAS's network
  std::vector<NcclRasProcess> missing;  // INCOMPLETE: alive, no communicator data
  size_t missing_count = 0;             // as counted (the list may be left out)
  size_t dead_count = 0;
  std::vector<NcclRasRank> incomplete_ranks;  // a communicator's ranks with no data
  std::vector<NcclRasRank> behind;            // fewer operations than the others
  std::vector<std::string> errors;            // ERROR blocks, a line each
  size_t timeouts = 0;                        // TIMEOUT: legs that timed out
};

NcclRasStatus parse_nccl_ras_status(std::string_view text);

// Findings "ras.*" for the report's view: ras.dead_processes (fail),
// ras.ranks_behind (fail), ras.incomplete_ranks (fail), ras.missing_processes
// (warn), ras.errors (fail), ras.timeouts (warn), ras.healthy (info) when none;
// `where` names the service ("localhost:28028") in the messages.
std::vector<NcclLogFinding> nccl_ras_findings(const NcclRasStatus& status,
                                              const std::string& where);

// A finding for a service that could not be asked (ras.unreachable, info: RAS
// may be off, or NCCL older than 2.24, or no NCCL process on that host).
NcclLogFinding nccl_ras_unreachable(const std::string& where, const std::string& error);

// Asks the service for its STATUS report. `timeout` bounds everything (connect,
// handshake, the report); RAS is told to wait for its peers a second less, so
// that it answers with what it has. std::runtime_error with the reason.
std::string query_nccl_ras(const NcclRasAddress& address, std::chrono::milliseconds timeout);

// "host:port".
std::string to_string(const NcclRasAddress& address);

// Asks the service and returns its findings, a ras.unreachable one when it
// could not be asked (never throws for the service's sake).
std::vector<NcclLogFinding> ask_nccl_ras(const NcclRasAddress& address,
                                         std::chrono::milliseconds timeout);

// Whether an NCCL of this version ("2.27.3"; "" when unknown) runs RAS: 2.24
// and later, and an unknown one may.
bool nccl_version_has_ras(const std::string& version);

// The findings as lines for the watchdog's stall report, worst first
// ("NCCL RAS: FAIL ras.ranks_behind: NCCL RAS (localhost:28028): rank 5 ...").
std::string nccl_ras_stall_evidence(const std::vector<NcclLogFinding>& findings);

// The findings as checklist checks "nccl_ras.<name>" (ras.dead_processes ->
// nccl_ras.dead_processes): info PASS, warn WARN, fail FAIL, as nccl_log_checks.
std::vector<Check> nccl_ras_checks(const std::vector<NcclLogFinding>& findings, Stage stage);

}  // namespace ccscope::diag
