#include "ccscope/records/schema.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "sample_records.h"

namespace ccscope::records {
namespace {

using testing::hostile_record;
using testing::hostile_run;

LoadedBenchRow read_back_csv(const std::string& header, const std::string& line) {
  const auto rows = parse_csv(header + line);
  EXPECT_EQ(rows.size(), 2u);
  LoadedBenchRow row;
  const auto& fields = bench_kind().fields;
  for (size_t column = 0; column < rows[0].fields.size(); ++column) {
    const BenchField* field = bench_kind().find(rows[0].fields[column]);
    EXPECT_NE(field, nullptr) << rows[0].fields[column];
    if (field) field->set(row, cell_from_csv(rows[1].fields.at(column), field->type));
  }
  (void)fields;
  finish_bench_row(row);
  return row;
}

TEST(Schema, EveryFieldIsNamedOnceAndDescribed) {
  std::set<std::string_view> names;
  for (const auto& f : bench_kind().fields) {
    EXPECT_TRUE(names.insert(f.name).second) << "named twice: " << f.name;
    EXPECT_FALSE(f.meaning.empty()) << f.name;
    EXPECT_NE(f.get, nullptr);
    EXPECT_NE(f.set, nullptr);
    EXPECT_LE(f.since, bench_kind().version) << f.name;
  }
  EXPECT_EQ(bench_kind().schema_id(), "ccscope.bench/5");
}

TEST(Schema, EveryMeasuredFieldRoundTripsThroughCsvText) {
  const BenchRecord record = hostile_record();
  const RunMetadata run = hostile_run();
  const std::vector<Cell> written = bench_cells(record, run);
  const auto& fields = bench_kind().fields;
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].measured) {
      EXPECT_TRUE(written[i].present) << "sample leaves out " << fields[i].name;
    }
  const LoadedBenchRow row =
      read_back_csv(csv_line(csv_columns(bench_kind())), csv_row(bench_kind(), written));
  const std::vector<Cell> read = bench_cells(row);
  for (size_t i = 0; i < fields.size(); ++i) {
    if (!fields[i].in_csv || !fields[i].measured) continue;
    EXPECT_EQ(csv_text(read[i], fields[i].type), csv_text(written[i], fields[i].type))
        << fields[i].name;
  }
  EXPECT_EQ(row.record.wrong, 9007199254740993);
  EXPECT_EQ(row.record.size_bytes, 17179869184u);
  EXPECT_EQ(row.record.time_s, record.time_s);  // exact, not rounded to 6 digits
  EXPECT_EQ(row.run.gpu_names, run.gpu_names);
  EXPECT_EQ(row.run.environment, run.environment);
  EXPECT_EQ(row.run.command_line, run.command_line);
  EXPECT_EQ(row.record.root, 5);
  EXPECT_EQ(row.record.in_place, true);
}

TEST(Schema, ReadOnlyFieldsRoundTripFromARowReadBack) {
  LoadedBenchRow row;
  row.record.collective = "allreduce";
  row.record.size_bytes = 8;
  row.record.cpu_time_s = 4.5e-6;
  const LoadedBenchRow back =
      read_back_csv(csv_line(csv_columns(bench_kind())), csv_row(bench_kind(), bench_cells(row)));
  EXPECT_EQ(back.record.cpu_time_s, 4.5e-6);
  EXPECT_FALSE(back.record.time_s.has_value());  // absent stays absent
  EXPECT_FALSE(back.record.root.has_value());
  EXPECT_FALSE(back.record.wrong.has_value());
}

TEST(Schema, UncheckedRecordHasNoWrongCount) {
  BenchRecord record = hostile_record();
  record.checked = false;
  record.wrong = 0;
  const LoadedBenchRow row =
      read_back_csv(csv_line(csv_columns(bench_kind())),
                    csv_row(bench_kind(), bench_cells(record, hostile_run())));
  EXPECT_EQ(row.record.checked, false);
  EXPECT_FALSE(row.record.wrong.has_value());
}

TEST(Schema, VersionOneSentencesReadAsTokens) {
  EXPECT_EQ(time_statistic_name("max over ranks of mean over iterations"), "max");
  EXPECT_EQ(time_statistic_name("average over ranks of mean over iterations"), "avg");
  EXPECT_EQ(time_statistic_name("min over ranks of mean over iterations"), "min");
  EXPECT_EQ(time_statistic_name("rank 0's mean over iterations"), "rank0");
  EXPECT_EQ(time_statistic_name("rank0"), "rank0");
  EXPECT_EQ(time_statistic_name("median"), "");
}

TEST(Schema, BadValuesAreRefusedWithTheReason) {
  LoadedBenchRow row;
  const BenchField* time = bench_kind().find("time_s");
  const BenchField* ranks = bench_kind().find("ranks");
  const BenchField* flag = bench_kind().find("in_place");
  ASSERT_TRUE(time && ranks && flag);
  EXPECT_THROW(time->set(row, cell_from_csv("1.5us", FieldType::kNumber)), FieldError);
  EXPECT_THROW(time->set(row, cell_from_csv("nan", FieldType::kNumber)), FieldError);
  EXPECT_THROW(ranks->set(row, cell_from_csv("0", FieldType::kInteger)), FieldError);
  EXPECT_THROW(ranks->set(row, cell_from_csv("99999999999", FieldType::kInteger)), FieldError);
  EXPECT_THROW(flag->set(row, cell_from_csv("yes", FieldType::kFlag)), FieldError);
  try {
    ranks->set(row, cell_from_csv("-3", FieldType::kInteger));
    FAIL() << "a negative rank count was taken";
  } catch (const FieldError& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
}

TEST(Schema, VersionOfASchemaId) {
  EXPECT_EQ(schema_version("ccscope.bench/1", "ccscope.bench"), 1);
  EXPECT_EQ(schema_version("ccscope.bench/2", "ccscope.bench"), 2);
  EXPECT_EQ(schema_version("ccscope.topology/1", "ccscope.bench"), 0);
  EXPECT_EQ(schema_version("ccscope.benchmark/1", "ccscope.bench"), 0);
  EXPECT_THROW(schema_version("ccscope.bench/x", "ccscope.bench"), FieldError);
}

TEST(Csv, QuotedFieldsHoldCommasQuotesAndLineBreaks) {
  const auto rows = parse_csv("a,b,c\r\n\"x,1\",\"say \"\"hi\"\"\",\"two\nlines\"\n\nlast,,\n");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].fields, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(rows[1].fields, (std::vector<std::string>{"x,1", "say \"hi\"", "two\nlines"}));
  EXPECT_EQ(rows[1].line, 2u);
  EXPECT_EQ(rows[2].fields, (std::vector<std::string>{"last", "", ""}));
  EXPECT_EQ(rows[2].line, 5u);  // after the quoted line break and the blank line
}

TEST(Csv, AnUnclosedQuoteNamesItsLine) {
  try {
    parse_csv("a,b\n1,2\n3,\"open\n4,5\n");
    FAIL() << "an unclosed quote was read";
  } catch (const CsvError& e) {
    EXPECT_EQ(e.line, 3u);
  }
}

TEST(Csv, LineQuotesOnlyWhatNeedsIt) {
  EXPECT_EQ(csv_line({"plain", "a,b", "q\"", "", "nl\n"}), "plain,\"a,b\",\"q\"\"\",,\"nl\n\"\n");
}

TEST(Csv, ShortestNumberTextReadsBackExactly) {
  for (double v : {0.1, 1.0 / 3, 1e-300, 123456789.125, 2.5e-6}) {
    const std::string text = number_text(v);
    EXPECT_EQ(std::stod(text), v) << text;
  }
  EXPECT_EQ(number_text(0.5), "0.5");
}

}  // namespace
}  // namespace ccscope::records
