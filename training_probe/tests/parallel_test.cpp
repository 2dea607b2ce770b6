// The model-parallel strategies against the single-rank reference, ranks as
// threads over ccscope's ring algorithms on the in-process transport (the
// hostile double: rendezvous sends, timeouts): tensor, pipeline and expert
// parallel and their combinations give single's losses within the tolerance,
// and each deliberately broken variant does not. Interleaved pipelines post
// four transfers in one batch, which only MPI's batch_send_recv takes; the
// MPI integration test covers them.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/group_point_to_point.h"
#include "ccscope/collectives/in_process_transport.h"
#include "ccscope/training_probe/equivalence.h"
#include "ccscope/training_probe/parallel_trainer.h"

namespace ccscope::training_probe {
namespace {

TrainOptions dense_options(Strategy strategy, size_t tp, size_t pp, size_t dp) {
  TrainOptions o;
  o.strategy = strategy;
  o.shape = {16, 4, Activation::kTanh};
  o.global_batch = 48;
  o.steps = 30;
  o.optimizer.lr = 0.05;
  o.optimizer.momentum = 0.9;
  o.timeout = std::chrono::seconds(20);
  o.check_consistency = true;
  o.parallel.tp = tp;
  o.parallel.pp = pp;
  o.parallel.dp = dp;
  return o;
}

// Every rank's result of `options` on tp x pp x dp in-process ranks.
std::vector<TrainResult> run_grid(const TrainOptions& options) {
  const ParallelOptions& l = options.parallel;
  const int ranks = options.strategy == Strategy::kExpert ? static_cast<int>(l.dp)
                                                          : static_cast<int>(l.tp * l.pp * l.dp);
  std::vector<TrainResult> results(static_cast<size_t>(ranks));
  InProcessTransport::run(ranks, [&](PointToPoint& p2p) {
    const size_t me = static_cast<size_t>(p2p.rank());
    auto world = make_ring_communicator(p2p);
    if (options.strategy == Strategy::kExpert) {
      results[me] = train_parallel({world.get()}, options);
      return;
    }
    // Members of each group: the ranks whose colour is this rank's.
    const GroupColors mine = group_colors(me, l);
    std::vector<int> tp, pp, dp;
    for (size_t r = 0; r < static_cast<size_t>(ranks); ++r) {
      const GroupColors c = group_colors(r, l);
      if (c.tp == mine.tp) tp.push_back(static_cast<int>(r));
      if (c.pp == mine.pp) pp.push_back(static_cast<int>(r));
      if (c.dp == mine.dp) dp.push_back(static_cast<int>(r));
    }
    auto tp_p2p = make_group_point_to_point(p2p, tp), pp_p2p = make_group_point_to_point(p2p, pp),
         dp_p2p = make_group_point_to_point(p2p, dp);
    auto tp_comm = make_ring_communicator(*tp_p2p);
    auto pp_comm = make_ring_communicator(*pp_p2p);
    auto dp_comm = make_ring_communicator(*dp_p2p);
    results[me] =
        train_parallel({world.get(), tp_comm.get(), pp_comm.get(), dp_comm.get()}, options);
  });
  for (size_t r = 1; r < results.size(); ++r)
    EXPECT_EQ(losses(results[r]), losses(results[0])) << "rank " << r;
  return results;
}

EquivalenceResult against_parallel_single(const TrainOptions& options, const TrainResult& result) {
  return compare_losses(losses(result), losses(train_parallel_single(options)),
                        loss_tolerance(options.precision));
}

TEST(ParallelGrid, TensorFastestPipelineSlowest) {
  ParallelOptions l;
  l.tp = 2;
  l.pp = 2;
  l.dp = 2;
  EXPECT_EQ(grid_position(0, l), (GridPosition{0, 0, 0}));
  EXPECT_EQ(grid_position(1, l), (GridPosition{1, 0, 0}));
  EXPECT_EQ(grid_position(2, l), (GridPosition{0, 1, 0}));
  EXPECT_EQ(grid_position(5, l), (GridPosition{1, 0, 1}));
  for (size_t r = 0; r < 8; ++r) EXPECT_EQ(grid_rank(grid_position(r, l), l), r);
  // Ranks 0 and 1 share a tensor group; 0 and 2 a data group; 0 and 4 a pipeline.
  EXPECT_EQ(group_colors(0, l).tp, group_colors(1, l).tp);
  EXPECT_NE(group_colors(0, l).tp, group_colors(2, l).tp);
  EXPECT_EQ(group_colors(0, l).dp, group_colors(2, l).dp);
  EXPECT_NE(group_colors(0, l).dp, group_colors(4, l).dp);
  EXPECT_EQ(group_colors(0, l).pp, group_colors(4, l).pp);
  EXPECT_NE(group_colors(0, l).pp, group_colors(1, l).pp);
}

TEST(ParallelValidate, NamesWhatCannotRun) {
  TrainOptions o = dense_options(Strategy::kHybrid, 2, 2, 1);
  EXPECT_EQ(validate_parallel(o, 4), "");
  EXPECT_NE(validate_parallel(o, 8).find("launch with mpiexec -n 4"), std::string::npos);
  o.parallel.pp = 4;  // 2 pairs cannot fill 4 stages
  EXPECT_NE(validate_parallel(o, 8).find("cannot fill"), std::string::npos);
  o = dense_options(Strategy::kPipeline, 1, 2, 1);
  o.parallel.stage_blocks = {3, 2};
  EXPECT_NE(validate_parallel(o, 2).find("adds up to 5"), std::string::npos);
  o.parallel.stage_blocks = {3, 1};
  EXPECT_EQ(validate_parallel(o, 2), "");
  o.strategy = Strategy::kExpert;
  o.parallel.experts = 1;
  EXPECT_NE(validate_parallel(o, 2).find("at least 2 experts"), std::string::npos);
  // Degrees that would wrap their product, stage sizes that would wrap their sum.
  o = dense_options(Strategy::kHybrid, size_t{1} << 63, 2, 1);
  EXPECT_NE(validate_parallel(o, 2).find("cannot exceed"), std::string::npos);
  o = dense_options(Strategy::kPipeline, 1, 2, 1);
  o.parallel.stage_blocks = {static_cast<size_t>(-1), 5};
  EXPECT_NE(validate_parallel(o, 2).find("the model has 4 blocks"), std::string::npos);
  // Virtual stages need a pipeline.
  o = dense_options(Strategy::kHybrid, 1, 1, 2);
  o.parallel.schedule = PipelineSchedule::kInterleaved;
  o.parallel.chunks = 2;
  EXPECT_NE(validate_parallel(o, 2).find("needs a pipeline"), std::string::npos);
}

struct DenseCase {
  const char* label;
  size_t tp, pp, dp, micro_batches;
  PipelineSchedule schedule;
  size_t width;
  bool zero1;
};

class DenseLayouts : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseLayouts, MatchSingle) {
  const DenseCase c = GetParam();
  const Strategy strategy = c.pp > 1 && c.tp == 1 && c.dp == 1   ? Strategy::kPipeline
                            : c.tp > 1 && c.pp == 1 && c.dp == 1 ? Strategy::kTensor
                                                                 : Strategy::kHybrid;
  TrainOptions o = dense_options(strategy, c.tp, c.pp, c.dp);
  o.micro_batches = c.micro_batches;
  o.parallel.schedule = c.schedule;
  o.parallel.zero1 = c.zero1;
  o.shape.width = c.width;
  const std::vector<TrainResult> results = run_grid(o);
  const EquivalenceResult eq = against_parallel_single(o, results[0]);
  EXPECT_TRUE(eq.equivalent) << eq.summary();
  std::printf("%s: %s\n", c.label, eq.summary().c_str());
  for (const auto& s : results[0].steps) EXPECT_TRUE(s.consistent) << "step " << s.step;
  EXPECT_LT(results[0].steps.back().loss, results[0].steps.front().loss);  // it learns
  for (size_t r = 0; r < results.size(); ++r) {
    const GridPosition at = grid_position(r, o.parallel);
    const StepFigures& last = results[r].steps.back();
    // Activations held: GPipe every micro-batch, 1F1B at most the stages after this one.
    const size_t want = c.schedule == PipelineSchedule::kGpipe
                            ? c.micro_batches
                            : std::min(c.pp - at.pp, c.micro_batches);
    EXPECT_EQ(last.peak_in_flight, want) << "rank " << r;
    // Pipeline bytes: an activation and a gradient per micro-batch per boundary.
    const size_t boundaries = (at.pp > 0) + (at.pp + 1 < c.pp);
    const double tensor =
        static_cast<double>(o.global_batch / c.dp / c.micro_batches * c.width * 4);
    EXPECT_DOUBLE_EQ(last.pp_bytes, static_cast<double>(boundaries * c.micro_batches) * tensor)
        << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, DenseLayouts,
    ::testing::Values(
        DenseCase{"tp2", 2, 1, 1, 1, PipelineSchedule::kOneFOneB, 16, false},
        DenseCase{"tp4 width 18 (uneven shards)", 4, 1, 1, 1, PipelineSchedule::kOneFOneB, 18,
                  false},
        DenseCase{"pp2 gpipe m4", 1, 2, 1, 4, PipelineSchedule::kGpipe, 16, false},
        DenseCase{"pp2 1f1b m8", 1, 2, 1, 8, PipelineSchedule::kOneFOneB, 16, false},
        DenseCase{"pp3 1f1b m4", 1, 3, 1, 4, PipelineSchedule::kOneFOneB, 16, false},
        DenseCase{"pp3 gpipe m1", 1, 3, 1, 1, PipelineSchedule::kGpipe, 16, false},
        DenseCase{"tp2 x dp2", 2, 1, 2, 1, PipelineSchedule::kOneFOneB, 16, false},
        DenseCase{"pp2 x dp2 m4", 1, 2, 2, 4, PipelineSchedule::kOneFOneB, 16, false},
        DenseCase{"tp2 x dp2 zero1", 2, 1, 2, 2, PipelineSchedule::kOneFOneB, 16, true},
        DenseCase{"tp2 x pp2 m4", 2, 2, 1, 4, PipelineSchedule::kOneFOneB, 16, false}),
    [](const ::testing::TestParamInfo<DenseCase>& info) {
      std::string label;
      for (const char* p = info.param.label; *p; ++p)
        label += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
      return label;
    });

// Precision, clipping, padding and odd shapes, each against single.
TEST(ParallelVariants, MatchSingle) {
  struct Case {
    const char* label;
    TrainOptions options;
  };
  std::vector<Case> cases;
  {
    TrainOptions o = dense_options(Strategy::kHybrid, 2, 2, 1);
    o.micro_batches = 4;
    o.precision = Precision::kBFloat16;
    cases.push_back({"bf16 tp2 x pp2", o});
  }
  {
    TrainOptions o = dense_options(Strategy::kPipeline, 1, 2, 1);
    o.micro_batches = 2;
    o.precision = Precision::kFloat16;
    o.loss_scaler.initial_scale_power = 30;  // overflows first: skipped steps on every stage
    cases.push_back({"fp16 pp2 (loss scaling)", o});
  }
  {
    TrainOptions o = dense_options(Strategy::kHybrid, 2, 1, 2);
    o.grad_clip = 0.05;  // the norm counts a replicated copy once
    cases.push_back({"clipped tp2 x dp2", o});
  }
  {
    TrainOptions o = dense_options(Strategy::kHybrid, 2, 1, 2);
    o.shape.width = 7;  // local sizes that do not divide over the replicas: padded shards
    o.parallel.zero1 = true;
    o.optimizer.kind = OptimizerKind::kAdam;
    o.optimizer.lr = 0.01;
    o.grad_clip = 0.05;
    cases.push_back({"tp2 x dp2 zero1, width 7, adam, clipped", o});
  }
  {
    TrainOptions o = dense_options(Strategy::kTensor, 2, 1, 1);
    o.shape.depth = 5;  // two pairs and a replicated last layer
    o.grad_clip = 0.05;
    cases.push_back({"tp2, odd depth, clipped", o});
  }
  {
    TrainOptions o = dense_options(Strategy::kExpert, 1, 1, 2);
    o.parallel.experts = 3;  // 2 on rank 0, 1 on rank 1
    o.parallel.top_k = 3;
    o.parallel.capacity_factor = 0;
    o.grad_clip = 0.05;
    cases.push_back({"ep2, 3 experts, top-3, clipped", o});
  }
  for (const Case& c : cases) {
    const std::vector<TrainResult> results = run_grid(c.options);
    const TrainResult single = train_parallel_single(c.options);
    const EquivalenceResult eq =
        compare_losses(losses(results[0]), losses(single), loss_tolerance(c.options.precision));
    EXPECT_TRUE(eq.equivalent) << c.label << ": " << eq.summary();
    std::printf("%s: %s\n", c.label, eq.summary().c_str());
    for (const auto& s : results[0].steps) EXPECT_TRUE(s.consistent) << c.label;
    if (c.options.grad_clip)
      EXPECT_NEAR(results[0].steps.back().grad_norm, single.steps.back().grad_norm,
                  1e-4 * single.steps.back().grad_norm)
          << c.label;
    if (c.options.precision == Precision::kFloat16) {
      ASSERT_TRUE(single.steps.front().skipped) << c.label;
      for (size_t i = 0; i < single.steps.size(); ++i)
        EXPECT_EQ(results[0].steps[i].skipped, single.steps[i].skipped) << c.label << " step " << i;
    }
  }
}

TEST(TensorParallel, CountsOneAllReduceEachWayPerPair) {
  // Depth 4 under tp: two pairs. Forward: one all-reduce per pair; backward:
  // one per pair but the first, whose input gradient nobody needs.
  TrainOptions o = dense_options(Strategy::kTensor, 2, 1, 1);
  o.steps = 3;
  const std::vector<TrainResult> results = run_grid(o);
  const double one = all_reduce_bytes(o.global_batch * o.shape.width, 2, 4);
  for (const TrainResult& r : results) EXPECT_DOUBLE_EQ(r.steps.back().tp_bytes, 3 * one);
}

TEST(ExpertParallel, MatchesSingleWithEveryExpert) {
  for (size_t ranks : {2u, 4u}) {
    TrainOptions o = dense_options(Strategy::kExpert, 1, 1, ranks);
    o.parallel.experts = 4;
    o.parallel.top_k = 2;
    o.parallel.capacity_factor = 0;  // nothing dropped, as in single
    o.micro_batches = 2;
    const std::vector<TrainResult> results = run_grid(o);
    const EquivalenceResult eq = against_parallel_single(o, results[0]);
    EXPECT_TRUE(eq.equivalent) << ranks << " ranks: " << eq.summary();
    std::printf("ep%zu: %s\n", ranks, eq.summary().c_str());
    const StepFigures& last = results[0].steps.back();
    EXPECT_EQ(last.dropped_tokens, 0u);
    // Every token picks 2 of 4 experts in the one mixture layer (of depth 4), per micro-batch.
    EXPECT_EQ(last.routed_tokens, o.global_batch * 2);
    EXPECT_GE(last.load_imbalance, 1.0);
    EXPECT_GT(last.ep_bytes, 0.0);
    for (const auto& s : results[0].steps) EXPECT_TRUE(s.consistent);
  }
}

TEST(ExpertParallel, CountsEveryParameter) {
  // Depth 4, width 16, 4 experts: layers 0, 2, 3 dense; layer 1 a gate and 4 experts.
  EXPECT_EQ(moe_parameter_count({16, 4, Activation::kRelu}, 4),
            3 * (16 * 16 + 16) + 4 * 16 + 4 * (16 * 16 + 16));
  TrainOptions o = dense_options(Strategy::kExpert, 1, 1, 2);
  o.parallel.experts = 4;
  o.steps = 1;
  EXPECT_EQ(run_grid(o)[0].parameters, moe_parameter_count(o.shape, 4));
}

TEST(ExpertParallel, CapacityDropsTokens) {
  TrainOptions o = dense_options(Strategy::kExpert, 1, 1, 2);
  o.parallel.experts = 4;
  o.parallel.top_k = 1;
  o.parallel.capacity_factor = 0.5;  // room for half the tokens
  o.steps = 2;
  const StepFigures last = run_grid(o)[0].steps.back();
  EXPECT_GE(last.dropped_tokens, o.global_batch / 2);
  EXPECT_EQ(last.routed_tokens, o.global_batch);
}

// Each deliberate mistake changes the losses beyond the tolerance.
TEST(ParallelFaults, EachMistakeFailsTheLossCheck) {
  struct Case {
    const char* label;
    TrainOptions options;
  };
  std::vector<Case> cases;
  {
    TrainOptions o = dense_options(Strategy::kTensor, 2, 1, 1);
    o.faults.skipped_tp_all_reduce = true;
    cases.push_back({"tensor-parallel backward all-reduce skipped", o});
  }
  {
    TrainOptions o = dense_options(Strategy::kPipeline, 1, 2, 1);
    o.micro_batches = 4;
    o.faults.dropped_micro_batch = 1;
    cases.push_back({"a micro-batch's gradient dropped", o});
  }
  {
    TrainOptions o = dense_options(Strategy::kExpert, 1, 1, 2);
    o.parallel.experts = 4;
    o.parallel.top_k = 2;
    o.parallel.capacity_factor = 0;
    o.faults.wrong_expert = true;
    cases.push_back({"tokens sent to the wrong expert", o});
  }
  for (const Case& c : cases) {
    const EquivalenceResult eq = against_parallel_single(c.options, run_grid(c.options)[0]);
    EXPECT_FALSE(eq.equivalent) << c.label << ": " << eq.summary();
    std::printf("%s: %s\n", c.label, eq.summary().c_str());
  }
}

}  // namespace
}  // namespace ccscope::training_probe
