// The stand-in RAS's STATUS report (ras_stub.h): NCCL RAS's format, built from
// what each rank launched and which processes are gone.
#include "ras_stub.h"

#include <gtest/gtest.h>

namespace ccscope::standin {
namespace {

RasRankView rank_view(int rank, long pid, uint64_t all_reduces, bool gone = false) {
  RasRankView r;
  r.rank = rank;
  r.pid = pid;
  r.host = "node0";
  r.gpu = rank;
  r.gone = gone;
  r.launched.assign(ras_collective_names().size(), 0);
  r.launched[0] = all_reduces;
  return r;
}

TEST(StandinRas, ARankBehindIsAMismatchAndAGoneProcessIsDead) {
  RasCommView comm{"0123456789abcdef",
                   {rank_view(0, 100, 31), rank_view(1, 101, 29), rank_view(2, 102, 31),
                    rank_view(3, 103, 5, true)}};
  const std::string report = ras_status_report({comm});
  EXPECT_NE(report.find("DEAD\n  1 job process is considered dead (unreachable via the RAS "
                        "network)\n  Process 103 on node node0 managing GPU 3\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("#0-0 (0123456789abcdef) INCOMPLETE\n  Missing communicator data from 1 "
                        "rank\n  Rank 3 -- GPU 3 managed by process 103 on node node0\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("#0-0 (0123456789abcdef) MISMATCH\n  Communicator ranks have different "
                        "AllReduce operation counts\n  2 ranks have launched up to operation 31\n"
                        "  Rank 1 has launched up to operation 29 -- GPU 1 managed by process 101 "
                        "on node node0\n\nWarnings"),
            std::string::npos)
      << report;
  EXPECT_EQ(report.rfind("Warnings\n========\n"), report.size() - 19) << report;
  // Counts that agree: no error block at all.
  const std::string healthy =
      ras_status_report({{"0123456789abcdef", {rank_view(0, 100, 7), rank_view(1, 101, 7)}}});
  EXPECT_EQ(healthy, "Errors\n======\n\nWarnings\n========\n\n");
}

}  // namespace
}  // namespace ccscope::standin
