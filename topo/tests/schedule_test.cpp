#include "ccscope/topo/schedule.h"

#include <gtest/gtest.h>

#include <set>

namespace ccscope::topo {
namespace {

TEST(DisjointPairRounds, EveryPairOnceAndNoEndpointTwiceInARound) {
  for (size_t n = 0; n <= 9; ++n) {
    const std::vector<PairRound> rounds = disjoint_pair_rounds(n);
    EXPECT_EQ(rounds.size(), n < 2 ? 0 : n % 2 == 0 ? n - 1 : n) << n;
    std::set<std::pair<size_t, size_t>> seen;
    for (const PairRound& round : rounds) {
      std::set<size_t> busy;
      for (const auto& [a, b] : round) {
        EXPECT_LT(a, b);
        EXPECT_LT(b, n);
        EXPECT_TRUE(busy.insert(a).second) << "n=" << n << ": " << a << " twice in a round";
        EXPECT_TRUE(busy.insert(b).second) << "n=" << n << ": " << b << " twice in a round";
        EXPECT_TRUE(seen.insert({a, b}).second) << "n=" << n << ": pair measured twice";
      }
      EXPECT_EQ(round.size(), n / 2) << n;
    }
    EXPECT_EQ(seen.size(), n * (n - 1) / 2) << n;
  }
}

}  // namespace
}  // namespace ccscope::topo
