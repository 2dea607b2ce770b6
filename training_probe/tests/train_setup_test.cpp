// ccscope train's settings into options and plans (train_setup.h), without MPI.
#include "ccscope/training_probe/train_setup.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/parallel_trainer.h"

namespace ccscope::training_probe {
namespace {

// The problem of `settings` ("" when they are good).
std::string problem_of(const TrainSettings& settings, double memory_bytes = 0) {
  TrainOptions options;
  return options_from_settings(settings, options, memory_bytes);
}

TrainOptions options_of(const TrainSettings& settings) {
  TrainOptions options;
  EXPECT_EQ(options_from_settings(settings, options, 0), "");
  return options;
}

TEST(TrainSetup, DefaultsAreDdpWithTheFlagsDefaults) {
  TrainSettings s;
  s.bucket_mb = 0.5;
  const TrainOptions o = options_of(s);
  EXPECT_EQ(o.strategy, Strategy::kDdp);
  EXPECT_EQ(o.shape.width, 512u);
  EXPECT_EQ(o.global_batch, 128u);
  EXPECT_EQ(o.bucket_bytes, 512u * 1024);
  // DDP's first bucket is 1 MiB unless the cap is smaller.
  EXPECT_EQ(o.first_bucket_bytes, o.bucket_bytes);
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(300000));
  EXPECT_FALSE(o.grad_clip.has_value());
}

TEST(TrainSetup, WordsBecomeChoices) {
  TrainSettings s;
  s.strategy = "3d";
  s.precision = "bfloat16";
  s.optimizer = "adamw";
  s.activation = "tanh";
  s.schedule = "interleaved";
  s.chunks = 2;
  s.zero_stage = 1;
  s.grad_clip = 0.5;
  s.no_overlap = true;
  const TrainOptions o = options_of(s);
  EXPECT_EQ(o.strategy, Strategy::kHybrid);
  EXPECT_EQ(o.precision, Precision::kBFloat16);
  EXPECT_EQ(o.optimizer.kind, OptimizerKind::kAdamW);
  EXPECT_EQ(o.shape.activation, Activation::kTanh);
  EXPECT_EQ(o.parallel.schedule, PipelineSchedule::kInterleaved);
  EXPECT_EQ(o.parallel.chunks, 2u);
  EXPECT_TRUE(o.parallel.zero1);
  EXPECT_EQ(o.grad_clip, 0.5);
  EXPECT_FALSE(o.overlap);
}

TEST(TrainSetup, BadSettingsNameTheFlag) {
  auto with = [](auto change) {
    TrainSettings s;
    change(s);
    return problem_of(s);
  };
  EXPECT_EQ(with([](TrainSettings& s) { s.strategy = "zero4"; }),
            "--strategy 'zero4': use single, ddp, zero1, zero2, zero3, tp, pp, ep or 3d");
  EXPECT_EQ(with([](TrainSettings& s) { s.tp = 2; }),
            "--tp, --pp, --dp, --chunks, --stage-layers, --zero-stage and --experts need "
            "--strategy tp, pp, ep or 3d");
  EXPECT_EQ(with([](TrainSettings& s) { s.experts = 4; }),
            "--experts, --top-k and --capacity-factor need --strategy ep");
  EXPECT_EQ(with([](TrainSettings& s) { s.width = 46341; }),
            "--width 46341: use 1 to 46340 (a weight matrix must fit MPI's int count)");
  EXPECT_EQ(with([](TrainSettings& s) { s.threads = 0; }), "--threads must be at least 1");
  EXPECT_EQ(with([](TrainSettings& s) { s.offload = "gpu"; }),
            "--offload 'gpu': use optimizer or params");
  EXPECT_EQ(with([](TrainSettings& s) { s.fault = "nosuch"; }),
            "--fault 'nosuch': use sum, sampler, bucket, clip, microbatch, tp-allreduce or expert");
  // The first problem wins, in the flags' order of checks.
  EXPECT_EQ(with([](TrainSettings& s) {
              s.precision = "fp8";
              s.optimizer = "lamb";
            }),
            "--precision 'fp8': use fp32, bf16 or fp16");
}

TEST(TrainSetup, FaultsAreMapped) {
  TrainSettings s;
  s.fault = "sum";
  EXPECT_TRUE(options_of(s).faults.sum_not_average);
  s.fault = "bucket";
  EXPECT_EQ(options_of(s).faults.unreduced_bucket, 0u);
  s.fault = "microbatch";
  s.micro_batches = 2;
  EXPECT_EQ(options_of(s).faults.dropped_micro_batch, 1u);
}

TEST(TrainSetup, MemoryIsCheckedAgainstTheMachine) {
  TrainSettings s;
  s.width = 1024;
  s.depth = 2;
  // 4 (2 w^2 + 2 x 1024 w + 6 x 2 (w^2 + w) + 2 x 2 x 128 w) bytes = 69 MB, refused
  // above 0.8 of the memory.
  EXPECT_EQ(problem_of(s, 1e8), "");
  const std::string refused = problem_of(s, 6e7);
  EXPECT_NE(refused.find("need about 0.1 GB per rank, more than this machine's 0.1 GB"),
            std::string::npos)
      << refused;
  EXPECT_EQ(problem_of(s, 0), "") << "unknown memory is not checked";
  EXPECT_GT(physical_memory_bytes(), 0);
}

TEST(TrainSetup, RankCounts) {
  std::vector<size_t> counts;
  EXPECT_EQ(parse_rank_counts({"1", "2", "4"}, counts), "");
  EXPECT_EQ(counts, (std::vector<size_t>{1, 2, 4}));
  EXPECT_EQ(parse_rank_counts({"1", "x"}, counts), "--scaling 'x': give rank counts, e.g. 1,2,4");
  EXPECT_NE(parse_rank_counts({"0"}, counts), "");
  EXPECT_NE(parse_rank_counts({"2k"}, counts), "");
  EXPECT_NE(parse_rank_counts({""}, counts), "");
}

TEST(TrainSetup, RunIds) {
  TrainOptions o;
  EXPECT_EQ(run_id(o, 4, false), "ddp-n4");
  EXPECT_EQ(run_id(o, 4, true), "ddp-n4-weak");
  o.strategy = Strategy::kHybrid;
  o.parallel.tp = 2;
  o.parallel.pp = 3;
  o.parallel.dp = 1;
  EXPECT_EQ(run_id(o, 6, false), "3d-t2p3d1-n6");
  o.strategy = Strategy::kExpert;
  o.parallel.experts = 8;
  EXPECT_EQ(layout_text(o), "ep8");
}

TEST(TrainSetup, TensorGroupsAcrossHosts) {
  ParallelOptions layout;
  layout.tp = 2;
  layout.dp = 2;
  // Node by node: each tensor-parallel pair on one host.
  EXPECT_EQ(split_tensor_groups(layout, {"a", "a", "b", "b"}), "");
  // Round-robin: ranks 0 and 1 on different hosts.
  EXPECT_EQ(split_tensor_groups(layout, {"a", "b", "a", "b"}),
            "tensor-parallel group of ranks 0, 1 spans hosts a, b");
}

TEST(TrainSetup, LayoutCompletedFromTheRanks) {
  TrainOptions o;
  o.shape = {16, 4, Activation::kRelu};
  o.strategy = Strategy::kTensor;
  o.parallel.tp = o.parallel.pp = o.parallel.dp = 0;  // as the settings leave them
  EXPECT_EQ(complete_layout(o, 4, 0), "");
  EXPECT_EQ(o.parallel.tp, 4u);
  EXPECT_EQ(o.parallel.dp, 1u);

  TrainOptions h = o;
  h.strategy = Strategy::kHybrid;
  h.parallel = {};
  h.parallel.tp = 2;
  h.parallel.pp = 0;
  h.parallel.dp = 0;
  EXPECT_EQ(complete_layout(h, 4, 0), "");
  EXPECT_EQ(h.parallel.pp, 1u);
  EXPECT_EQ(h.parallel.dp, 2u) << "dp takes what tp x pp leave";

  TrainOptions bad = o;
  bad.parallel = {};
  bad.parallel.tp = 3;
  bad.parallel.pp = 0;
  bad.parallel.dp = 0;
  EXPECT_EQ(complete_layout(bad, 4, 0), "--tp 3 x --pp 1 does not divide the 4 ranks");
  bad.parallel = {};
  bad.parallel.tp = 8;
  bad.parallel.pp = 0;
  bad.parallel.dp = 0;
  EXPECT_EQ(complete_layout(bad, 4, 0), "--tp 8, --pp 0 and --dp 0 cannot exceed the 4 ranks");
  EXPECT_EQ(complete_layout(o, 4, 2), "--ep needs --strategy ep");

  TrainOptions ep = o;
  ep.strategy = Strategy::kExpert;
  ep.parallel = {};
  ep.parallel.experts = 4;
  EXPECT_EQ(complete_layout(ep, 2, 4),
            "--ep 4: expert parallelism spans every rank; launch with mpiexec -n 4");
}

TEST(TrainSetup, ModelParametersAndReplicas) {
  TrainOptions o;
  o.shape = {16, 4, Activation::kRelu};
  EXPECT_EQ(model_parameters(o), parameter_count(o.shape));
  EXPECT_EQ(data_replicas(o, 4), 4u);
  o.strategy = Strategy::kHybrid;
  o.parallel.dp = 2;
  EXPECT_EQ(data_replicas(o, 4), 2u);
  o.strategy = Strategy::kExpert;
  o.parallel.experts = 4;
  EXPECT_EQ(model_parameters(o), moe_parameter_count(o.shape, 4));
  EXPECT_GT(model_parameters(o), parameter_count(o.shape));
  EXPECT_EQ(data_replicas(o, 4), 4u);
}

TrainOptions small_options() {
  TrainSettings s;
  s.width = 8;
  s.depth = 2;
  s.steps = 2;
  return options_of(s);
}

TEST(TrainSetup, PlanRoundsTheDefaultBatch) {
  TrainSettings s;
  const TrainPlan plan = plan_runs(s, small_options(), {}, 3);
  EXPECT_EQ(plan.problem, "");
  EXPECT_EQ(plan.rank_counts, (std::vector<size_t>{3}));
  ASSERT_TRUE(plan.rounded);
  EXPECT_EQ(plan.rounded->from, 128u);
  EXPECT_EQ(plan.rounded->to, 129u);
  EXPECT_EQ(plan.rounded->why, "ranks x micro-batches");
  EXPECT_EQ(plan.base.global_batch, 129u);

  // Every run of a scaling list divides it: lcm(1, 2, 3) = 6.
  const TrainPlan scaling = plan_runs(s, small_options(), {1, 2, 3}, 4);
  EXPECT_EQ(scaling.base.global_batch, 132u);

  // A given batch is never rounded: it is refused.
  s.global_batch_given = true;
  const TrainPlan given = plan_runs(s, small_options(), {}, 3);
  EXPECT_FALSE(given.rounded);
  EXPECT_NE(given.problem.find("global batch 128 does not divide over 3 ranks"), std::string::npos)
      << given.problem;
}

TEST(TrainSetup, PlanRankCounts) {
  TrainSettings s;
  EXPECT_EQ(plan_runs(s, small_options(), {1, 4}, 2).problem,
            "--scaling 4: the job has 2 rank(s); launch with mpiexec -n 4");
  TrainOptions single = small_options();
  single.strategy = Strategy::kSingle;
  EXPECT_EQ(plan_runs(s, single, {}, 4).rank_counts, (std::vector<size_t>{1}));
  s.weak = true;
  const TrainPlan weak = plan_runs(s, small_options(), {1, 2}, 2);
  EXPECT_EQ(weak.problem, "");
  EXPECT_EQ(options_at(weak, 2).global_batch, 2 * weak.base.global_batch);
}

TEST(TrainSetup, PlanRefusesWhatModelParallelRunsCannotDo) {
  TrainSettings s;
  TrainOptions tp = small_options();
  tp.strategy = Strategy::kTensor;
  s.scaling = {"1", "2"};
  EXPECT_NE(plan_runs(s, tp, {1, 2}, 2).problem.find("--scaling and --weak"), std::string::npos);
  s.scaling.clear();
  s.export_data = true;
  EXPECT_EQ(plan_runs(s, tp, {}, 2).problem,
            "--deepspeed-config and --export apply to single, ddp and zero");
  s.export_data = false;
  // On the CPU path a model-parallel run has no optimizer to offload to the host.
  s.offload = "optimizer";
  EXPECT_EQ(plan_runs(s, tp, {}, 2).problem,
            "--offload applies to tp, pp, 3d and ep on a GPU backend (--backend nccl), and to "
            "single, ddp and zero");
  s.offload.clear();
  const TrainPlan plan = plan_runs(s, tp, {}, 2);
  EXPECT_EQ(plan.problem, "");
  EXPECT_EQ(plan.base.parallel.tp, 2u);
  s.rank_records = true;
  EXPECT_EQ(plan_runs(s, small_options(), {}, 2).problem,
            "--ranks-csv needs --strategy tp, pp, ep or 3d");
}

TEST(TrainSetup, PlanAppliesTheDeepSpeedConfig) {
  TrainSettings s;
  s.deepspeed_config = "ds.json";
  int reads = 0;
  auto read = [&] {
    ++reads;
    return std::string(
        R"({"train_batch_size": 8, "gradient_accumulation_steps": 2, "zero_optimization": )"
        R"({"stage": 2, "offload_optimizer": {"device": "cpu"}}})");
  };
  const TrainPlan plan = plan_runs(s, small_options(), {}, 2, read);
  EXPECT_EQ(plan.problem, "");
  ASSERT_TRUE(plan.deepspeed);
  EXPECT_EQ(plan.base.strategy, Strategy::kZero2);
  EXPECT_EQ(plan.base.global_batch, 8u) << "the config's batch is not rounded";
  EXPECT_FALSE(plan.rounded);
  EXPECT_EQ(plan.offload, "optimizer");
  // The rank counts are checked before the file is read.
  EXPECT_NE(plan_runs(s, small_options(), {4}, 2, read).problem, "");
  EXPECT_EQ(reads, 1);
  try {
    plan_runs(s, small_options(), {}, 2, [] { return std::string("{"); });
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("deepspeed config ds.json: ", 0), 0u) << e.what();
  }
}

TEST(TrainSetup, OverlapNeedsSerializedThreads) {
  TrainSettings s;
  const TrainPlan serialized = plan_runs(s, small_options(), {}, 2, {}, true);
  EXPECT_TRUE(serialized.base.overlap);
  EXPECT_FALSE(serialized.overlap_refused);
  const TrainPlan funneled = plan_runs(s, small_options(), {}, 2, {}, false);
  EXPECT_FALSE(funneled.base.overlap);
  EXPECT_TRUE(funneled.overlap_refused);
  TrainOptions no_overlap = small_options();
  no_overlap.overlap = false;
  EXPECT_FALSE(plan_runs(s, no_overlap, {}, 2, {}, false).overlap_refused) << "nothing to refuse";
}

TEST(TrainSetup, ExportFiles) {
  TrainOptions o = small_options();
  o.global_batch = 4;
  const std::vector<ExportFile> files = export_files(o);
  ASSERT_EQ(files.size(), 5u);
  EXPECT_EQ(files[0].name, "initial_parameters.f32");
  EXPECT_EQ(files[0].bytes.size(), 4 * parameter_count(o.shape));
  const std::vector<float> params = initial_parameters(o.shape, o.seed);
  EXPECT_EQ(std::memcmp(files[0].bytes.data(), params.data(), files[0].bytes.size()), 0);
  EXPECT_EQ(files[1].name, "inputs.f32");
  EXPECT_EQ(files[1].bytes.size(), 4 * dataset_size(o) * o.shape.width);
  EXPECT_EQ(files[3].name, "batches.i64");
  EXPECT_EQ(files[3].bytes.size(), 8 * o.steps * o.global_batch);
  EXPECT_EQ(files[4].name, "model.json");
  EXPECT_NE(files[4].bytes.find("\"width\": 8, \"depth\": 2"), std::string::npos) << files[4].bytes;
}

}  // namespace
}  // namespace ccscope::training_probe
