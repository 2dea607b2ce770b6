#pragma once
// Error counters read before and after a measurement, to blame the port or
// the node whose errors moved: InfiniBand port counters from sysfs, and TCP
// retransmissions from /proc (every node has them, also a network namespace,
// which has its own /proc/net/snmp). Thin readers that take a root directory
// (tests use fake trees), text to gather over MPI, and a pure judge.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ccscope/diag/check.h"

namespace ccscope::diag {

// Keys: "<device>/<port>/<counter>" ("mlx5_0/1/symbol_error"),
// "<device>/<port>/hw_counters/<counter>" (the driver's own error counters),
// "tcp/<field>" (/proc/net/snmp: RetransSegs, OutSegs, InErrs, ...) and
// "tcpext/<field>" (/proc/net/netstat: TCPLostRetransmit, TCPTimeouts, ...).
// Keys never hold whitespace.
struct CounterSnapshot {
  std::map<std::string, uint64_t> values;
};

// The error counters of every port under <sysfs_root>/class/infiniband:
// the standard ones (symbol_error, link_error_recovery, link_downed,
// port_rcv_errors, ...) and those hw_counters whose names say error, discard,
// drop, timeout or retry. No InfiniBand, an unreadable or malformed file:
// that entry is absent (no throw).
CounterSnapshot read_ib_error_counters(const std::string& sysfs_root = "/sys");
// Tcp: fields of <proc_root>/net/snmp and the retransmission-related TcpExt:
// fields of <proc_root>/net/netstat. Absent or malformed: no entries.
CounterSnapshot read_tcp_counters(const std::string& proc_root = "/proc");

// One line "ccscope-counters 1", then one "<key> <value>" line per counter.
std::string serialize(const CounterSnapshot& snapshot);
// Throws std::runtime_error naming the bad line on anything else.
CounterSnapshot deserialize(const std::string& text);

struct CounterOptions {
  // A node retransmitting at least this share of its segments is WARNed
  // whatever the others do (a healthy LAN: well under 0.1%).
  double retransmission_rate = 0.005;
  // Or a robust high outlier (modified z > 3.5, or MAD 0) at least this many
  // times the median rate and at least outlier_floor_rate.
  double outlier_factor = 3;
  double outlier_floor_rate = 0.001;
  // Fewer segments sent over the interval than this: no rate to judge.
  uint64_t min_segments = 1000;
};

// hosts[i], before[i] and after[i] are node i (one snapshot per node, e.g.
// from its local rank 0); mismatched sizes throw std::invalid_argument.
// Checks:
//  cluster.ib_port_errors  one per port whose error counters moved: FAIL when
//                          the link went down or retrained (link_downed,
//                          link_error_recovery), else WARN; the counters and
//                          deltas in the message, measured = the sum of the
//                          deltas. PASS summary when ports exist and none
//                          moved; SKIP when no node has InfiniBand.
//  cluster.tcp_retransmissions  WARN per node whose RetransSegs/OutSegs over
//                          the interval stands out (see CounterOptions),
//                          measured/expected = its rate / the median, in %;
//                          PASS summary otherwise; SKIP without TCP counters.
// A counter that went down (reset during the run) counts its after value for
// InfiniBand; for TCP the node is left out of the rates.
std::vector<Check> judge_counter_deltas(const std::vector<std::string>& hosts,
                                        const std::vector<CounterSnapshot>& before,
                                        const std::vector<CounterSnapshot>& after,
                                        const CounterOptions& options = {});

// The TCP retransmissions of one node pair's transfers (node pairs are measured
// one at a time, so each pair's counter deltas are its own): per end, the
// segments it sent and retransmitted meanwhile.
struct PairRetransmissions {
  std::string a, b;
  uint64_t sent_a = 0, retransmitted_a = 0;
  uint64_t sent_b = 0, retransmitted_b = 0;
};
// The delta of RetransSegs and OutSegs between two snapshots (0 when a counter
// is missing or went down).
void tcp_segment_deltas(const CounterSnapshot& before, const CounterSnapshot& after, uint64_t& sent,
                        uint64_t& retransmitted);

// cluster.packet_loss, per direction (a -> b: what a retransmitted of what it
// sent during the pair; a segment lost on the way to b is retransmitted by a).
// A node is named (WARN) when every direction into it, or every direction out
// of it, retransmits at least options.outlier_floor_rate and outlier_factor
// times more than any direction that does not touch it: the loss has that
// node in common, whichever end counted it. Otherwise a direction at or above
// options.retransmission_rate is a WARN on that link (host, peer), every
// direction so is one cluster-wide WARN; PASS when none; SKIP when no pair
// sent options.min_segments.
std::vector<Check> judge_pair_retransmissions(const std::vector<PairRetransmissions>& pairs,
                                              const CounterOptions& options = {});

}  // namespace ccscope::diag
