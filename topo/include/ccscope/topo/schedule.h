#pragma once
// Which pairs to measure in which round: every pair once, each round's pairs
// disjoint so they run at the same time without sharing an endpoint.
#include <cstddef>
#include <utility>
#include <vector>

namespace ccscope::topo {

using PairRound = std::vector<std::pair<size_t, size_t>>;  // (a, b), a < b

// The circle method (round-robin tournament): n - 1 rounds of n / 2 pairs for
// an even n, n rounds of (n - 1) / 2 pairs for an odd n (one endpoint rests in
// each), instead of n(n-1)/2 pairs one after another. Empty for n < 2.
std::vector<PairRound> disjoint_pair_rounds(size_t n);

}  // namespace ccscope::topo
