#pragma once
// NCCL's RAS service as the NCCL stand-in runs it (tests only; docs/standin.md):
// with NCCL_RAS_ADDR set (and NCCL_RAS_ENABLE not 0), the first stand-in process
// of the host that binds that address answers the `ncclras` client's text
// protocol ("CLIENT PROTOCOL n" -> "SERVER PROTOCOL 2", "TIMEOUT s" -> "OK",
// "STATUS" -> the report, then close) from its communicators' shared segments:
// every rank's operations launched per collective, pid, host and GPU. So a
// hung rank shows as RAS shows it: a MISMATCH with the ranks behind, and a
// process that is gone as DEAD with its communicators INCOMPLETE. Unlike NCCL,
// nothing listens by default (tests run side by side on one host).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ccscope::standin {

// What RAS reports of one communicator rank.
struct RasRankView {
  int rank = 0;
  long pid = 0;
  std::string host;
  int gpu = 0;
  bool gone = false;               // its process no longer exists
  std::vector<uint64_t> launched;  // operations launched, by collective (ras_collective_names)
};

struct RasCommView {
  std::string id;  // 16 hex digits
  std::vector<RasRankView> ranks;
};

// The names RAS gives the collectives, in RasRankView::launched's order.
const std::vector<std::string>& ras_collective_names();

// The STATUS report in NCCL's RAS format (its Errors and Warnings sections), pure.
std::string ras_status_report(const std::vector<RasCommView>& comms);

// Starts the service once per process when NCCL_RAS_ADDR asks for it; a second
// process of the host finds the address taken and serves nothing, as NCCL's do.
void start_ras_service_once(std::function<std::vector<RasCommView>()> snapshot);

}  // namespace ccscope::standin
