#include "ccscope/records/diag_record.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace ccscope::records {
namespace {

DiagCheckRecord sample_fail() {
  DiagCheckRecord r;
  r.run_id = "diag-20261202T101500Z";
  r.time_utc = "2026-12-02T10:15:07Z";
  r.stage = 2;
  r.stage_name = "node";
  r.check = "node.nvlink_bandwidth";
  r.status = "FAIL";
  r.host = "gpu-node-07";
  r.rank = 3;
  r.peer = "GPU5";
  r.measured = 41.5;
  r.expected = 1.0 / 3 * 450;  // not short in decimal: the shortest exact text
  r.unit = "GB/s";
  r.message = "GPU3 -> GPU5 at 41.5 GB/s, \"NV18\" expects 150";  // a comma and quotes
  r.remedy = "check nvidia-smi nvlink -s; reseat or RMA the board";
  return r;
}

TEST(DiagRecords, EveryFieldNamedOnceAndDescribed) {
  const DiagCheckKind& kind = diag_check_kind();
  std::set<std::string_view> names;
  for (const auto& f : kind.fields) {
    EXPECT_TRUE(names.insert(f.name).second) << "named twice: " << f.name;
    EXPECT_FALSE(f.meaning.empty()) << f.name;
    EXPECT_NE(f.measured, nullptr) << f.name;
    EXPECT_NE(f.set, nullptr) << f.name;
    EXPECT_TRUE(f.in_csv) << f.name;
  }
  EXPECT_EQ(kind.schema_id(), "ccscope.diag_check/1");
  EXPECT_EQ(kind.fields.size(), 15u);  // 14 members + schema
  EXPECT_EQ(csv_line(csv_columns(kind)),
            "schema,run_id,time_utc,stage,stage_name,check,status,host,rank,peer,measured,"
            "expected,unit,message,remedy\n");
}

TEST(DiagRecords, CsvRoundTripThroughTheTable) {
  const DiagCheckRecord fail = sample_fail();
  DiagCheckRecord cluster;  // a check of the whole cluster without a figure
  cluster.run_id = fail.run_id;
  cluster.stage = 3;
  cluster.stage_name = "cluster";
  cluster.check = "cluster.clock_offset";
  cluster.status = "WARN";
  cluster.measured = -2.25;  // an offset may be negative
  cluster.unit = "ms";
  DiagCheckRecord skipped;
  skipped.check = "rank.gemm";
  skipped.status = "SKIP";

  const DiagCheckKind& kind = diag_check_kind();
  const std::string text = csv_line(csv_columns(kind)) + csv_row(kind, diag_check_cells(fail)) +
                           csv_row(kind, diag_check_cells(cluster)) +
                           csv_row(kind, diag_check_cells(skipped));
  EXPECT_EQ(text.substr(text.find('\n') + 1, 21), "ccscope.diag_check/1,");
  const std::vector<DiagCheckRecord> back = read_diag_check_csv(text);
  ASSERT_EQ(back.size(), 3u);
  const std::vector<Cell> written = diag_check_cells(fail), read = diag_check_cells(back[0]);
  for (size_t i = 0; i < kind.fields.size(); ++i)
    EXPECT_EQ(csv_text(read[i], kind.fields[i].type), csv_text(written[i], kind.fields[i].type))
        << kind.fields[i].name;
  EXPECT_EQ(back[0].stage, 2);
  EXPECT_EQ(back[0].status, "FAIL");
  EXPECT_EQ(back[0].rank, 3);
  EXPECT_EQ(back[0].measured, 41.5);
  EXPECT_EQ(back[0].expected, 1.0 / 3 * 450);
  EXPECT_EQ(back[0].message, fail.message);
  EXPECT_EQ(back[1].measured, -2.25);
  EXPECT_FALSE(back[1].expected.has_value());
  EXPECT_EQ(back[1].host, "");
  EXPECT_EQ(back[1].rank, -1);  // written as -1
  EXPECT_FALSE(back[2].measured.has_value());
  EXPECT_EQ(back[2].status, "SKIP");
}

// A CSV of the kind's columns with one row: `status` and `rank` as given.
std::string one_row(const std::string& status, const std::string& rank) {
  return "schema,run_id,stage,check,status,rank\nccscope.diag_check/1,diag-x,1,rank.gemm," +
         status + "," + rank + "\n";
}

TEST(DiagRecords, EmptyRankIsNoneInParticular) {
  const std::vector<DiagCheckRecord> back = read_diag_check_csv(one_row("PASS", ""));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].rank, -1);
  EXPECT_EQ(read_diag_check_csv(one_row("PASS", "0"))[0].rank, 0);
}

TEST(DiagRecords, RefusesWhatIsNotAVerdict) {
  for (const char* status : {"OK", "pass", "FAILED", ""}) {
    try {
      read_diag_check_csv(one_row(status, "0"));
      ADD_FAILURE() << "accepted status '" << status << "'";
    } catch (const CsvError& e) {
      EXPECT_EQ(e.line, 2u);
      EXPECT_NE(std::string(e.what()).find("status: "), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(read_diag_check_csv(one_row("PASS", "-2")), CsvError);
  EXPECT_THROW(
      read_diag_check_csv("schema,stage,check,status\nccscope.diag_check/1,0,rank.gemm,PASS\n"),
      CsvError);  // stages start at 1
  EXPECT_THROW(read_diag_check_csv("schema,check,status,measured\n"
                                   "ccscope.diag_check/1,rank.gemm,PASS,fast\n"),
               CsvError);
}

TEST(DiagRecords, RefusesANewerVersionAndOtherKinds) {
  try {
    read_diag_check_csv("schema,check,status\nccscope.diag_check/2,rank.gemm,PASS\n");
    ADD_FAILURE() << "read a newer version";
  } catch (const CsvError& e) {
    EXPECT_NE(std::string(e.what()).find("newer than this ccscope reads"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(read_diag_check_csv("schema,check,status\nccscope.train_run/1,rank.gemm,PASS\n"),
               CsvError);
}

}  // namespace
}  // namespace ccscope::records
