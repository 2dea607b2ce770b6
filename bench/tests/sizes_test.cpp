#include "sizes.h"

#include <gtest/gtest.h>

#include <limits>

namespace ccscope::bench {
namespace {

TEST(Sizes, ParsesBinarySuffixes) {
  EXPECT_EQ(parse_size("8"), 8u);
  EXPECT_EQ(parse_size("1K"), 1024u);
  EXPECT_EQ(parse_size("64M"), 64u << 20);
  EXPECT_EQ(parse_size("2G"), size_t{2} << 30);
  EXPECT_EQ(parse_size("4k"), 4096u);
  EXPECT_EQ(parse_size("16MiB"), 16u << 20);
  EXPECT_EQ(parse_size("100B"), 100u);
  EXPECT_EQ(parse_size("0"), 0u);  // rejected later by the options, with its own message
}

TEST(Sizes, FractionsTruncateToWholeBytesAsNcclTests) {
  EXPECT_EQ(parse_size("0.5M"), size_t{524288});
  EXPECT_EQ(parse_size("1.5K"), size_t{1536});
  EXPECT_EQ(parse_size("0.3K"), size_t{307});  // 307.2 truncated
  EXPECT_EQ(parse_size("2.25G"), size_t{2415919104});
  EXPECT_EQ(parse_size("0.5T"), size_t{549755813888});
  EXPECT_EQ(parse_size("10.9"), size_t{10});
  EXPECT_EQ(parse_size("1g"), size_t{1} << 30);
  EXPECT_FALSE(parse_size("1."));
  EXPECT_FALSE(parse_size(".5M"));
  EXPECT_FALSE(parse_size("1.2.3"));
  EXPECT_FALSE(parse_size("16777216T"));                                       // 2^64
  EXPECT_EQ(parse_size("16777215.999999T"), size_t{18446744073708452104ULL});  // floor(x * 2^40)
}

TEST(Sizes, RejectsGarbage) {
  for (const char* bad :
       {"", "-8", "M", "1X", "1MM", "1.5.M", "99999999999999999999999", "16777216T"})
    EXPECT_FALSE(parse_size(bad)) << bad;
}

TEST(Sizes, FactorSequence) {
  EXPECT_EQ(size_sequence(8, 128, 2, 0), (std::vector<size_t>{8, 16, 32, 64, 128}));
  EXPECT_EQ(size_sequence(8, 100, 4, 0), (std::vector<size_t>{8, 32}));
}

TEST(Sizes, StepSequence) {
  EXPECT_EQ(size_sequence(100, 400, 1, 100), (std::vector<size_t>{100, 200, 300, 400}));
  EXPECT_EQ(size_sequence(32, 32, 1, 1 << 20), (std::vector<size_t>{32}));
}

TEST(Sizes, NoSizesWhenMinAboveMax) { EXPECT_TRUE(size_sequence(64, 8, 2, 0).empty()); }

TEST(Sizes, Formats) {
  EXPECT_EQ(format_size(8), "8 B");
  EXPECT_EQ(format_size(1024), "1 KiB");
  EXPECT_EQ(format_size(1536), "1.5 KiB");
  EXPECT_EQ(format_size(size_t{64} << 20), "64 MiB");
}

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
