#include "ccscope/records/diag_record.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

namespace ccscope::records {
namespace {

DiagCheckRecord sample_fail() {
  DiagCheckRecord r;
  r.run_id = "diag-20261202T101500Z";
  r.time_utc = "2026-12-02T10:15:07Z";
  r.check.stage = DiagStage::kNode;
  r.check.name = "node.nvlink_bandwidth";
  r.check.status = DiagStatus::kFail;
  r.check.host = "gpu-node-07";
  r.check.rank = 3;
  r.check.peer = "GPU5";
  r.check.measured = 41.5;
  r.check.expected = 1.0 / 3 * 450;  // not short in decimal: the shortest exact text
  r.check.unit = "GB/s";
  r.check.message = "GPU3 -> GPU5 at 41.5 GB/s, \"NV18\" expects 150";  // a comma and quotes
  r.check.remedy = "check nvidia-smi nvlink -s; reseat or RMA the board";
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
  EXPECT_EQ(kind.fields.size(),
            15u);  // run_id, time_utc, the check's 11 members, stage_name, schema
  EXPECT_EQ(csv_line(csv_columns(kind)),
            "schema,run_id,time_utc,stage,stage_name,check,status,host,rank,peer,measured,"
            "expected,unit,message,remedy\n");
}

TEST(DiagRecords, CsvRoundTripThroughTheTable) {
  const DiagCheckRecord fail = sample_fail();
  DiagCheckRecord cluster;  // a check of the whole cluster without a figure
  cluster.run_id = fail.run_id;
  cluster.check.stage = DiagStage::kCluster;
  cluster.check.name = "cluster.clock_offset";
  cluster.check.status = DiagStatus::kWarn;
  cluster.check.measured = -2.25;  // an offset may be negative
  cluster.check.unit = "ms";
  DiagCheckRecord skipped;
  skipped.check.name = "rank.gemm";
  skipped.check.status = DiagStatus::kSkip;

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
  EXPECT_EQ(back[0].check.stage, DiagStage::kNode);
  EXPECT_EQ(back[0].check.status, DiagStatus::kFail);
  EXPECT_EQ(back[0].check.rank, 3);
  EXPECT_EQ(back[0].check.measured, 41.5);
  EXPECT_EQ(back[0].check.expected, 1.0 / 3 * 450);
  EXPECT_EQ(back[0].check.message, fail.check.message);
  EXPECT_EQ(back[1].check.measured, -2.25);
  EXPECT_TRUE(std::isnan(back[1].check.expected));
  EXPECT_EQ(back[1].check.host, "");
  EXPECT_EQ(back[1].check.rank, -1);  // written as -1
  EXPECT_TRUE(std::isnan(back[2].check.measured));
  EXPECT_EQ(back[2].check.status, DiagStatus::kSkip);
  // The stage's name is written from the stage.
  const std::string fail_row_start =
      "\nccscope.diag_check/1,diag-20261202T101500Z,2026-12-02T10:15:07Z,2,node,";
  EXPECT_NE(text.find(fail_row_start), std::string::npos) << text;
}

// A CSV of the kind's columns with one row: `status` and `rank` as given.
std::string one_row(const std::string& status, const std::string& rank) {
  return "schema,run_id,stage,check,status,rank\nccscope.diag_check/1,diag-x,1,rank.gemm," +
         status + "," + rank + "\n";
}

TEST(DiagRecords, EmptyRankIsNoneInParticular) {
  const std::vector<DiagCheckRecord> back = read_diag_check_csv(one_row("PASS", ""));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].check.rank, -1);
  EXPECT_EQ(read_diag_check_csv(one_row("PASS", "0"))[0].check.rank, 0);
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
  EXPECT_THROW(
      read_diag_check_csv("schema,stage,check,status\nccscope.diag_check/1,5,rank.gemm,PASS\n"),
      CsvError);  // and end at 4 (scaling)
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
