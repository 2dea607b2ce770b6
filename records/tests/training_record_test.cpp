#include "ccscope/records/training_record.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace ccscope::records {
namespace {

TrainRunRecord sample_run() {
  TrainRunRecord r;
  r.run_id = "zero3-n4";
  r.strategy = "zero3";
  r.ranks = 4;
  r.nodes = 2;
  r.backend = "mpi";
  r.precision = "bf16";
  r.optimizer = "adamw";
  r.width = 1024;
  r.depth = 8;
  r.parameters = 8396800;
  r.global_batch = 64;
  r.micro_batches = 2;
  r.steps = 40;
  r.warmup_steps = 5;
  r.overlap = false;
  r.prefetch = true;
  r.bucket_bytes = 25 << 20;
  r.scaling = "strong";
  r.step_median_s = 0.0123;
  r.step_p90_s = 0.0151;
  r.compute_median_s = 0.0081;
  r.comm_median_s = 0.0062;
  r.exposed_comm_median_s = 0.0042;
  r.comm_share = 0.504;
  r.exposed_comm_share = 1.0 / 3;  // not short in decimal: the shortest exact text
  r.samples_per_s = 5203.25;
  r.bytes_per_step = 75571200;
  r.bytes_per_step_expected = 75571200;
  r.memory_parameters_B = 4198400;
  r.memory_gradients_B = 4198400;
  r.memory_optimizer_B = 50380800;
  r.memory_parameters_expected_B = 4198400;
  r.memory_gradients_expected_B = 4198400;
  r.memory_optimizer_expected_B = 50380800;
  r.final_loss = -0.25;  // a loss may be negative
  r.loss_max_rel_diff = 3.1e-7;
  r.loss_tolerance = 1e-5;
  r.loss_equivalent = true;
  r.device_peak_B = 1.5e9;
  r.device_used_B = 2147483648;
  r.offload_bytes_per_step = 33587200;
  r.offload_bytes_expected = 33587200;
  r.offload_copy_median_s = 0.0021;
  r.host_optimizer_median_s = 0.0187;
  r.speedup = 3.42;
  r.efficiency = 0.855;
  return r;
}

TrainStepRecord sample_step() {
  TrainStepRecord s;
  s.run_id = "ddp-n2-weak";
  s.strategy = "ddp";
  s.ranks = 2;
  s.step = 17;
  s.loss = 2.302585092994046;
  s.step_s = 0.0211;
  s.compute_s = 0.015;
  s.comm_s = 0.009;
  s.exposed_comm_s = 0.0061;
  s.bytes_sent = 33587200;
  s.grad_norm = 1.75;
  s.loss_scale = 65536;
  s.skipped = true;
  return s;
}

template <typename Kind>
void expect_every_field_once(const Kind& kind, const std::string& id) {
  std::set<std::string_view> names;
  for (const auto& f : kind.fields) {
    EXPECT_TRUE(names.insert(f.name).second) << "named twice: " << f.name;
    EXPECT_FALSE(f.meaning.empty()) << f.name;
    EXPECT_NE(f.measured, nullptr) << f.name;
    EXPECT_NE(f.set, nullptr) << f.name;
  }
  EXPECT_EQ(kind.schema_id(), id);
  EXPECT_EQ(kind.fields.front().name, "schema");
}

TEST(TrainingRecords, EveryFieldNamedOnceAndDescribed) {
  expect_every_field_once(train_step_kind(), "ccscope.train_step/1");
  expect_every_field_once(train_run_kind(), "ccscope.train_run/3");
  // One column per member of the structs (13 + schema, 49 + schema).
  EXPECT_EQ(train_step_kind().fields.size(), 14u);
  EXPECT_EQ(train_run_kind().fields.size(), 50u);
}

TEST(TrainingRecords, RankKindRoundTripsEveryField) {
  expect_every_field_once(train_rank_kind(), "ccscope.train_rank/1");
  EXPECT_EQ(train_rank_kind().fields.size(), 31u);  // 30 members + schema
  TrainRankRecord r;
  r.run_id = "3d-t2p2d1-n4";
  r.strategy = "3d";
  r.rank = 3;
  r.host = "node-b";
  r.tp_rank = 1;
  r.stage = 1;
  r.tp = 2;
  r.pp = 2;
  r.schedule = "interleaved";
  r.chunks = 2;
  r.micro_batches = 8;
  r.pp_bytes = 65536;
  r.bubble = 0.0625;
  r.bubble_textbook = 1.0 / 17;
  r.peak_in_flight = 5;
  r.load_imbalance = 1.5;
  const TrainRankKind& kind = train_rank_kind();
  const std::string text = csv_line(csv_columns(kind)) + csv_row(kind, train_rank_cells(r));
  const std::vector<TrainRankRecord> back = read_train_rank_csv(text);
  ASSERT_EQ(back.size(), 1u);
  const std::vector<Cell> written = train_rank_cells(r), read = train_rank_cells(back[0]);
  for (size_t i = 0; i < kind.fields.size(); ++i)
    EXPECT_EQ(csv_text(read[i], kind.fields[i].type), csv_text(written[i], kind.fields[i].type))
        << kind.fields[i].name;
  EXPECT_EQ(back[0].schedule, "interleaved");
  EXPECT_EQ(back[0].host, "node-b");
  EXPECT_EQ(back[0].bubble_textbook, 1.0 / 17);
  EXPECT_EQ(back[0].peak_in_flight, 5);
  // A run row is not a rank row.
  const TrainRunKind& runs = train_run_kind();
  EXPECT_ANY_THROW(read_train_rank_csv(csv_line(csv_columns(runs)) +
                                       csv_row(runs, train_run_cells(TrainRunRecord{}))));
}

TEST(TrainingRecords, RunCsvRoundTripThroughTheTable) {
  const TrainRunRecord measured = sample_run();
  TrainRunRecord bare;  // a run without a loss reference or a one-rank baseline
  bare.run_id = "single-n1";
  bare.strategy = "single";
  bare.step_median_s = 0.04;

  const TrainRunKind& kind = train_run_kind();
  std::string text = csv_line(csv_columns(kind));
  text += csv_row(kind, train_run_cells(measured));
  text += csv_row(kind, train_run_cells(bare));
  EXPECT_EQ(text.substr(0, text.find(',')), "schema");
  EXPECT_EQ(text.substr(text.find('\n') + 1, 20), "ccscope.train_run/3,");
  const std::vector<TrainRunRecord> back = read_train_run_csv(text);
  ASSERT_EQ(back.size(), 2u);
  // Every cell reads back to the same text.
  const std::vector<Cell> written = train_run_cells(measured), read = train_run_cells(back[0]);
  for (size_t i = 0; i < kind.fields.size(); ++i)
    EXPECT_EQ(csv_text(read[i], kind.fields[i].type), csv_text(written[i], kind.fields[i].type))
        << kind.fields[i].name;
  EXPECT_EQ(back[0].run_id, "zero3-n4");
  EXPECT_EQ(back[0].nodes, 2);
  EXPECT_EQ(back[0].overlap, false);
  EXPECT_EQ(back[0].exposed_comm_share, 1.0 / 3);
  EXPECT_EQ(back[0].final_loss, -0.25);
  EXPECT_EQ(back[0].loss_max_rel_diff, 3.1e-7);
  EXPECT_EQ(back[0].loss_equivalent, true);
  EXPECT_EQ(back[0].speedup, 3.42);
  EXPECT_EQ(back[0].efficiency, 0.855);
  // Optional figures absent: empty cells, read back as absent.
  EXPECT_EQ(back[1].strategy, "single");
  EXPECT_EQ(back[1].step_median_s, 0.04);
  EXPECT_EQ(back[1].scaling, "");
  EXPECT_FALSE(back[1].loss_max_rel_diff.has_value());
  EXPECT_FALSE(back[1].loss_tolerance.has_value());
  EXPECT_FALSE(back[1].loss_equivalent.has_value());
  EXPECT_FALSE(back[1].speedup.has_value());
  EXPECT_FALSE(back[1].efficiency.has_value());
  EXPECT_NE(text.find("single-n1,single,"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 6), ",,,,,\n");  // the five optional figures
}

TEST(TrainingRecords, StepCsvRoundTripThroughTheTable) {
  const TrainStepRecord measured = sample_step();
  TrainStepRecord first;
  first.run_id = "single,n1";  // a comma: quoted by the writer
  first.strategy = "single";
  first.loss = 2.5;
  const TrainStepKind& kind = train_step_kind();
  const std::string text = csv_line(csv_columns(kind)) + csv_row(kind, train_step_cells(measured)) +
                           csv_row(kind, train_step_cells(first));
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "schema,run_id,strategy,ranks,step,loss,step_s,compute_s,comm_s,exposed_comm_s,"
            "bytes_sent,grad_norm,loss_scale,skipped");
  const std::vector<TrainStepRecord> back = read_train_step_csv(text);
  ASSERT_EQ(back.size(), 2u);
  const std::vector<Cell> written = train_step_cells(measured), read = train_step_cells(back[0]);
  for (size_t i = 0; i < kind.fields.size(); ++i)
    EXPECT_EQ(csv_text(read[i], kind.fields[i].type), csv_text(written[i], kind.fields[i].type))
        << kind.fields[i].name;
  EXPECT_EQ(back[0].step, 17);
  EXPECT_EQ(back[0].loss, 2.302585092994046);
  EXPECT_EQ(back[0].exposed_comm_s, 0.0061);
  EXPECT_EQ(back[0].loss_scale, 65536);
  EXPECT_TRUE(back[0].skipped);
  EXPECT_EQ(back[1].run_id, "single,n1");
  EXPECT_EQ(back[1].ranks, 1);
  EXPECT_EQ(back[1].step, 0);
  EXPECT_FALSE(back[1].skipped);
}

TEST(TrainingRecords, BadFigureNamesTheFieldAndLine) {
  const std::string text =
      "schema,run_id,step,loss\n"
      "ccscope.train_step/1,ddp-n2,0,2.5\n"
      "ccscope.train_step/1,ddp-n2,1,fast\n";
  try {
    read_train_step_csv(text);
    FAIL() << "no error";
  } catch (const CsvError& e) {
    EXPECT_EQ(e.line, 3u);
    EXPECT_NE(std::string(e.what()).find("loss"), std::string::npos) << e.what();
  }
}

TEST(TrainingRecords, NegativeCountsAndTimesAreRefused) {
  EXPECT_THROW(read_train_run_csv("run_id,ranks\nddp-n0,0\n"), CsvError);
  EXPECT_THROW(read_train_run_csv("run_id,step_median_s\nddp-n2,-0.1\n"), CsvError);
  EXPECT_THROW(read_train_step_csv("run_id,step\nddp-n2,-1\n"), CsvError);
  EXPECT_THROW(read_train_step_csv("run_id,ranks\nddp-n0,0\n"), CsvError);
  EXPECT_EQ(read_train_step_csv("run_id,loss\nddp-n2,-1.5\n").at(0).loss, -1.5);
}

TEST(TrainingRecords, TruncatedRowIsRefusedWithItsLine) {
  const std::string text =
      "schema,run_id,strategy,ranks\n"
      "ccscope.train_run/1,ddp-n2,ddp,2\n"
      "ccscope.train_run/1,ddp-n4\n";
  try {
    read_train_run_csv(text);
    FAIL() << "no error";
  } catch (const CsvError& e) {
    EXPECT_EQ(e.line, 3u);
  }
}

// As ccscope.bench: a file of a newer version is refused, as is a row of
// another kind.
TEST(TrainingRecords, NewerVersionOrOtherKindRefused) {
  try {
    read_train_run_csv("schema,run_id\nccscope.train_run/3,a\nccscope.train_run/4,b\n");
    FAIL() << "no error";
  } catch (const CsvError& e) {
    EXPECT_EQ(e.line, 3u);
    EXPECT_NE(std::string(e.what()).find("newer"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_train_step_csv("schema,run_id\nccscope.train_run/1,a\n"), CsvError);
  EXPECT_THROW(read_train_run_csv("schema,run_id\nccscope.bench/3,a\n"), CsvError);
  EXPECT_EQ(read_train_step_csv("schema,run_id\nccscope.train_step/1,a\n").size(), 1u);
}

}  // namespace
}  // namespace ccscope::records
