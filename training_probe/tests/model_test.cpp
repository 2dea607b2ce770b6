// The model's arithmetic, the data and sampler, the optimizers, buckets,
// shards, the loss scaler and the accounting: pure functions, no ranks.
#include "ccscope/training_probe/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>

#include "ccscope/training_probe/accounting.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/equivalence.h"
#include "ccscope/training_probe/layout.h"
#include "ccscope/training_probe/loss_scaler.h"
#include "ccscope/training_probe/optimizer.h"
#include "ccscope/training_probe/summary.h"

namespace ccscope::training_probe {
namespace {

double loss_of(const Model& model, std::vector<float>& params, const std::vector<float>& x,
               const std::vector<float>& t, size_t batch) {
  ForwardCache cache;
  model.forward(params, x, batch, cache);
  std::vector<float> grad;
  return mse_loss(cache.output, t, batch, model.shape().width, batch, 1.0f, grad);
}

// Every parameter's gradient against a central finite difference of the loss
// (in double-ish precision: the loss is summed in double, eps 1e-2 on floats).
void check_gradients(Activation activation) {
  set_compute_threads(1);
  ModelShape shape{5, 3, activation};
  Model model(shape, Precision::kFloat32);
  std::vector<float> params = initial_parameters(shape, 7);
  const size_t batch = 4;
  const SyntheticDataset data = make_teacher_dataset(batch, shape.width, 3);
  ForwardCache cache;
  model.forward(params, data.inputs, batch, cache);
  std::vector<float> grad_out;
  mse_loss(cache.output, data.targets, batch, shape.width, batch, 1.0f, grad_out);
  std::vector<float> grads(params.size(), 0.0f);
  for (size_t l = shape.depth; l-- > 0;)
    model.backward_layer(l, params.data() + model.slices()[l].begin(), cache, grad_out,
                         grads.data() + model.slices()[l].begin());
  for (size_t i = 0; i < params.size(); ++i) {
    const float keep = params[i];
    const float eps = 1e-2f;
    params[i] = keep + eps;
    const double up = loss_of(model, params, data.inputs, data.targets, batch);
    params[i] = keep - eps;
    const double down = loss_of(model, params, data.inputs, data.targets, batch);
    params[i] = keep;
    const double numeric = (up - down) / (2.0 * eps);
    EXPECT_NEAR(grads[i], numeric, 2e-3 + 2e-2 * std::abs(numeric)) << "parameter " << i;
  }
}

TEST(Model, TanhGradientsMatchFiniteDifferences) { check_gradients(Activation::kTanh); }
TEST(Model, ReluGradientsMatchFiniteDifferences) { check_gradients(Activation::kRelu); }

TEST(Model, LayoutIsNnLinearOrder) {
  ModelShape shape{4, 2, Activation::kRelu};
  const auto slices = layer_slices(shape);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(slices[0].weight_offset, 0u);
  EXPECT_EQ(slices[0].bias_offset, 16u);
  EXPECT_EQ(slices[1].weight_offset, 20u);
  EXPECT_EQ(slices[1].end(), 40u);
  EXPECT_EQ(parameter_count(shape), 40u);
}

TEST(Model, LinearForwardIsXWTransposedPlusBias) {
  // x = [1 2], W = [[1 0] [0 1] [1 1]] (out 3 x in 2), b = [0 1 2].
  const std::vector<float> x = {1, 2};
  const float w[] = {1, 0, 0, 1, 1, 1};
  const float b[] = {0, 1, 2};
  float y[3];
  linear_forward(x, 1, 2, 3, w, b, y);
  EXPECT_FLOAT_EQ(y[0], 1);
  EXPECT_FLOAT_EQ(y[1], 3);
  EXPECT_FLOAT_EQ(y[2], 5);
}

TEST(Model, SixteenBitRounding) {
  EXPECT_EQ(round_to(Precision::kBFloat16, 1.0f + 1.0f / 512), 1.0f);  // below bf16's step
  EXPECT_NE(round_to(Precision::kFloat16, 1.0f + 1.0f / 512), 1.0f);   // fp16 keeps it
  EXPECT_TRUE(std::isinf(round_to(Precision::kFloat16, 70000.0f)));    // fp16 overflows
  EXPECT_EQ(round_to(Precision::kFloat32, 1.0f + 1.0f / 512), 1.0f + 1.0f / 512);
}

TEST(Sampler, ShardsPartitionTheGlobalBatchForEveryRankCount) {
  const size_t samples = 96, global = 24;
  for (size_t step : {0u, 3u, 4u, 9u}) {
    // The global batch of a step is the same set for 1, 2, 3, 4 ranks.
    std::multiset<size_t> reference;
    for (size_t i : batch_samples(samples, 1, 0, global, 5, step)) reference.insert(i);
    for (size_t ranks : {2u, 3u, 4u}) {
      std::multiset<size_t> union_of_ranks;
      for (size_t r = 0; r < ranks; ++r)
        for (size_t i : batch_samples(samples, ranks, r, global / ranks, 5, step))
          union_of_ranks.insert(i);
      EXPECT_EQ(union_of_ranks, reference) << "step " << step << ", " << ranks << " ranks";
    }
  }
}

TEST(Sampler, ReshufflesPerEpochFromSeedPlusEpoch) {
  const auto epoch0 = epoch_permutation(64, 11, 0);
  const auto epoch1 = epoch_permutation(64, 11, 1);
  EXPECT_NE(epoch0, epoch1);
  EXPECT_EQ(epoch1, epoch_permutation(64, 12, 0));  // seed + epoch, as set_epoch
  std::vector<size_t> sorted = epoch0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<size_t> identity(64);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);
  // Without set_epoch every epoch repeats epoch 0 (steps_per_epoch = 64 / 16 = 4).
  EXPECT_EQ(batch_samples(64, 1, 0, 16, 11, 4, false), batch_samples(64, 1, 0, 16, 11, 0, false));
  EXPECT_NE(batch_samples(64, 1, 0, 16, 11, 4, true), batch_samples(64, 1, 0, 16, 11, 0, true));
}

TEST(Sampler, PadsByRepeatingTheHeadAndStridesByRank) {
  // 10 samples over 4 replicas: padded to 12; rank r takes r, r+4, r+8.
  const auto order = epoch_permutation(10, 3, 0);
  const auto rank1 = sampler_indices(10, 4, 1, 3, 0);
  ASSERT_EQ(rank1.size(), 3u);
  EXPECT_EQ(rank1[0], order[1]);
  EXPECT_EQ(rank1[1], order[5]);
  EXPECT_EQ(rank1[2], order[9]);
  const auto rank3 = sampler_indices(10, 4, 3, 3, 0);
  EXPECT_EQ(rank3[2], order[1]);  // position 11 wraps to the head's position 1
}

TEST(Buckets, ReverseOrderWithASmallFirstBucket) {
  ModelShape shape{256, 4, Activation::kRelu};  // W 256 KiB, b 1 KiB in float32
  const auto slices = layer_slices(shape);
  // First cap 300 KiB: b3, W3, b2 (258 KiB) stay below it, W2 crosses it.
  const auto buckets = assign_buckets(slices, 4, 600u << 10, 300u << 10);
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].range.end, slices[3].end());
  EXPECT_EQ(buckets[0].range.begin, slices[2].weight_offset);
  EXPECT_EQ(buckets[0].first_layer, 2u);
  // Then b1, W1, b0, W0 (514 KiB) stay below 600 KiB: the rest is one bucket.
  EXPECT_EQ(buckets[1].range.begin, 0u);
  EXPECT_EQ(buckets[1].range.end, slices[2].weight_offset);
  EXPECT_EQ(buckets[1].first_layer, 0u);
  // Buckets tile the vector without gaps.
  size_t covered = 0;
  for (const auto& b : buckets) covered += b.range.size();
  EXPECT_EQ(covered, parameter_count(shape));
}

TEST(Buckets, OneBucketPerTensorWhenTheCapIsTiny) {
  ModelShape shape{8, 3, Activation::kRelu};
  const auto buckets = assign_buckets(layer_slices(shape), 4, 1, 1);
  EXPECT_EQ(buckets.size(), 6u);
  EXPECT_EQ(buckets.front().range.size(), 8u);  // b2
  EXPECT_EQ(buckets[1].range.size(), 64u);      // W2
  EXPECT_EQ(buckets.back().first_layer, 0u);
}

TEST(Shards, UnevenSizesArePaddedAndEveryElementHasOneOwner) {
  for (size_t size : {1u, 7u, 10u, 12u, 13u}) {
    for (size_t ranks : {1u, 2u, 3u, 4u, 5u}) {
      const Shard s = shard_range({100, 100 + size}, ranks);
      EXPECT_EQ(s.chunk, (size + ranks - 1) / ranks);
      EXPECT_GE(s.padded_size(ranks), size);
      EXPECT_LT(s.padded_size(ranks) - size, ranks);
      size_t owned = 0;
      size_t expect_begin = 100;
      for (size_t r = 0; r < ranks; ++r) {
        const Range mine = s.owned(r);
        EXPECT_LE(mine.size(), s.chunk);
        if (mine.size() > 0) EXPECT_EQ(mine.begin, expect_begin);
        expect_begin = mine.end;
        owned += mine.size();
      }
      EXPECT_EQ(owned, size) << size << " over " << ranks;
    }
  }
  // 10 over 4: chunks of 3; the last rank holds one real element.
  EXPECT_EQ(shard_range({0, 10}, 4).owned(3), (Range{9, 10}));
  EXPECT_EQ(shard_range({0, 2}, 4).owned(3).size(), 0u);
}

TEST(Optimizer, SgdMomentumAsTorch) {
  // torch: p=1, g=0.5 twice, lr 0.1, momentum 0.9: buf 0.5 -> p 0.95; buf 0.95 -> p 0.855.
  Optimizer sgd({OptimizerKind::kSgd, 0.1, 0.9}, 1);
  std::vector<float> p = {1.0f};
  const std::vector<float> g = {0.5f};
  sgd.step(p, g, 1);
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  sgd.step(p, g, 2);
  EXPECT_FLOAT_EQ(p[0], 0.855f);
  EXPECT_EQ(sgd.state_bytes(), 4u);
  // Without momentum SGD holds no state, and the accounting says so.
  OptimizerOptions plain{OptimizerKind::kSgd, 0.1, 0.0};
  EXPECT_EQ(Optimizer(plain, 10).state_bytes(), 0u);
  EXPECT_EQ(state_words_per_parameter(plain), 0u);
  EXPECT_DOUBLE_EQ(expected_memory(Strategy::kDdp, 1000, 2, Precision::kFloat32,
                                   state_words_per_parameter(plain))
                       .optimizer,
                   0);
}

TEST(Optimizer, AdamFirstStepMovesByLr) {
  // Adam's first step is lr * g / (|g| + eps') = lr * sign(g) with bias correction.
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  o.lr = 0.01;
  Optimizer adam(o, 2);
  std::vector<float> p = {1.0f, 1.0f};
  const std::vector<float> g = {3.0f, -0.2f};
  adam.step(p, g, 1);
  EXPECT_NEAR(p[0], 0.99f, 1e-6);
  EXPECT_NEAR(p[1], 1.01f, 1e-6);
  EXPECT_EQ(adam.state_bytes(), 16u);
  // v after one step is (1 - beta2) g^2 with 1 - beta2 taken in double, as
  // torch does: float(0.001) * 9, not (1 - 0.999f) * 9 = 0.00099998713 * 9.
  Optimizer probe(o, 1);
  std::vector<float> p1 = {0.0f};
  const std::vector<float> g1 = {3.0f};
  probe.step(p1, g1, 1);
  EXPECT_EQ(probe.second_moment()[0], static_cast<float>(1.0 - 0.999) * 3.0f * 3.0f);
  // AdamW decays the weight itself: p (1 - lr wd) first.
  o.kind = OptimizerKind::kAdamW;
  o.weight_decay = 0.5;
  Optimizer adamw(o, 1);
  std::vector<float> q = {1.0f};
  const std::vector<float> h = {1.0f};
  adamw.step(q, h, 1);
  EXPECT_NEAR(q[0], 1.0f * (1 - 0.005f) - 0.01f, 1e-6);
}

TEST(LossScaler, SkipsHalvesAfterHysteresisAndGrowsAfterAWindow) {
  LossScaler s({4, 3, 2, 1.0});  // 2^4, window 3, hysteresis 2
  EXPECT_EQ(s.scale(), 16.0);
  EXPECT_TRUE(s.update(true));  // first overflow: skipped, hysteresis absorbs it
  EXPECT_EQ(s.scale(), 16.0);
  EXPECT_TRUE(s.update(true));  // second: halved
  EXPECT_EQ(s.scale(), 8.0);
  EXPECT_FALSE(s.update(false));
  EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 8.0);
  EXPECT_FALSE(s.update(false));  // three clean steps: doubled
  EXPECT_EQ(s.scale(), 16.0);
  LossScaler floor({0, 1000, 1, 1.0});  // at the minimum it stays there
  EXPECT_TRUE(floor.update(true));
  EXPECT_EQ(floor.scale(), 1.0);
}

TEST(Accounting, BytesMovedFollowTheZeroPaper) {
  // Psi = 1000 float32 over 4 ranks: one ring pass moves 3/4 * 4000 bytes.
  EXPECT_DOUBLE_EQ(expected_bytes_per_step(Strategy::kDdp, 1000, 4, 4), 6000);
  EXPECT_DOUBLE_EQ(expected_bytes_per_step(Strategy::kZero1, 1000, 4, 4), 6000);
  EXPECT_DOUBLE_EQ(expected_bytes_per_step(Strategy::kZero2, 1000, 4, 4), 6000);
  EXPECT_DOUBLE_EQ(expected_bytes_per_step(Strategy::kZero3, 1000, 4, 4), 9000);
  EXPECT_DOUBLE_EQ(expected_bytes_per_step(Strategy::kDdp, 1000, 1, 4), 0);
  // Gradient accumulation over 4 micro-batches: no_sync keeps DDP and ZeRO-1 at
  // 2; ZeRO-2 reduce-scatters each micro-batch; ZeRO-3 gathers twice per one.
  EXPECT_DOUBLE_EQ(expected_bytes_per_step(Strategy::kDdp, 1000, 4, 4, 4), 6000);
  EXPECT_DOUBLE_EQ(expected_bytes_per_step(Strategy::kZero1, 1000, 4, 4, 4), 6000);
  EXPECT_DOUBLE_EQ(expected_bytes_per_step(Strategy::kZero2, 1000, 4, 4, 4), 15000);
  EXPECT_DOUBLE_EQ(expected_bytes_per_step(Strategy::kZero3, 1000, 4, 4, 4), 36000);
  EXPECT_DOUBLE_EQ(all_reduce_bytes(1000, 4, 4), 6000);
  EXPECT_DOUBLE_EQ(all_gather_bytes(1000, 4, 4), 3000);
}

TEST(Accounting, MemoryFollowsTheZeroPaper) {
  // Mixed-precision Adam, Psi = 1000, N = 4: 2+2+12 = 16 Psi unsharded.
  const auto ddp = expected_memory(Strategy::kDdp, 1000, 4, Precision::kBFloat16, 2);
  EXPECT_DOUBLE_EQ(ddp.total(), 16000);
  const auto z1 = expected_memory(Strategy::kZero1, 1000, 4, Precision::kBFloat16, 2);
  EXPECT_DOUBLE_EQ(z1.total(), 2000 + 2000 + 3000);
  const auto z2 = expected_memory(Strategy::kZero2, 1000, 4, Precision::kBFloat16, 2);
  EXPECT_DOUBLE_EQ(z2.total(), 2000 + 500 + 3000);
  const auto z3 = expected_memory(Strategy::kZero3, 1000, 4, Precision::kBFloat16, 2);
  EXPECT_DOUBLE_EQ(z3.total(), 4000);
  // float32 SGD with momentum: 4 + 4 + 4 Psi.
  const auto sgd = expected_memory(Strategy::kDdp, 1000, 2, Precision::kFloat32, 1);
  EXPECT_DOUBLE_EQ(sgd.total(), 12000);
}

TEST(Equivalence, PassesWithinToleranceAndNamesTheWorstStep) {
  const std::vector<double> reference = {1.0, 0.5, 0.25};
  const std::vector<double> close = {1.0, 0.50001, 0.25};
  const auto ok = compare_losses(close, reference, 1e-4);
  EXPECT_TRUE(ok.equivalent);
  EXPECT_EQ(ok.worst_step, 1u);
  EXPECT_NEAR(ok.max_relative_difference, 2e-5, 1e-9);
  const std::vector<double> far = {1.0, 0.5, 0.3};
  const auto bad = compare_losses(far, reference, 1e-4);
  EXPECT_FALSE(bad.equivalent);
  EXPECT_EQ(bad.worst_step, 2u);
  const std::vector<double> nan = {1.0, NAN, 0.25};
  EXPECT_FALSE(compare_losses(nan, reference, 1e-4).equivalent);
  EXPECT_FALSE(compare_losses({}, reference, 1e-4).equivalent);
}

// A 16-bit run's losses are compared while 4 x the spread of two correctly
// reordered single-rank runs stays within the tolerance.
TEST(Equivalence, RoundingHorizonEndsWhereTheReorderedSpreadReachesAQuarter) {
  const std::vector<double> reference = {1.0, 1.0, 1.0, 1.0, 1.0};
  // Spreads 0, 1e-3, 2e-3, 3e-3 (4 x 3e-3 > 1e-2: the horizon is 3 steps), 0.
  const std::vector<double> reordered = {1.0, 1.001, 0.998, 1.003, 1.0};
  EXPECT_EQ(rounding_horizon(reference, reordered, 1e-2), 3u);
  // Within a quarter throughout: every step; with a factor of 1, the tolerance itself.
  EXPECT_EQ(rounding_horizon(reference, std::vector<double>{1.0, 1.002, 1.0, 1.0, 1.0}, 1e-2), 5u);
  EXPECT_EQ(rounding_horizon(reference, reordered, 1e-2, 1.0), 5u);
  // At least the first step; a NaN ends it.
  EXPECT_EQ(rounding_horizon(reference, std::vector<double>{1.5, 1.0, 1.0}, 1e-2), 1u);
  EXPECT_EQ(rounding_horizon(reference, std::vector<double>{1.0, 1.0, NAN, 1.0}, 1e-2), 2u);
  // The reordered reference: 4 m micro-batches, else 2 m, where the batch divides.
  EXPECT_EQ(reordered_micro_batches(32, 1), 4u);
  EXPECT_EQ(reordered_micro_batches(32, 2), 8u);
  EXPECT_EQ(reordered_micro_batches(20, 2), 4u);
  EXPECT_EQ(reordered_micro_batches(12, 4), std::nullopt);
  EXPECT_EQ(reordered_micro_batches(6, 3), 6u);
}

}  // namespace
}  // namespace ccscope::training_probe

namespace ccscope::training_probe {
namespace {

TEST(Summary, MediansAfterWarmupAndShares) {
  std::vector<StepFigures> steps(8);
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i].step = i;
    steps[i].step_seconds = i < 3 ? 10.0 : 0.1 + 0.01 * static_cast<double>(i);  // warm-up slow
    steps[i].comm_seconds = 0.05;
    steps[i].exposed_comm_seconds = 0.02;
    steps[i].compute_seconds = steps[i].step_seconds - 0.02;
    steps[i].bytes_sent = 1000;
  }
  const RunSummary s = summarize(steps, 3, 64);
  EXPECT_EQ(s.measured_steps, 5u);
  EXPECT_DOUBLE_EQ(s.step_median_s, 0.15);  // steps 3..7: 0.13 0.14 0.15 0.16 0.17
  EXPECT_NEAR(s.step_p90_s, 0.166, 1e-12);
  EXPECT_DOUBLE_EQ(s.comm_share, 0.05 / 0.15);
  EXPECT_DOUBLE_EQ(s.exposed_comm_share, 0.02 / 0.15);
  EXPECT_DOUBLE_EQ(s.samples_per_s, 64 / 0.15);
  EXPECT_DOUBLE_EQ(s.bytes_per_step, 1000);
  // Fewer steps than the warm-up: all of them count.
  EXPECT_EQ(summarize(std::span(steps).first(2), 3, 64).measured_steps, 2u);
}

TEST(Summary, StepRecordsSummarizeAsTheirFigures) {
  std::vector<StepFigures> steps(6);
  std::vector<records::TrainStepRecord> rows(6);
  for (size_t i = 0; i < steps.size(); ++i) {
    const double x = static_cast<double>(i);
    steps[i].step_seconds = rows[i].step_s = 0.3 - 0.01 * x;
    steps[i].compute_seconds = rows[i].compute_s = 0.1 + 0.02 * x;
    steps[i].comm_seconds = rows[i].comm_s = 0.05 * x;
    steps[i].exposed_comm_seconds = rows[i].exposed_comm_s = 0.01 * x * x;
    steps[i].bytes_sent = rows[i].bytes_sent = 1000 + x;
  }
  const RunSummary a = summarize(steps, 2, 32);
  const RunSummary b = summarize(std::span<const records::TrainStepRecord>(rows), 2, 32);
  EXPECT_EQ(b.measured_steps, a.measured_steps);
  EXPECT_EQ(b.step_median_s, a.step_median_s);
  EXPECT_EQ(b.step_p90_s, a.step_p90_s);
  EXPECT_EQ(b.compute_median_s, a.compute_median_s);
  EXPECT_EQ(b.comm_median_s, a.comm_median_s);
  EXPECT_EQ(b.exposed_comm_median_s, a.exposed_comm_median_s);
  EXPECT_EQ(b.bytes_per_step, a.bytes_per_step);
  EXPECT_EQ(b.samples_per_s, a.samples_per_s);
}

TEST(Summary, StrongAndWeakScaling) {
  // Strong: 4 ranks, 100 ms at one rank, 40 ms at four: speed-up 2.5, efficiency 62.5%.
  const Scaling strong = scaling(0.100, 0.040, 4, false);
  EXPECT_DOUBLE_EQ(strong.speedup, 2.5);
  EXPECT_DOUBLE_EQ(strong.efficiency, 0.625);
  // Weak: the same per-rank batch; 100 ms at one rank, 125 ms at four: 80%, 3.2x the samples/s.
  const Scaling weak = scaling(0.100, 0.125, 4, true);
  EXPECT_DOUBLE_EQ(weak.efficiency, 0.8);
  EXPECT_DOUBLE_EQ(weak.speedup, 3.2);
  EXPECT_EQ(scaling(0.1, 0.0, 4, false).speedup, 0);
}

}  // namespace
}  // namespace ccscope::training_probe
