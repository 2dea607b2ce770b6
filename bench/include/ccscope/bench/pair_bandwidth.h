#pragma once
// Point-to-point bandwidth between pairs of ranks, in rounds of disjoint pairs
// (topo::disjoint_pair_rounds): what `ccscope topo --measure` runs. Both ends
// of a pair send and receive at once (send_recv), so each direction of a
// full-duplex link is loaded as a collective would load it.
#include <chrono>
#include <cstddef>
#include <utility>
#include <vector>

#include "ccscope/collectives/communicator.h"
#include "ccscope/collectives/control_plane.h"

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
  // bytes / the slower end's median exchange time, GB/s (1e9 B/s), per direction.
  double GBps = 0;
};

using RankPairRound = std::vector<std::pair<int, int>>;

// Collective: every rank of `control` calls it with the same rounds; ranks not
// in a round's pairs wait at its barrier. Returns every pair's figure on every
// rank. Throws TimeoutError when an exchange does not complete in time.
std::vector<PairBandwidth> measure_pair_rounds(Communicator& comm, const ControlPlane& control,
                                               const std::vector<RankPairRound>& rounds,
                                               const PairBandwidthOptions& options);

}  // namespace ccscope::bench
