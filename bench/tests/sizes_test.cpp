#include "sizes.h"

#include <gtest/gtest.h>

#include <limits>

namespace ccscope::bench {
namespace {

TEST(Sizes, FactorSequence) {
  EXPECT_EQ(size_sequence(8, 128, 2, 0), (std::vector<size_t>{8, 16, 32, 64, 128}));
  EXPECT_EQ(size_sequence(8, 100, 4, 0), (std::vector<size_t>{8, 32}));
}

TEST(Sizes, StepSequence) {
  EXPECT_EQ(size_sequence(100, 400, 1, 100), (std::vector<size_t>{100, 200, 300, 400}));
  EXPECT_EQ(size_sequence(32, 32, 1, 1 << 20), (std::vector<size_t>{32}));
}

TEST(Sizes, NoSizesWhenMinAboveMax) { EXPECT_TRUE(size_sequence(64, 8, 2, 0).empty()); }

}  // namespace
}  // namespace ccscope::bench

namespace ccscope::bench {
namespace {

// At size_t's limit the sequence stops instead of wrapping around to a bogus
// size: (2^62 + 1) x 5 wraps to 2^62 + 5, which a "next <= size" test alone
// took for a larger size.
TEST(Sizes, SequenceStopsAtTheLimitOfSizeT) {
  const size_t max = std::numeric_limits<size_t>::max();
  const size_t start = (size_t{1} << 62) + 1;
  EXPECT_EQ(size_sequence(start, max, 5, 0), (std::vector<size_t>{start}));
  EXPECT_EQ(size_sequence(max - 1, max, 1, 8), (std::vector<size_t>{max - 1}));
  EXPECT_EQ(size_sequence(size_t{1} << 63, max, 2, 0), (std::vector<size_t>{size_t{1} << 63}));
}

}  // namespace
}  // namespace ccscope::bench
