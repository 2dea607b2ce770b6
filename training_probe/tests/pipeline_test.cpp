// Pipeline parallelism as pure functions: stage balancing, the pass orders of
// GPipe, 1F1B and interleaved 1F1B, the plans' batches, and the simulator
// that runs every stage's plan together.
#include "ccscope/training_probe/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <stdexcept>
#include <utility>

namespace ccscope::training_probe {
namespace {

using Kind = PipelinePass::Kind;
using TKind = PipelineTransfer::Kind;

PipelinePass F(size_t micro_batch, size_t chunk = 0) {
  return {Kind::kForward, micro_batch, chunk};
}
PipelinePass B(size_t micro_batch, size_t chunk = 0) {
  return {Kind::kBackward, micro_batch, chunk};
}
PipelineTransfer act(size_t micro_batch, size_t chunk, size_t peer) {
  return {TKind::kActivation, micro_batch, chunk, peer};
}
PipelineTransfer grad(size_t micro_batch, size_t chunk, size_t peer) {
  return {TKind::kGradient, micro_batch, chunk, peer};
}

std::string show(const std::vector<PipelinePass>& passes) {
  std::string out;
  for (const PipelinePass& p : passes) {
    out += (p.kind == Kind::kForward ? " F" : " B") + std::to_string(p.micro_batch) + "." +
           std::to_string(p.chunk);
  }
  return out;
}

// ---- balance_stages --------------------------------------------------------

// Every way to cut, in lexicographic order of the cuts; the first with the
// smallest largest piece.
std::vector<Range> brute_force_balance(const std::vector<size_t>& w, size_t pieces) {
  const size_t n = w.size();
  std::vector<size_t> cuts(pieces - 1);
  for (size_t i = 0; i + 1 < pieces; ++i) cuts[i] = i + 1;
  std::vector<Range> best;
  size_t best_max = static_cast<size_t>(-1);
  for (;;) {
    std::vector<Range> ranges;
    size_t begin = 0;
    for (size_t c : cuts) {
      ranges.push_back({begin, c});
      begin = c;
    }
    ranges.push_back({begin, n});
    size_t largest = 0;
    for (const Range& r : ranges) {
      size_t sum = 0;
      for (size_t i = r.begin; i < r.end; ++i) sum += w[i];
      largest = std::max(largest, sum);
    }
    if (largest < best_max) {
      best_max = largest;
      best = ranges;
    }
    // Next cut vector in lexicographic order (cuts strictly increasing, < n).
    size_t i = cuts.size();
    while (i > 0 && cuts[i - 1] == n - (cuts.size() - i) - 1) --i;
    if (i == 0) break;
    ++cuts[i - 1];
    for (size_t j = i; j < cuts.size(); ++j) cuts[j] = cuts[j - 1] + 1;
  }
  return best;
}

TEST(BalanceStages, UnevenWeights) {
  const std::vector<size_t> w{1, 2, 3, 4, 5, 6, 7, 8, 9};
  // Optimum 17: 1..5 = 15, 6 + 7 = 13, 8 + 9 = 17.
  EXPECT_EQ(balance_stages(w, 3), (std::vector<Range>{{0, 5}, {5, 7}, {7, 9}}));
  const std::vector<size_t> heavy_first{5, 1, 1, 1, 1, 1};
  EXPECT_EQ(balance_stages(heavy_first, 2), (std::vector<Range>{{0, 1}, {1, 6}}));
  const std::vector<size_t> heavy_last{1, 1, 1, 1, 1, 9};
  EXPECT_EQ(balance_stages(heavy_last, 3), (std::vector<Range>{{0, 1}, {1, 5}, {5, 6}}));
}

TEST(BalanceStages, SizesThatDoNotDivideTieToTheEarliestCut) {
  const std::vector<size_t> seven(7, 4);
  EXPECT_EQ(balance_stages(seven, 3), (std::vector<Range>{{0, 1}, {1, 4}, {4, 7}}));
  const std::vector<size_t> three(3, 1);
  EXPECT_EQ(balance_stages(three, 2), (std::vector<Range>{{0, 1}, {1, 3}}));
  const std::vector<size_t> five{2, 2, 2, 2, 2};
  EXPECT_EQ(balance_stages(five, 5), (std::vector<Range>{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}));
  EXPECT_EQ(balance_stages(five, 1), (std::vector<Range>{{0, 5}}));
  const std::vector<size_t> zeros{0, 0, 3, 0};
  EXPECT_EQ(balance_stages(zeros, 2), (std::vector<Range>{{0, 1}, {1, 4}}));
}

TEST(BalanceStages, MatchesBruteForce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + rng() % 8;
    std::vector<size_t> w(n);
    for (size_t& x : w) x = rng() % 7;  // zeros too
    const size_t pieces = 1 + rng() % n;
    ASSERT_EQ(balance_stages(w, pieces), brute_force_balance(w, pieces))
        << "trial " << trial << " n " << n << " pieces " << pieces;
  }
}

TEST(BalanceStages, RefusesImpossiblePieces) {
  const std::vector<size_t> w{1, 2, 3};
  EXPECT_THROW(balance_stages(w, 0), std::invalid_argument);
  EXPECT_THROW(balance_stages(w, 4), std::invalid_argument);
  EXPECT_THROW(balance_stages(std::span<const size_t>{}, 1), std::invalid_argument);
}

// ---- names and validation --------------------------------------------------

TEST(PipelineSchedule, NamesRoundTrip) {
  for (PipelineSchedule s :
       {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB, PipelineSchedule::kInterleaved}) {
    EXPECT_EQ(parse_pipeline_schedule(name(s)), s);
  }
  EXPECT_EQ(name(PipelineSchedule::kOneFOneB), "1f1b");
  EXPECT_FALSE(parse_pipeline_schedule("pipedream").has_value());
}

TEST(PipelineSchedule, Validation) {
  EXPECT_EQ(validate_pipeline(PipelineSchedule::kOneFOneB, 4, 8, 1), "");
  EXPECT_EQ(validate_pipeline(PipelineSchedule::kInterleaved, 4, 8, 2), "");
  EXPECT_NE(validate_pipeline(PipelineSchedule::kGpipe, 0, 8, 1), "");
  EXPECT_NE(validate_pipeline(PipelineSchedule::kGpipe, 2, 0, 1), "");
  EXPECT_NE(validate_pipeline(PipelineSchedule::kGpipe, 2, 4, 0), "");
  EXPECT_NE(validate_pipeline(PipelineSchedule::kOneFOneB, 2, 4, 2), "");
  EXPECT_NE(validate_pipeline(PipelineSchedule::kInterleaved, 4, 6, 2), "");
  EXPECT_THROW(pipeline_passes(PipelineSchedule::kInterleaved, 4, 0, 6, 2), std::invalid_argument);
  EXPECT_THROW(pipeline_passes(PipelineSchedule::kOneFOneB, 2, 2, 4, 1), std::invalid_argument);
  EXPECT_THROW(simulate_pipeline(PipelineSchedule::kOneFOneB, 2, 4, 2, 1, 2),
               std::invalid_argument);
}

// ---- pass orders, written out by hand ---------------------------------------

TEST(PipelinePasses, GpipeTwoStagesThreeMicroBatches) {
  const std::vector<PipelinePass> expected{F(0), F(1), F(2), B(0), B(1), B(2)};
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(pipeline_passes(PipelineSchedule::kGpipe, 2, s, 3, 1), expected) << "stage " << s;
  }
}

TEST(PipelinePasses, OneFOneBThreeStagesFourMicroBatches) {
  const std::vector<std::vector<PipelinePass>> expected{
      {F(0), F(1), F(2), B(0), F(3), B(1), B(2), B(3)},  // 2 warm-up forwards
      {F(0), F(1), B(0), F(2), B(1), F(3), B(2), B(3)},  // 1
      {F(0), B(0), F(1), B(1), F(2), B(2), F(3), B(3)},  // 0
  };
  for (size_t s = 0; s < 3; ++s) {
    const auto passes = pipeline_passes(PipelineSchedule::kOneFOneB, 3, s, 4, 1);
    EXPECT_EQ(passes, expected[s]) << "stage " << s << ":" << show(passes);
  }
  // Fewer micro-batches than warm-up wants: everything forward, then backward.
  EXPECT_EQ(pipeline_passes(PipelineSchedule::kOneFOneB, 4, 0, 2, 1),
            (std::vector<PipelinePass>{F(0), F(1), B(0), B(1)}));
}

TEST(PipelinePasses, InterleavedTwoStagesFourMicroBatchesTwoChunks) {
  // Forward k: chunk (k / 2) % 2 of micro-batch (k / 4) * 2 + k % 2; backwards
  // the same micro-batches from the last chunk. Warm-up: stage 0 (2 - 0 - 1) *
  // 2 + (2 - 1) * 2 = 4, stage 1 2.
  const std::vector<std::vector<PipelinePass>> expected{
      {F(0, 0), F(1, 0), F(0, 1), F(1, 1),                                      // warm-up
       F(2, 0), B(0, 1), F(3, 0), B(1, 1), F(2, 1), B(0, 0), F(3, 1), B(1, 0),  // steady
       B(2, 1), B(3, 1), B(2, 0), B(3, 0)},                                     // cool-down
      {F(0, 0), F(1, 0),                                                        // warm-up
       F(0, 1), B(0, 1), F(1, 1), B(1, 1), F(2, 0), B(0, 0), F(3, 0), B(1, 0),  // steady
       F(2, 1), B(2, 1), F(3, 1), B(3, 1),                                      // steady
       B(2, 0), B(3, 0)},                                                       // cool-down
  };
  for (size_t s = 0; s < 2; ++s) {
    const auto passes = pipeline_passes(PipelineSchedule::kInterleaved, 2, s, 4, 2);
    EXPECT_EQ(passes, expected[s]) << "stage " << s << ":" << show(passes);
  }
  // M v == warm-up: all forwards, then all backwards (N = 2, M = 2, v = 2, stage 0).
  EXPECT_EQ(pipeline_passes(PipelineSchedule::kInterleaved, 2, 0, 2, 2),
            (std::vector<PipelinePass>{F(0, 0), F(1, 0), F(0, 1), F(1, 1), B(0, 1), B(1, 1),
                                       B(0, 0), B(1, 0)}));
}

struct Case {
  PipelineSchedule schedule;
  size_t stages, micro_batches, chunks;
};

// Every valid (schedule, N in 1..6, M in 1..12, v in 1..3).
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (PipelineSchedule schedule :
       {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB, PipelineSchedule::kInterleaved}) {
    for (size_t n = 1; n <= 6; ++n) {
      for (size_t m = 1; m <= 12; ++m) {
        for (size_t v = 1; v <= 3; ++v) {
          if (validate_pipeline(schedule, n, m, v).empty()) cases.push_back({schedule, n, m, v});
        }
      }
    }
  }
  return cases;
}

std::string label(const Case& c) {
  return std::string(name(c.schedule)) + " N=" + std::to_string(c.stages) +
         " M=" + std::to_string(c.micro_batches) + " v=" + std::to_string(c.chunks);
}

TEST(PipelinePasses, EveryForwardOnceThenItsBackwardOnce) {
  const std::vector<Case> cases = all_cases();
  ASSERT_EQ(cases.size(), 231u);
  for (const Case& c : cases) {
    for (size_t s = 0; s < c.stages; ++s) {
      const auto passes = pipeline_passes(c.schedule, c.stages, s, c.micro_batches, c.chunks);
      ASSERT_EQ(passes.size(), 2 * c.micro_batches * c.chunks) << label(c);
      std::map<std::pair<size_t, size_t>, int> seen;  // 1 after the forward, 2 after both
      for (const PipelinePass& p : passes) {
        ASSERT_LT(p.micro_batch, c.micro_batches) << label(c);
        ASSERT_LT(p.chunk, c.chunks) << label(c);
        int& state = seen[{p.micro_batch, p.chunk}];
        ASSERT_EQ(state, p.kind == Kind::kForward ? 0 : 1)
            << label(c) << " stage " << s << ":" << show(passes);
        ++state;
      }
      ASSERT_EQ(seen.size(), c.micro_batches * c.chunks) << label(c);
    }
  }
}

TEST(PipelinePasses, PeakInFlight) {
  for (size_t n = 1; n <= 6; ++n) {
    for (size_t m = 1; m <= 12; ++m) {
      for (size_t s = 0; s < n; ++s) {
        EXPECT_EQ(peak_in_flight(pipeline_passes(PipelineSchedule::kGpipe, n, s, m, 1)), m);
        const size_t one_f_one_b =
            peak_in_flight(pipeline_passes(PipelineSchedule::kOneFOneB, n, s, m, 1));
        EXPECT_LE(one_f_one_b, n - s);
        EXPECT_EQ(one_f_one_b, std::min(n - s, m)) << "N " << n << " M " << m << " s " << s;
      }
    }
  }
  for (size_t s = 0; s < 2; ++s) {  // the hand-written case: warm-up + 1
    EXPECT_EQ(peak_in_flight(pipeline_passes(PipelineSchedule::kInterleaved, 2, s, 4, 2)),
              s == 0 ? 5u : 3u);
  }
  EXPECT_EQ(peak_in_flight(std::vector<PipelinePass>{}), 0u);
}

// ---- plans -------------------------------------------------------------------

void expect_step(const PipelineStep& step, std::vector<PipelineTransfer> sends,
                 std::vector<PipelineTransfer> recvs, std::optional<PipelinePass> pass,
                 const std::string& where) {
  EXPECT_EQ(step.sends, sends) << where;
  EXPECT_EQ(step.recvs, recvs) << where;
  EXPECT_EQ(step.pass, pass) << where;
}

TEST(PipelinePlan, OneFOneBTwoStagesByHand) {
  const auto first = pipeline_plan(PipelineSchedule::kOneFOneB, 2, 0, 2, 1);
  ASSERT_EQ(first.size(), 5u);
  expect_step(first[0], {}, {}, F(0), "stage 0 step 0");
  expect_step(first[1], {act(0, 0, 1)}, {}, F(1), "stage 0 step 1");
  expect_step(first[2], {act(1, 0, 1)}, {grad(0, 0, 1)}, B(0), "stage 0 step 2");
  expect_step(first[3], {}, {grad(1, 0, 1)}, B(1), "stage 0 step 3");
  expect_step(first[4], {}, {}, std::nullopt, "stage 0 final");
  const auto last = pipeline_plan(PipelineSchedule::kOneFOneB, 2, 1, 2, 1);
  ASSERT_EQ(last.size(), 5u);
  expect_step(last[0], {}, {act(0, 0, 0)}, F(0), "stage 1 step 0");
  expect_step(last[1], {}, {}, B(0), "stage 1 step 1");  // the loss: nothing to move
  expect_step(last[2], {grad(0, 0, 0)}, {act(1, 0, 0)}, F(1), "stage 1 step 2");
  expect_step(last[3], {}, {}, B(1), "stage 1 step 3");
  expect_step(last[4], {grad(1, 0, 0)}, {}, std::nullopt, "stage 1 final");
}

TEST(PipelinePlan, InterleavedPairsAndChunkWrap) {
  // N = 2, M = 4, v = 2, stage 1 (warm-up 2): the last stage's chunk 0 sends
  // forward to stage 0 (its chunk 1), and steady pairs share one batch.
  const auto plan = pipeline_plan(PipelineSchedule::kInterleaved, 2, 1, 4, 2);
  ASSERT_EQ(plan.size(), 17u);
  expect_step(plan[0], {}, {act(0, 0, 0)}, F(0, 0), "step 0");
  expect_step(plan[1], {act(0, 0, 0)}, {act(1, 0, 0)}, F(1, 0), "step 1");
  // F(0, 1) and B(0, 1): both inputs in one batch; B(0, 1) starts at the loss.
  expect_step(plan[2], {act(1, 0, 0)}, {act(0, 1, 0)}, F(0, 1), "step 2");
  expect_step(plan[3], {}, {}, B(0, 1), "step 3");
  // F(1, 1) B(1, 1): sends B(0, 1)'s gradient (chunk 1 -> stage 0's chunk 1).
  expect_step(plan[4], {grad(0, 1, 0)}, {act(1, 1, 0)}, F(1, 1), "step 4");
  expect_step(plan[5], {}, {}, B(1, 1), "step 5");
  // F(2, 0) B(0, 0): receives both inputs; B(0, 0)'s gradient from stage 0's chunk 1.
  expect_step(plan[6], {grad(1, 1, 0)}, {act(2, 0, 0), grad(0, 0, 0)}, F(2, 0), "step 6");
  expect_step(plan[7], {}, {}, B(0, 0), "step 7");
  // Both outputs of the previous pair: activation first, then gradient.
  expect_step(plan[8], {act(2, 0, 0), grad(0, 0, 0)}, {act(3, 0, 0), grad(1, 0, 0)}, F(3, 0),
              "step 8");
  expect_step(plan[16], {grad(3, 0, 0)}, {}, std::nullopt, "final");
  // Stage 0's chunk 1 receives from stage 1 (chunk wrap) and its chunk 0
  // ends the backward (nothing to send).
  const auto first = pipeline_plan(PipelineSchedule::kInterleaved, 2, 0, 4, 2);
  expect_step(first[2], {act(1, 0, 1)}, {act(0, 1, 1)}, F(0, 1), "stage 0 step 2");
  EXPECT_TRUE(first.back().sends.empty());
}

TEST(PipelinePlan, PassesInOrderWithInputsBeforeAndOutputsAfter) {
  for (const Case& c : all_cases()) {
    const size_t virtual_stages = c.stages * c.chunks;
    for (size_t s = 0; s < c.stages; ++s) {
      const auto plan = pipeline_plan(c.schedule, c.stages, s, c.micro_batches, c.chunks);
      const auto passes = pipeline_passes(c.schedule, c.stages, s, c.micro_batches, c.chunks);
      ASSERT_TRUE(!plan.empty() && !plan.back().pass.has_value()) << label(c);
      std::vector<PipelinePass> in_plan;
      size_t sends = 0, recvs = 0;
      for (const PipelineStep& step : plan) {
        if (step.pass) in_plan.push_back(*step.pass);
        sends += step.sends.size();
        recvs += step.recvs.size();
      }
      ASSERT_EQ(in_plan, passes) << label(c);
      // One send per pass output and one receive per input, none at the ends.
      size_t expected = 0;
      for (const PipelinePass& p : passes) {
        const size_t v = p.chunk * c.stages + s;
        expected += p.kind == Kind::kForward ? (v + 1 < virtual_stages) : (v > 0);
      }
      EXPECT_EQ(sends, expected) << label(c) << " stage " << s;
      EXPECT_EQ(recvs, expected) << label(c) << " stage " << s;
    }
  }
}

// ---- the simulator -------------------------------------------------------------

TEST(PipelineSimulate, NoDeadlockAndTheTextbookBubble) {
  // Transfers are free and every stage computes the same, so each stage idles
  // (N - 1) (f + b) of a makespan of (v M + N - 1) (f + b), for any f and b.
  for (const Case& c : all_cases()) {
    for (auto [f, b] : {std::pair{1.0, 2.0}, std::pair{1.0, 1.0}, std::pair{0.3, 0.7}}) {
      const PipelineSimulation sim =
          simulate_pipeline(c.schedule, c.stages, c.micro_batches, c.chunks, f, b);
      ASSERT_FALSE(sim.deadlocked) << label(c) << ": " << sim.problem;
      ASSERT_EQ(sim.problem, "") << label(c);
      ASSERT_EQ(sim.idle.size(), c.stages);
      const double steps = static_cast<double>(c.chunks * c.micro_batches + c.stages - 1);
      EXPECT_NEAR(sim.makespan, steps * (f + b), 1e-9) << label(c);
      const double bubble = textbook_bubble(c.stages, c.micro_batches, c.chunks);
      for (size_t s = 0; s < c.stages; ++s) {
        EXPECT_NEAR(sim.idle[s] / sim.makespan, bubble, 1e-9) << label(c) << " stage " << s;
      }
    }
  }
}

TEST(PipelineSimulate, BubbleFigures) {
  // GPipe N = 4, M = 8: 3 / 11.
  const auto gpipe = simulate_pipeline(PipelineSchedule::kGpipe, 4, 8, 1, 1.0, 1.0);
  EXPECT_NEAR(gpipe.makespan, 22.0, 1e-9);
  EXPECT_NEAR(gpipe.idle[0] / gpipe.makespan, 3.0 / 11.0, 1e-9);
  // 1F1B N = 4, M = 8, backward = 2 forward: the same bubble, less memory.
  const auto one = simulate_pipeline(PipelineSchedule::kOneFOneB, 4, 8, 1, 1.0, 2.0);
  EXPECT_NEAR(one.makespan, 33.0, 1e-9);
  EXPECT_NEAR(one.idle[3] / one.makespan, textbook_bubble(4, 8, 1), 1e-9);
  // Interleaved N = 4, M = 8, v = 2: 3 / 19, passes of half the cost.
  const auto inter = simulate_pipeline(PipelineSchedule::kInterleaved, 4, 8, 2, 0.5, 1.0);
  EXPECT_NEAR(inter.makespan, 19 * 1.5, 1e-9);
  EXPECT_NEAR(inter.idle[1] / inter.makespan, 3.0 / 19.0, 1e-9);
  EXPECT_NEAR(textbook_bubble(4, 8, 2), 3.0 / 19.0, 1e-12);
  EXPECT_NEAR(textbook_bubble(1, 5, 1), 0.0, 1e-12);
}

std::vector<std::vector<PipelineStep>> plans_of(PipelineSchedule schedule, size_t stages,
                                                size_t micro_batches, size_t chunks) {
  std::vector<std::vector<PipelineStep>> plans;
  for (size_t s = 0; s < stages; ++s) {
    plans.push_back(pipeline_plan(schedule, stages, s, micro_batches, chunks));
  }
  return plans;
}

// Removes the `nth` send of stage `stage`'s plan (counted over the whole plan).
void drop_send(std::vector<PipelineStep>& plan, size_t nth) {
  for (PipelineStep& step : plan) {
    if (nth < step.sends.size()) {
      step.sends.erase(step.sends.begin() + static_cast<std::ptrdiff_t>(nth));
      return;
    }
    nth -= step.sends.size();
  }
  FAIL() << "no such send";
}

TEST(PipelineSimulate, IntactPlansRun) {
  auto plans = plans_of(PipelineSchedule::kOneFOneB, 3, 4, 1);
  const auto sim = simulate_plans(plans, 1.0, 2.0);
  EXPECT_FALSE(sim.deadlocked);
  EXPECT_EQ(sim.problem, "");
  EXPECT_NEAR(sim.makespan, 6 * 3.0, 1e-9);
}

TEST(PipelineSimulate, SendsWaitForTheirReceive) {
  // Stage 0 sends after one forward (t = 1); stage 1 posts the receive after
  // two (t = 2). Rendezvous: stage 0's send completes at 2, so its two last
  // forwards end at 4 (an eager send would end them at 3).
  std::vector<std::vector<PipelineStep>> plans(2);
  plans[0] = {{{}, {}, F(0)}, {{act(0, 0, 1)}, {}, F(1)}, {{}, {}, F(2)}, {}};
  plans[1] = {{{}, {}, F(7)}, {{}, {}, F(8)}, {{}, {act(0, 0, 0)}, F(0)}, {}};
  const auto sim = simulate_plans(plans, 1.0, 1.0);
  ASSERT_EQ(sim.problem, "");
  EXPECT_NEAR(sim.makespan, 4.0, 1e-12);
  EXPECT_NEAR(sim.idle[0], 1.0, 1e-12);
  EXPECT_NEAR(sim.idle[1], 1.0, 1e-12);
}

TEST(PipelineSimulate, DroppedLastSendDeadlocks) {
  // Stage 1 never sends micro-batch 3's activation: stage 2 waits for it forever.
  auto plans = plans_of(PipelineSchedule::kOneFOneB, 3, 4, 1);
  // Stage 1's sends in order: act 0, act 1, grad 0, act 2, grad 1, act 3, grad 2, grad 3.
  drop_send(plans[1], 5);
  const auto sim = simulate_plans(plans, 1.0, 2.0);
  EXPECT_TRUE(sim.deadlocked) << sim.problem;
  EXPECT_NE(sim.problem.find("stage 2"), std::string::npos) << sim.problem;
  EXPECT_NE(sim.problem.find("activation (micro-batch 3, chunk 0)"), std::string::npos)
      << sim.problem;
}

TEST(PipelineSimulate, DroppedFirstSendIsAMismatch) {
  // Stage 0's first activation is missing: its second meets stage 1's receive
  // of the first (messages between a pair match in order).
  auto plans = plans_of(PipelineSchedule::kOneFOneB, 3, 4, 1);
  drop_send(plans[0], 0);
  const auto sim = simulate_plans(plans, 1.0, 2.0);
  EXPECT_FALSE(sim.deadlocked);
  EXPECT_NE(sim.problem.find("micro-batch 1"), std::string::npos) << sim.problem;
  EXPECT_NE(sim.problem.find("micro-batch 0"), std::string::npos) << sim.problem;
}

TEST(PipelineSimulate, BrokenInterleavedPlansAreCaught) {
  // Drop each send of an interleaved plan in turn: every one is caught.
  const auto intact = plans_of(PipelineSchedule::kInterleaved, 3, 6, 2);
  size_t total = 0;
  for (const PipelineStep& step : intact[1]) total += step.sends.size();
  ASSERT_GT(total, 0u);
  for (size_t nth = 0; nth < total; ++nth) {
    auto plans = intact;
    drop_send(plans[1], nth);
    const auto sim = simulate_plans(plans, 1.0, 2.0);
    EXPECT_NE(sim.problem, "") << "send " << nth;
  }
  // Two sends of one batch swapped: the pair meets them out of order.
  auto swapped = plans_of(PipelineSchedule::kInterleaved, 2, 4, 2);
  bool done = false;
  for (PipelineStep& step : swapped[0]) {
    if (step.sends.size() == 2 && step.sends[0].peer == step.sends[1].peer) {
      std::swap(step.sends[0], step.sends[1]);
      done = true;
      break;
    }
  }
  ASSERT_TRUE(done);
  EXPECT_NE(simulate_plans(swapped, 1.0, 1.0).problem, "");
  // A peer outside the pipeline.
  auto outside = plans_of(PipelineSchedule::kGpipe, 2, 2, 1);
  outside[0][1].sends[0].peer = 5;
  EXPECT_NE(simulate_plans(outside, 1.0, 1.0).problem, "");
}

}  // namespace
}  // namespace ccscope::training_probe
