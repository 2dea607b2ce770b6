#pragma once
// Point-to-point bandwidth between pairs of ranks, in rounds of disjoint pairs
// (topo::disjoint_pair_rounds): what `ccscope topo --measure` runs.
//  - over a PointToPoint (host memory, MPI): one direction at a time, a to b
//    then b to a, each a stream of `repetitions` messages closed by an ack;
//  - over a Communicator (device memory, NCCL): both ends exchange at once
//    (send_recv), the only point-to-point a Communicator has.
// MPICH over UCX's TCP transport was seen to serialise the two directions of
// an MPI_Sendrecv in about one pair measurement in four here (each direction read
// half the link), which is why host memory is measured one way at a time.
#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/control_plane.h"
#include "ccscope/collectives/point_to_point.h"

namespace ccscope::bench {

struct PairBandwidthOptions {
  size_t bytes = size_t{16} << 20;  // per direction per exchange
  int warmup = 1;
  int repetitions = 5;
  std::chrono::milliseconds timeout{60000};  // for each exchange to complete
};

struct PairBandwidth {
  int rank_a = -1;
  int rank_b = -1;
  size_t round = 0;
  // GB/s (1e9 B/s) per direction: the slower direction (one-way), or bytes
  // over the slower end's median exchange time (both ways at once).
  double GBps = 0;
  double GBps_a_to_b = 0;  // one-way only; 0 when both ways ran at once
  double GBps_b_to_a = 0;
};

using RankPairRound = std::vector<std::pair<int, int>>;

// Collective: every rank of `control` calls it with the same rounds; ranks not
// in a round's pairs wait at its barrier. Returns every pair's figure on every
// rank. Throws TimeoutError when an exchange does not complete in time.
std::vector<PairBandwidth> measure_pair_rounds(Communicator& comm, const ControlPlane& control,
                                               const std::vector<RankPairRound>& rounds,
                                               const PairBandwidthOptions& options);

// One way at a time over `p2p` (its ranks are `control`'s). Each direction:
// `warmup` + `repetitions` messages of `bytes`, the receiver's 1-byte ack ends
// the timed stream (the sender's clock); the figure is every message's bytes
// over that time. The last message of each direction is checked byte for byte.
std::vector<PairBandwidth> measure_pair_rounds_one_way(PointToPoint& p2p,
                                                       const ControlPlane& control,
                                                       const std::vector<RankPairRound>& rounds,
                                                       const PairBandwidthOptions& options);

}  // namespace ccscope::bench
