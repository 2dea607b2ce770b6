#include "ccscope/records/collective.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace ccscope {
namespace {

TEST(Collective, EveryCollectiveIsDescribedOnceUnderItsOwnName) {
  std::set<std::string> names;
  for (const auto& d : all_collectives()) {
    EXPECT_EQ(&describe(d.id), &d);
    EXPECT_TRUE(names.insert(std::string(d.name)).second) << d.name;
    EXPECT_EQ(parse_collective(d.name), d.id);
    EXPECT_EQ(parse_collective(d.nccl_tests_program), d.id) << d.nccl_tests_program;
    EXPECT_FALSE(d.size_convention.empty());
  }
  EXPECT_EQ(names.size(), 10u);
}

TEST(Collective, NamesAsToolsSpellThem) {
  EXPECT_EQ(parse_collective("/opt/nccl-tests/build/all_reduce_perf"), Collective::kAllReduce);
  EXPECT_EQ(parse_collective("reduce_scatter"), Collective::kReduceScatter);
  EXPECT_EQ(parse_collective("alltoall_perf"), Collective::kAllToAll);
  EXPECT_FALSE(parse_collective("all_reduce_perf_mpi_typo"));
  EXPECT_FALSE(parse_collective(""));
  EXPECT_EQ(canonical_collective_name("all_gather_perf"), "allgather");
  EXPECT_EQ(canonical_collective_name("gather_perf"), "gather");
  EXPECT_EQ(canonical_collective_name("alltoallv_perf"), "alltoallv");
  EXPECT_EQ(canonical_collective_name("gatherv"), "");
}

TEST(Collective, OsuTitlesOfEveryCollective) {
  EXPECT_EQ(collective_from_osu_title("# OSU MPI Allreduce Latency Test v7.3"),
            Collective::kAllReduce);
  EXPECT_EQ(
      collective_from_osu_title("# OSU MPI All-to-All Personalized Exchange Latency Test v5.6.2"),
      Collective::kAllToAll);
  EXPECT_EQ(collective_from_osu_title("# OSU MPI Allgather Latency Test v7.4"),
            Collective::kAllGather);
  EXPECT_EQ(collective_from_osu_title("# OSU MPI Reduce_scatter Latency Test v6.1"),
            Collective::kReduceScatter);
  EXPECT_EQ(collective_from_osu_title("# OSU MPI Broadcast Latency Test v7.0"),
            Collective::kBroadcast);
  EXPECT_EQ(collective_from_osu_title("# OSU MPI Reduce Scatter Latency Test v7.3"),
            Collective::kReduceScatter);  // not scatter
  EXPECT_EQ(collective_from_osu_title("# OSU MPI Scatter Latency Test v7.3"), Collective::kScatter);
  EXPECT_EQ(collective_from_osu_title("# OSU MPI Reduce Latency Test v7.3"), Collective::kReduce);
  EXPECT_FALSE(collective_from_osu_title("# OSU MPI Latency Test v7.3"));
  EXPECT_FALSE(collective_from_osu_title("# OSU MPI Allreduce Bandwidth"));
}

TEST(Collective, OsuPrintsOneRanksBlockForGatherAndAllToAllOnly) {
  EXPECT_TRUE(describe(Collective::kAllGather).osu_size_is_per_rank);
  EXPECT_TRUE(describe(Collective::kAllToAll).osu_size_is_per_rank);
  EXPECT_FALSE(describe(Collective::kAllReduce).osu_size_is_per_rank);
  EXPECT_FALSE(describe(Collective::kBroadcast).osu_size_is_per_rank);
}

TEST(Collective, BusFactorsOfNcclTestsPerformanceMd) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllGather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kAllToAll, 3), 2.0 / 3);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::kSendRecv, 8), 1.0);
}

TEST(Collective, InPlaceAndReductionFlags) {
  EXPECT_TRUE(describe(Collective::kAllReduce).reduces);
  EXPECT_TRUE(describe(Collective::kReduceScatter).reduces);
  EXPECT_FALSE(describe(Collective::kAllGather).reduces);
  EXPECT_TRUE(describe(Collective::kBroadcast).has_root);
  EXPECT_FALSE(describe(Collective::kAllToAll).in_place);
  EXPECT_FALSE(describe(Collective::kSendRecv).in_place);
  EXPECT_TRUE(describe(Collective::kAllGather).in_place);
}

// nccl-tests' tables: the redop column says the reduction where there is one
// (sendrecv: any op, run without reducing); 2.0-2.11 headers show redop for
// all-to-all too, root for the rooted collectives.
TEST(Collective, NcclTestsColumnsOfEachCollective) {
  for (const auto& d : all_collectives()) {
    EXPECT_EQ(d.nccl_tests_op == NcclTestsOp::kReduction, d.reduces) << d.name;
    EXPECT_EQ(d.nccl_tests_old_columns.find("root") != std::string_view::npos, d.has_root)
        << d.name;
  }
  EXPECT_EQ(describe(Collective::kSendRecv).nccl_tests_op, NcclTestsOp::kAny);
  EXPECT_EQ(describe(Collective::kAllGather).nccl_tests_op, NcclTestsOp::kNone);
  EXPECT_EQ(describe(Collective::kAllReduce).nccl_tests_old_columns, "redop");
  EXPECT_EQ(describe(Collective::kAllToAll).nccl_tests_old_columns, "redop");
  EXPECT_EQ(describe(Collective::kBroadcast).nccl_tests_old_columns, "root");
  EXPECT_EQ(describe(Collective::kAllGather).nccl_tests_old_columns, "");
  EXPECT_EQ(describe(Collective::kSendRecv).nccl_tests_old_columns, "");
}

}  // namespace
}  // namespace ccscope
