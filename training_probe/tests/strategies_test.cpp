// Every strategy against the single-rank reference, over ccscope's ring
// algorithms on the in-process transport (ranks as threads): the loss curves
// agree within the tolerance, parameters agree across ranks, bytes and memory
// follow the formulas, and each deliberately broken variant fails the check.
#include <gtest/gtest.h>

#include <cstdio>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/in_process_transport.h"
#include "ccscope/training_probe/equivalence.h"
#include "ccscope/training_probe/trainer.h"

namespace ccscope::training_probe {
namespace {

TrainOptions small_options(Strategy strategy) {
  TrainOptions o;
  o.strategy = strategy;
  o.shape = {24, 3, Activation::kRelu};
  o.global_batch = 24;  // divides over 1, 2, 3, 4 ranks
  o.steps = 40;         // 5 epochs of 8 steps: the sampler's reshuffle matters
  o.optimizer.lr = 0.05;
  o.optimizer.momentum = 0.9;
  o.bucket_bytes = 1200;  // several buckets, boundaries inside layers
  o.first_bucket_bytes = 400;
  o.check_consistency = true;
  o.timeout = std::chrono::seconds(20);
  return o;
}

// Runs `options` on `ranks` in-process ranks; returns rank 0's result and
// checks every rank saw the same losses.
TrainResult run_ranks(const TrainOptions& options, int ranks) {
  std::vector<TrainResult> results(static_cast<size_t>(ranks));
  InProcessTransport::run(ranks, [&](PointToPoint& p2p) {
    auto comm = make_ring_communicator(p2p);
    results[static_cast<size_t>(p2p.rank())] = train(*comm, options);
  });
  for (int r = 1; r < ranks; ++r)
    EXPECT_EQ(losses(results[static_cast<size_t>(r)]), losses(results[0])) << "rank " << r;
  return results[0];
}

EquivalenceResult against_single(const TrainOptions& options, const TrainResult& result) {
  const TrainResult reference = train_single(options);
  return compare_losses(losses(result), losses(reference), loss_tolerance(options.precision));
}

class EveryStrategy : public ::testing::TestWithParam<std::tuple<Strategy, int>> {};

TEST_P(EveryStrategy, MatchesSingleAndAgreesAcrossRanks) {
  const auto [strategy, ranks] = GetParam();
  TrainOptions o = small_options(strategy);
  const TrainResult result = run_ranks(o, ranks);
  const EquivalenceResult eq = against_single(o, result);
  EXPECT_TRUE(eq.equivalent) << eq.summary();
  std::printf("%s n%d: %s\n", std::string(name(strategy)).c_str(), ranks, eq.summary().c_str());
  for (const auto& s : result.steps) EXPECT_TRUE(s.consistent) << "step " << s.step;
  // The loss falls: the model learns the teacher.
  EXPECT_LT(result.steps.back().loss, 0.8 * result.steps.front().loss);
  // Bytes moved: the strategy's operations against the formula on the padded size.
  const double expected = expected_bytes_per_step(strategy, result.communicated_elements,
                                                  static_cast<size_t>(ranks), 4);
  const double scalars = 8.0 * 2 * ranks;  // the clip norm / overflow all-reduces, at most
  EXPECT_GE(result.steps.back().bytes_sent, expected);
  EXPECT_LE(result.steps.back().bytes_sent, expected + scalars);
  // Memory against the ZeRO paper's accounting (padding adds under N elements per unit).
  const MemoryFootprint want =
      expected_memory(strategy, result.parameters, static_cast<size_t>(ranks), o.precision,
                      state_words_per_parameter(o.optimizer));
  EXPECT_NEAR(result.memory.parameters, want.parameters, 0.02 * want.parameters + 64);
  EXPECT_NEAR(result.memory.gradients, want.gradients, 0.02 * want.gradients + 64);
  EXPECT_NEAR(result.memory.optimizer, want.optimizer, 0.02 * want.optimizer + 64);
}

INSTANTIATE_TEST_SUITE_P(Ranks, EveryStrategy,
                         ::testing::Combine(::testing::Values(Strategy::kDdp, Strategy::kZero1,
                                                              Strategy::kZero2, Strategy::kZero3),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           return std::string(name(std::get<0>(info.param))) + "_n" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(Strategies, AccumulationClippingAndAdamStillMatchSingle) {
  for (Strategy s : {Strategy::kDdp, Strategy::kZero1, Strategy::kZero2, Strategy::kZero3}) {
    TrainOptions o = small_options(s);
    o.micro_batches = 2;
    o.grad_clip = 0.05;  // active on every step
    o.optimizer.kind = OptimizerKind::kAdamW;
    o.optimizer.lr = 0.003;
    o.optimizer.weight_decay = 0.01;
    const TrainResult r = run_ranks(o, 3);
    const auto eq = against_single(o, r);
    EXPECT_TRUE(eq.equivalent) << name(s) << ": " << eq.summary();
    EXPECT_GT(r.steps.front().grad_norm, 0.05) << "clipping must be active for the test";
    const double bytes = expected_bytes_per_step(s, r.communicated_elements, 3, 4, 2);
    EXPECT_GE(r.steps.back().bytes_sent, bytes) << name(s);
    EXPECT_LE(r.steps.back().bytes_sent, bytes + 8.0 * 2 * 3) << name(s);
  }
}

TEST(Strategies, WithoutOverlapAndPrefetchTheResultIsTheSame) {
  for (Strategy s : {Strategy::kDdp, Strategy::kZero3}) {
    TrainOptions o = small_options(s);
    const TrainResult overlapped = run_ranks(o, 2);
    o.overlap = false;
    o.prefetch = false;
    const TrainResult serial = run_ranks(o, 2);
    EXPECT_EQ(losses(serial), losses(overlapped)) << name(s);
  }
}

TEST(Strategies, Bfloat16AndFloat16MatchTheirOwnSingle) {
  for (Precision p : {Precision::kBFloat16, Precision::kFloat16}) {
    for (Strategy s : {Strategy::kDdp, Strategy::kZero3}) {
      TrainOptions o = small_options(s);
      o.precision = p;
      o.loss_scaler.initial_scale_power = 8;
      const TrainResult r = run_ranks(o, 2);
      const auto eq = against_single(o, r);
      EXPECT_TRUE(eq.equivalent) << name(p) << " " << name(s) << ": " << eq.summary();
      std::printf("%s %s n2: %s\n", std::string(name(p)).c_str(), std::string(name(s)).c_str(),
                  eq.summary().c_str());
      // 16-bit: every communicated element is 2 bytes.
      EXPECT_DOUBLE_EQ(r.steps.back().bytes_sent,
                       expected_bytes_per_step(s, r.communicated_elements, 2, 2) +
                           (p == Precision::kFloat16 ? 8.0 : 0.0));
    }
  }
}

TEST(Strategies, Float16OverflowSkipsTheStepOnEveryRank) {
  TrainOptions o = small_options(Strategy::kDdp);
  o.precision = Precision::kFloat16;
  o.loss_scaler.initial_scale_power = 30;  // 2^30: the scaled gradients overflow fp16
  o.loss_scaler.hysteresis = 1;
  o.steps = 12;
  const TrainResult r = run_ranks(o, 2);
  ASSERT_TRUE(r.steps.front().skipped);
  EXPECT_EQ(r.steps[1].loss_scale, r.steps[0].loss_scale / 2);
  EXPECT_FALSE(r.steps.back().skipped);  // the scale came down far enough
  // A skipped step leaves the parameters as they were.
  o.steps = 1;
  const TrainResult one = run_ranks(o, 2);
  ASSERT_TRUE(one.steps.front().skipped);
  std::vector<float> initial = initial_parameters(o.shape, o.seed);
  round_to(Precision::kFloat16, initial);
  EXPECT_EQ(one.final_parameters, initial);
}

// Each broken variant must fail the equivalence check: the check can fail.
TEST(BrokenVariants, EachFailsTheCheck) {
  struct Case {
    const char* what;
    Strategy strategy;
    Faults faults;
    bool clip;
  };
  Faults summed, unseeded, unreduced, per_shard;
  summed.sum_not_average = true;
  unseeded.sampler_not_reseeded = true;
  unreduced.unreduced_bucket = 1;
  per_shard.clip_per_shard = true;
  const Case cases[] = {
      {"gradients summed, not averaged", Strategy::kDdp, summed, false},
      {"sampler not reseeded", Strategy::kDdp, unseeded, false},
      {"one bucket never reduced", Strategy::kDdp, unreduced, false},
      {"one bucket never reduced (ZeRO-2)", Strategy::kZero2, unreduced, false},
      {"clipping norm per shard", Strategy::kZero2, per_shard, true},
      {"clipping norm per shard (ZeRO-3)", Strategy::kZero3, per_shard, true},
  };
  for (const Case& c : cases) {
    TrainOptions o = small_options(c.strategy);
    o.faults = c.faults;
    if (c.clip) o.grad_clip = 0.05;
    const TrainResult r = run_ranks(o, 2);
    const auto eq = against_single(o, r);
    EXPECT_FALSE(eq.equivalent) << c.what << ": " << eq.summary();
    std::printf("broken, %s: %s\n", c.what, eq.summary().c_str());
  }
}

TEST(Strategies, TheDefaultGlobalBatchRoundsUpToWhatTheRanksDivide) {
  EXPECT_EQ(default_global_batch(128, 1), 128u);
  EXPECT_EQ(default_global_batch(128, 2), 128u);
  EXPECT_EQ(default_global_batch(128, 3), 129u);
  EXPECT_EQ(default_global_batch(128, 6), 132u);
  EXPECT_EQ(default_global_batch(128, 200), 200u);  // one sample per rank
  for (size_t ranks = 1; ranks <= 64; ++ranks) {
    const size_t batch = default_global_batch(128, ranks);
    EXPECT_EQ(batch % ranks, 0u) << ranks;
    EXPECT_LT(batch, 128 + ranks) << ranks;
  }
  EXPECT_THROW(default_global_batch(128, 0), UsageError);
}

TEST(Strategies, OptionsThatCannotRunSayWhy) {
  TrainOptions o = small_options(Strategy::kDdp);
  o.global_batch = 25;
  EXPECT_NE(validate(o, 2).find("does not divide over 2 ranks"), std::string::npos);
  o.global_batch = 24;
  o.micro_batches = 5;
  EXPECT_NE(validate(o, 2).find("micro-batches"), std::string::npos);
  o.micro_batches = 1;
  EXPECT_EQ(validate(o, 2), "");
  o.strategy = Strategy::kSingle;
  EXPECT_NE(validate(o, 2).find("one rank"), std::string::npos);
}

}  // namespace
}  // namespace ccscope::training_probe
