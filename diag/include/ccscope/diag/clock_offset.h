#pragma once
// Clock offsets between nodes, estimated by ping-pong as NTP and PTP do: the
// reference rank sends at t0 (its clock), the remote stamps receipt t1 and
// reply t2 (its clock), the reference stamps the reply's arrival t3.
//   offset = ((t1 - t0) + (t2 - t3)) / 2   (remote clock minus reference clock)
//   rtt    = (t3 - t0) - (t2 - t1)         (time on the wire, both ways)
// Whatever the split of rtt between the two directions, the true offset lies
// within offset +- rtt / 2, so the sample with the smallest round trip gives
// both the best estimate and the tightest certain bound (NTP's clock filter
// keeps the minimum-delay sample for the same reason).
//
// The clock is the wall clock (CLOCK_REALTIME, std::chrono::system_clock): it
// is what NTP/PTP keep in step across nodes and what timelines from several
// nodes are put side by side with.
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ccscope/collectives/point_to_point.h"
#include "ccscope/diag/check.h"

namespace ccscope::diag {

// One exchange. Seconds from any origin common to the four readings (the
// measurement uses the reference's first t0, which keeps double precision at
// nanoseconds).
struct ClockSample {
  double t0, t1, t2, t3;
};

struct ClockEstimate {
  double offset_s = 0;       // remote clock minus reference clock; > 0: remote ahead
  double error_bound_s = 0;  // the true offset is within offset_s +- error_bound_s
  double min_rtt_s = 0;      // round trip of the sample used
  size_t samples = 0;        // valid samples seen; 0: no estimate (see below)
};

// The minimum-round-trip sample's offset, bound rtt / 2. Samples with a
// negative round trip (a clock stepped mid-exchange) or non-finite readings are
// dropped. Without a valid sample: samples = 0, offset 0, bound and min_rtt
// infinite (judge_clock_offsets reports SKIP).
ClockEstimate estimate_clock_offset(std::span<const ClockSample> samples);

// TEST-ONLY fault injection. Network namespaces share one kernel clock, so the
// virtual cluster cannot make a node's clock wrong; this variable does:
// "HOST=MS[,HOST=MS...]" (e.g. "node2=50,node3=-12.5"), and a rank whose
// hostname is HOST (or whose hostname's first label is HOST) adds MS
// milliseconds to every clock reading of measure_clock_offsets. Never set it
// on a real cluster.
inline constexpr const char* kTestClockOffsetVariable = "CCSCOPE_TEST_CLOCK_OFFSET";

// The offset, in seconds, that `value` (the variable's text) gives `hostname`:
// 0 when `value` is empty or does not name the host. Throws UsageError (one
// line naming the variable and the bad entry) on a malformed value: an entry
// without '=', an empty host, a non-numeric or non-finite MS, a host listed twice.
double injected_clock_offset_s(const std::string& value, const std::string& hostname);
// The same over this process's environment (unset: 0).
double injected_clock_offset_from_process_s(const std::string& hostname);

struct ClockOptions {
  // Ping-pongs per remote. Only the reference's figure counts: each ping tells
  // the remote how many follow.
  size_t exchanges = 32;
  // Added to this rank's clock readings (injected_clock_offset_s); each rank
  // passes its own.
  double injected_offset_s = 0;
};

// Collective over `p2p`: every rank calls it with the same `reference` and
// `remotes`. The reference ping-pongs with each remote in turn, one at a time,
// `exchanges` times (messages: 8 bytes out, 16 back). Returns on the reference
// one estimate per remote, in `remotes` order; every other rank gets an empty
// vector (a rank in neither role returns at once). A remote waits for its turn
// under the transport's receive time bound (TimeoutError past it). Throws
// UsageError, on every rank alike, when a rank is out of range, a remote is
// listed twice or is the reference, or exchanges is 0.
std::vector<ClockEstimate> measure_clock_offsets(PointToPoint& p2p, int reference,
                                                 const std::vector<int>& remotes,
                                                 const ClockOptions& options);

// Checks "cluster.clock_offset" (Stage::kCluster), one per remote node:
// host = the remote, peer = the reference, measured = offset in ms, expected =
// threshold in ms, unit "ms".
//  - WARN when |offset| - error_bound > threshold: the offset is surely above it.
//  - PASS otherwise. When |offset| alone is above the threshold but the bound
//    does not rule out being within it, the check stays PASS and its message
//    says "uncertain" with the round trip (a slow or loaded network), since a
//    WARN here could be a false alarm.
//  - SKIP for an estimate without samples.
// No remotes (one node): a single SKIP check about the reference host.
// Throws UsageError when the two vectors differ in size or the threshold is
// negative or not finite.
std::vector<Check> judge_clock_offsets(const std::vector<std::string>& remote_hosts,
                                       const std::vector<ClockEstimate>& estimates,
                                       const std::string& reference_host, double warn_threshold_s);

}  // namespace ccscope::diag
