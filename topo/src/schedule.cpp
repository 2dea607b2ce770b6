#include "ccscope/topo/schedule.h"

#include <algorithm>

namespace ccscope::topo {

std::vector<PairRound> disjoint_pair_rounds(size_t n) {
  std::vector<PairRound> rounds;
  if (n < 2) return rounds;
  // An odd count gets a resting slot `n`: whoever meets it sits the round out.
  const size_t slots = n % 2 == 0 ? n : n + 1;
  // Slot 0 stays; the others turn one place per round.
  std::vector<size_t> ring(slots);
  for (size_t i = 0; i < slots; ++i) ring[i] = i;
  for (size_t round = 0; round + 1 < slots; ++round) {
    PairRound pairs;
    for (size_t i = 0; i < slots / 2; ++i) {
      const size_t a = ring[i], b = ring[slots - 1 - i];
      if (a < n && b < n) pairs.emplace_back(std::min(a, b), std::max(a, b));
    }
    std::sort(pairs.begin(), pairs.end());
    rounds.push_back(std::move(pairs));
    std::rotate(ring.begin() + 1, ring.end() - 1, ring.end());
  }
  return rounds;
}

}  // namespace ccscope::topo
