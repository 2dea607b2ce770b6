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
  EXPECT_EQ(memory_shortfall("gloo", Collective::kAllReduce, GiB, 4, 2, 2, 8 * GiB, "host a"), "");
  // Exactly the budget: 2 ranks x 2 GiB = 4 GiB.
  EXPECT_EQ(memory_shortfall("gloo", Collective::kAllReduce, GiB, 4, 2, 2, 4 * GiB, "host a"), "");
}

TEST(MemoryBudget, TooLargeSaysWhatFits) {
  // -e 1 TiB all-reduce, 2 ranks on a host with 24 GiB: 12 GiB per rank, 2
  // buffers each -> 4 GiB is the largest power of two that fits.
  const std::string line = memory_shortfall("gloo", Collective::kAllReduce, size_t{1} << 40, 4, 2,
                                            2, 24 * GiB, "host vm");
  EXPECT_NE(line.find("-e 1 TiB needs 2 TiB per rank (send + receive buffers)"), std::string::npos)
      << line;
  EXPECT_NE(line.find("host vm has 24 GiB available for 2 rank(s)"), std::string::npos) << line;
  EXPECT_NE(line.find("use -e 4 GiB or less"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // One rank per node has twice the budget.
  EXPECT_NE(
      memory_shortfall("gloo", Collective::kAllReduce, size_t{1} << 40, 4, 2, 1, 24 * GiB, "h")
          .find("use -e 8 GiB or less"),
      std::string::npos);
}

TEST(MemoryBudget, TheFourGiBSweepOnThisHostIsCappedToWhatMpiHolds) {
  // all_reduce_perf -b 8 -e 4G at 2 ranks on a 24 GiB host with 21.5 GiB
  // available: the buffers alone (2 x 8 GiB) would fit, but MPI's all-reduce
  // holds a third copy of the message: 12 GiB per rank, 24 in all.
  const size_t available = 21 * GiB + GiB / 2;
  EXPECT_EQ(memory_shortfall("gloo", Collective::kAllReduce, 4 * GiB, 4, 2, 2, available, "h"), "");
  const std::string line =
      memory_shortfall("mpi", Collective::kAllReduce, 4 * GiB, 4, 2, 2, available, "host vm");
  EXPECT_NE(line.find("-e 4 GiB needs 12 GiB per rank (send + receive buffers, and mpi's "
                      "reduction scratch of one message) for allreduce"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("use -e 2 GiB or less"), std::string::npos) << line;
  // A collective that does not reduce needs no scratch.
  EXPECT_EQ(memory_shortfall("mpi", Collective::kAllGather, 4 * GiB, 4, 2, 2, available, "h"), "");
  EXPECT_EQ(library_scratch_bytes("mpi", Collective::kReduceScatter, GiB), GiB);
  EXPECT_EQ(library_scratch_bytes("nccl", Collective::kAllReduce, GiB), 0u);
}

TEST(MemoryBudget, NothingFits) {
  const std::string line =
      memory_shortfall("gloo", Collective::kAllReduce, 1 << 20, 4, 2, 4, 3, "h");
  EXPECT_NE(line.find("not even 1 B fits"), std::string::npos) << line;
}

// MPICH's reduction scratch comes from malloc inside each call; from glibc's
// 32 MiB mmap cap up every call maps and zeroes it afresh: the console says so
// only where that happens.
TEST(MemoryBudget, ScratchAllocationNoteOnlyWhereMpichMapsItsScratchEachCall) {
  const std::string mpich = "MPICH Version:\t4.0.2";
  const std::vector<std::pair<std::string, std::string>> none;
  const std::vector<Collective> allreduce{Collective::kAllReduce};
  const std::string note = scratch_allocation_note("mpi", mpich, allreduce, 2 * GiB, none);
  EXPECT_NE(note.find("MPICH allocates scratch the size of the message"), std::string::npos);
  EXPECT_NE(note.find("MALLOC_MMAP_THRESHOLD_=4294967296"), std::string::npos);
  EXPECT_EQ(note.find('\n'), std::string::npos);
  // The default sweep's -e 32M reaches the cap; 16 MiB does not.
  EXPECT_NE(scratch_allocation_note("mpi", mpich, allreduce, size_t{32} << 20, none), "");
  EXPECT_EQ(scratch_allocation_note("mpi", mpich, allreduce, size_t{16} << 20, none), "");
  // Not MPICH, not the MPI backend, no reduction, or the threshold already set.
  EXPECT_EQ(scratch_allocation_note("mpi", "Open MPI v4.1.4", allreduce, 2 * GiB, none), "");
  EXPECT_EQ(scratch_allocation_note("nccl", mpich, allreduce, 2 * GiB, none), "");
  EXPECT_EQ(scratch_allocation_note("mpi", mpich, {Collective::kAllGather, Collective::kBroadcast},
                                    2 * GiB, none),
            "");
  EXPECT_NE(scratch_allocation_note(
                "mpi", mpich, {Collective::kAllGather, Collective::kReduceScatter}, 2 * GiB, none),
            "");
  EXPECT_EQ(scratch_allocation_note("mpi", mpich, allreduce, 2 * GiB,
                                    {{"MALLOC_MMAP_THRESHOLD_", "4294967296"}}),
            "");
}

}  // namespace
}  // namespace ccscope::bench
