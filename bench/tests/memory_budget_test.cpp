#include "memory_budget.h"

#include <gtest/gtest.h>

#include <limits>

namespace ccscope::bench {
namespace {

constexpr size_t GiB = size_t{1} << 30;

TEST(MemoryBudget, BothBuffersAreTheLargestSizeAsNcclTests) {
  // nccl-tests allocates send and receive at -e each, for every collective (the
  // send block of all-gather is only 1/ranks of it, but rotation uses the room).
  EXPECT_EQ(buffer_bytes(Collective::kAllReduce, 1 << 20, 4, 2), size_t{2} << 20);
  EXPECT_EQ(buffer_bytes(Collective::kAllGather, 1 << 20, 4, 4), size_t{2} << 20);
  EXPECT_EQ(buffer_bytes(Collective::kReduceScatter, 1000, 4, 3), size_t{2000});
}

TEST(MemoryBudget, BufferBytesOverflowIsNoAnswer) {
  EXPECT_FALSE(buffer_bytes(Collective::kAllReduce, std::numeric_limits<size_t>::max() - 3, 4, 2));
}

TEST(MemoryBudget, FitsSaysNothing) {
  EXPECT_EQ(memory_shortfall(Collective::kAllReduce, GiB, 4, 2, 2, 8 * GiB, "host a"), "");
  // Exactly the budget: 2 ranks x 2 GiB = 4 GiB.
  EXPECT_EQ(memory_shortfall(Collective::kAllReduce, GiB, 4, 2, 2, 4 * GiB, "host a"), "");
}

TEST(MemoryBudget, TooLargeSaysWhatFits) {
  // -e 1 TiB all-reduce, 2 ranks on a host with 24 GiB: 12 GiB per rank, 2
  // buffers each -> 4 GiB is the largest power of two that fits.
  const std::string line =
      memory_shortfall(Collective::kAllReduce, size_t{1} << 40, 4, 2, 2, 24 * GiB, "host vm");
  EXPECT_NE(line.find("-e 1 TiB needs 2 TiB of buffers per rank"), std::string::npos) << line;
  EXPECT_NE(line.find("host vm has 24 GiB available for 2 rank(s)"), std::string::npos) << line;
  EXPECT_NE(line.find("use -e 4 GiB or less"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // One rank per node has twice the budget.
  EXPECT_NE(memory_shortfall(Collective::kAllReduce, size_t{1} << 40, 4, 2, 1, 24 * GiB, "h")
                .find("use -e 8 GiB or less"),
            std::string::npos);
}

TEST(MemoryBudget, NothingFits) {
  const std::string line = memory_shortfall(Collective::kAllReduce, 1 << 20, 4, 2, 4, 3, "h");
  EXPECT_NE(line.find("not even 1 B fits"), std::string::npos) << line;
}

TEST(MemoryBudget, HostAvailableMemoryIsRead) {
  const auto available = host_available_memory();
  ASSERT_TRUE(available);  // Linux has MemAvailable since 3.14
  EXPECT_GT(*available, size_t{1} << 20);
}

}  // namespace
}  // namespace ccscope::bench
