// The mixture-of-experts routing: the top-k gate forward and backward, the
// capacity dispatch in GShard's order, experts over ranks, load imbalance.
#include "ccscope/training_probe/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <stdexcept>
#include <tuple>

namespace ccscope::training_probe {
namespace {

// A gate output with the given choices (plan_dispatch reads only `chosen`).
GateOutput choices(size_t tokens, const MoeShape& shape, std::vector<uint32_t> chosen) {
  GateOutput gate;
  gate.tokens = tokens;
  gate.probabilities.assign(tokens * shape.experts, 0.0f);
  gate.chosen = std::move(chosen);
  return gate;
}

TEST(MoeGate, HandComputedTwoTokensThreeExperts) {
  // Wg rows: expert 0 = [1, 0], expert 1 = [0, 1], expert 2 = [1, 1].
  const std::vector<float> wg = {1, 0, 0, 1, 1, 1};
  // Token 0 = [1, 0]: logits [1, 0, 1] (experts 0 and 2 tie).
  // Token 1 = [-1, 2]: logits [-1, 2, 1].
  const std::vector<float> x = {1, 0, -1, 2};
  const MoeShape shape{2, 3, 2, 1.0};
  const GateOutput gate = gate_forward(x, 2, shape, wg.data());
  ASSERT_EQ(gate.tokens, 2u);
  ASSERT_EQ(gate.probabilities.size(), 6u);
  ASSERT_EQ(gate.chosen.size(), 4u);

  const double e = std::exp(1.0);
  const double s0 = 2 * e + 1;
  EXPECT_NEAR(gate.probabilities[0], e / s0, 1e-6);
  EXPECT_NEAR(gate.probabilities[1], 1 / s0, 1e-6);
  EXPECT_NEAR(gate.probabilities[2], e / s0, 1e-6);
  const double s1 = std::exp(-1.0) + std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(gate.probabilities[3], std::exp(-1.0) / s1, 1e-6);
  EXPECT_NEAR(gate.probabilities[4], std::exp(2.0) / s1, 1e-6);
  EXPECT_NEAR(gate.probabilities[5], std::exp(1.0) / s1, 1e-6);
  for (size_t t = 0; t < 2; ++t) {
    double sum = 0;
    for (size_t j = 0; j < 3; ++j) sum += gate.probabilities[t * 3 + j];
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
  // Token 0: the tie between experts 0 and 2 goes to 0; token 1: 1 then 2.
  EXPECT_EQ(gate.chosen, (std::vector<uint32_t>{0, 2, 1, 2}));
  // The combine weight is the chosen expert's probability, unnormalised.
  EXPECT_FLOAT_EQ(gate.weight(0, 1, 3, 2), gate.probabilities[2]);
  EXPECT_FLOAT_EQ(gate.weight(1, 0, 3, 2), gate.probabilities[4]);
}

TEST(MoeGate, ProbabilitiesSumToOneAndStableForLargeLogits) {
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 3.0f);
  const MoeShape shape{6, 5, 3, 1.0};
  const size_t tokens = 17;
  std::vector<float> x(tokens * shape.width), wg(shape.experts * shape.width);
  for (float& v : x) v = n(rng);
  for (float& v : wg) v = n(rng);
  // One token with logits far past exp's float range: 1000 * (row sums).
  std::fill(x.begin(), x.begin() + static_cast<long>(shape.width), 1000.0f);
  const GateOutput gate = gate_forward(x, tokens, shape, wg.data());
  for (size_t t = 0; t < tokens; ++t) {
    double sum = 0;
    for (size_t j = 0; j < shape.experts; ++j) {
      const float p = gate.probabilities[t * shape.experts + j];
      ASSERT_TRUE(std::isfinite(p)) << "token " << t;
      EXPECT_GE(p, 0.0f);
      sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "token " << t;
  }
}

TEST(MoeGate, TopKDecreasingWithTiesToLowerIndex) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const MoeShape shape{4, 6, 4, 1.0};
  const size_t tokens = 20;
  std::vector<float> x(tokens * shape.width), wg(shape.experts * shape.width);
  for (float& v : x) v = n(rng);
  for (float& v : wg) v = n(rng);
  // Token 0 all zero: every expert has probability 1/6, so 0, 1, 2, 3.
  std::fill(x.begin(), x.begin() + static_cast<long>(shape.width), 0.0f);
  const GateOutput gate = gate_forward(x, tokens, shape, wg.data());
  EXPECT_EQ(std::vector<uint32_t>(gate.chosen.begin(), gate.chosen.begin() + 4),
            (std::vector<uint32_t>{0, 1, 2, 3}));
  for (size_t t = 0; t < tokens; ++t) {
    const float* p = gate.probabilities.data() + t * shape.experts;
    const uint32_t* c = gate.chosen.data() + t * shape.top_k;
    // The reference: a stable sort of the experts by decreasing probability.
    std::vector<uint32_t> order(shape.experts);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(),
                     [&](uint32_t a, uint32_t b) { return p[a] > p[b]; });
    for (size_t s = 0; s < shape.top_k; ++s) EXPECT_EQ(c[s], order[s]) << "token " << t;
  }

  // Ties below the first place: logits [0, 1, 1, 1] pick 1, 2 (k = 2).
  const std::vector<float> wg2 = {0, 1, 1, 1};
  const std::vector<float> x2 = {1};
  const GateOutput tie = gate_forward(x2, 1, MoeShape{1, 4, 2, 1.0}, wg2.data());
  EXPECT_EQ(tie.chosen, (std::vector<uint32_t>{1, 2}));
}

TEST(MoeGate, RejectsBadShapes) {
  const std::vector<float> w(8, 0.0f), x(4, 0.0f);
  EXPECT_THROW(gate_forward(x, 2, MoeShape{2, 0, 1, 1.0}, w.data()), std::invalid_argument);
  EXPECT_THROW(gate_forward(x, 2, MoeShape{2, 4, 0, 1.0}, w.data()), std::invalid_argument);
  EXPECT_THROW(gate_forward(x, 2, MoeShape{2, 4, 5, 1.0}, w.data()), std::invalid_argument);
  EXPECT_THROW(gate_forward(x, 3, MoeShape{2, 4, 1, 1.0}, w.data()), std::invalid_argument);
  EXPECT_THROW(gate_forward(x, 2, MoeShape{2, 4, 1, -1.0}, w.data()), std::invalid_argument);
}

// L = sum_t sum_k w_tk c_tk, in double over the float32 combine weights.
double gate_loss(const std::vector<float>& x, size_t tokens, const MoeShape& shape,
                 const std::vector<float>& wg, const std::vector<double>& c,
                 const std::vector<uint32_t>& expected_choice) {
  const GateOutput gate = gate_forward(x, tokens, shape, wg.data());
  // A flipped top-k choice would make L jump: the points must avoid it.
  EXPECT_EQ(gate.chosen, expected_choice) << "top-k flipped inside the finite difference";
  double loss = 0;
  for (size_t t = 0; t < tokens; ++t)
    for (size_t s = 0; s < shape.top_k; ++s)
      loss += static_cast<double>(gate.weight(t, s, shape.experts, shape.top_k)) *
              c[t * shape.top_k + s];
  return loss;
}

// The smallest gap between the k-th and (k+1)-th probability over tokens.
double top_k_margin(const GateOutput& gate, const MoeShape& shape) {
  if (shape.top_k == shape.experts) return 1.0;
  double margin = 1.0;
  for (size_t t = 0; t < gate.tokens; ++t) {
    std::vector<float> p(gate.probabilities.begin() + static_cast<long>(t * shape.experts),
                         gate.probabilities.begin() + static_cast<long>((t + 1) * shape.experts));
    std::sort(p.begin(), p.end(), std::greater<>());
    margin = std::min(margin, static_cast<double>(p[shape.top_k - 1] - p[shape.top_k]));
  }
  return margin;
}

void check_gate_backward(size_t top_k, unsigned seed) {
  const MoeShape shape{5, 4, top_k, 1.0};
  const size_t tokens = 3;
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 0.7f);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<float> x(tokens * shape.width), wg(shape.experts * shape.width);
  GateOutput gate;
  // Redraw until every token's k-th choice leads the next by a clear margin,
  // so that no +-h step flips the top-k (deterministic for a fixed seed).
  do {
    for (float& v : x) v = n(rng);
    for (float& v : wg) v = n(rng);
    gate = gate_forward(x, tokens, shape, wg.data());
  } while (top_k_margin(gate, shape) < 0.05);
  std::vector<double> c(tokens * top_k);
  for (double& v : c) v = u(rng);
  std::vector<float> d_weight(c.begin(), c.end());

  // Outputs start non-zero: the backward must add into them.
  std::vector<float> gate_grad(wg.size()), dx(x.size());
  for (size_t i = 0; i < gate_grad.size(); ++i) gate_grad[i] = 0.25f * static_cast<float>(i);
  for (size_t i = 0; i < dx.size(); ++i) dx[i] = -0.5f * static_cast<float>(i);
  const std::vector<float> gate_grad0 = gate_grad, dx0 = dx;
  gate_backward(x, gate, shape, wg.data(), d_weight, gate_grad.data(), dx.data());

  const float h = 1e-3f;
  auto central = [&](std::vector<float>& v, size_t i) {
    const float keep = v[i];
    v[i] = keep + h;
    const float up = v[i];
    const double lp = gate_loss(x, tokens, shape, wg, c, gate.chosen);
    v[i] = keep - h;
    const float down = v[i];
    const double lm = gate_loss(x, tokens, shape, wg, c, gate.chosen);
    v[i] = keep;
    return (lp - lm) / (static_cast<double>(up) - static_cast<double>(down));
  };
  // float32 probabilities (relative error ~6e-8) over a 2e-3 step: ~1e-4
  // of noise in the quotient at most; the O(h^2) truncation is smaller.
  const double tol = 5e-4;
  for (size_t i = 0; i < wg.size(); ++i) {
    const double fd = central(wg, i);
    EXPECT_NEAR(gate_grad[i] - gate_grad0[i], fd, tol + 1e-3 * std::abs(fd))
        << "k=" << top_k << " d/dWg[" << i << "]";
  }
  for (size_t i = 0; i < x.size(); ++i) {
    const double fd = central(x, i);
    EXPECT_NEAR(dx[i] - dx0[i], fd, tol + 1e-3 * std::abs(fd))
        << "k=" << top_k << " d/dx[" << i << "]";
  }
  // Not vacuous: some gradient is well above the tolerance.
  double biggest = 0;
  for (size_t i = 0; i < wg.size(); ++i)
    biggest = std::max(biggest, std::abs(static_cast<double>(gate_grad[i] - gate_grad0[i])));
  EXPECT_GT(biggest, 0.02);
}

TEST(MoeGate, BackwardMatchesFiniteDifferencesTop1) { check_gate_backward(1, 21); }
TEST(MoeGate, BackwardMatchesFiniteDifferencesTop2) { check_gate_backward(2, 22); }
TEST(MoeGate, BackwardMatchesFiniteDifferencesAllExperts) { check_gate_backward(4, 23); }

TEST(MoeGate, BackwardOfDroppedSlotsIsZero) {
  const MoeShape shape{3, 4, 2, 1.0};
  const std::vector<float> x = {0.3f, -0.2f, 0.9f};
  const std::vector<float> wg = {0.1f, 0.2f,  0.3f, -0.4f, 0.5f, 0.6f,
                                 0.7f, -0.8f, 0.9f, 1.0f,  1.1f, 1.2f};
  const GateOutput gate = gate_forward(x, 1, shape, wg.data());
  std::vector<float> gate_grad(wg.size(), 1.0f), dx(x.size(), 2.0f);
  const std::vector<float> zero(2, 0.0f);
  gate_backward(x, gate, shape, wg.data(), zero, gate_grad.data(), dx.data());
  for (float v : gate_grad) EXPECT_EQ(v, 1.0f);
  for (float v : dx) EXPECT_EQ(v, 2.0f);
}

TEST(MoeDispatch, GShardPriorityWorkedExample) {
  // 4 tokens, 2 experts, k = 2, cf = 0.5: capacity ceil(0.5 * 4 * 2 / 2) = 2.
  const MoeShape shape{1, 2, 2, 0.5};
  const GateOutput gate = choices(4, shape, {0, 1, 0, 1, 1, 0, 0, 1});
  const DispatchPlan plan = plan_dispatch(gate, shape);
  EXPECT_EQ(plan.capacity, 2u);
  // First choices in token order: t0 -> 0, t1 -> 0, t2 -> 1, t3 -> 0 (full,
  // dropped); then second choices: t0 -> 1, t1 -> 1 (full), t2 -> 0 (full),
  // t3 -> 1 (full). Token-major order would have kept t1's second choice
  // instead of t2's first.
  const std::vector<Assignment> kept = {{0, 0, 0}, {1, 0, 0}, {0, 1, 1}, {2, 0, 1}};
  EXPECT_EQ(plan.kept, kept);
  EXPECT_EQ(plan.per_expert, (std::vector<size_t>{2, 2}));
  EXPECT_EQ(plan.wanted, (std::vector<size_t>{4, 4}));
  EXPECT_EQ(plan.dropped, 4u);
}

TEST(MoeDispatch, SwitchTop1Capacity) {
  // 8 tokens, 4 experts, k = 1, cf = 1.25: capacity ceil(2.5) = 3.
  const MoeShape shape{1, 4, 1, 1.25};
  const GateOutput gate = choices(8, shape, {2, 2, 0, 2, 2, 3, 2, 0});
  const DispatchPlan plan = plan_dispatch(gate, shape);
  EXPECT_EQ(plan.capacity, 3u);
  const std::vector<Assignment> kept = {{2, 0, 0}, {7, 0, 0}, {0, 0, 2},
                                        {1, 0, 2}, {3, 0, 2}, {5, 0, 3}};
  EXPECT_EQ(plan.kept, kept);
  EXPECT_EQ(plan.per_expert, (std::vector<size_t>{2, 0, 3, 1}));
  EXPECT_EQ(plan.wanted, (std::vector<size_t>{2, 0, 5, 1}));
  EXPECT_EQ(plan.dropped, 2u);
}

TEST(MoeDispatch, CapacityRoundsUpButNotPastAnExactProduct) {
  // 1.1 * 50 is 55.00000000000001 in double: still a capacity of 55.
  const MoeShape one{1, 1, 1, 1.1};
  EXPECT_EQ(plan_dispatch(choices(50, one, std::vector<uint32_t>(50, 0)), one).capacity, 55u);
  // 3 tokens, 2 experts, k = 1, cf = 1: ceil(1.5) = 2.
  const MoeShape shape{1, 2, 1, 1.0};
  EXPECT_EQ(plan_dispatch(choices(3, shape, {0, 0, 0}), shape).capacity, 2u);
  // A tiny factor still leaves one slot per expert.
  const MoeShape tiny{1, 2, 1, 1e-6};
  const DispatchPlan plan = plan_dispatch(choices(3, tiny, {1, 1, 0}), tiny);
  EXPECT_EQ(plan.capacity, 1u);
  EXPECT_EQ(plan.kept, (std::vector<Assignment>{{2, 0, 0}, {0, 0, 1}}));
  EXPECT_EQ(plan.dropped, 1u);
}

TEST(MoeDispatch, ZeroFactorKeepsEverything) {
  const MoeShape shape{1, 3, 2, 0.0};
  const GateOutput gate = choices(4, shape, {0, 1, 0, 2, 0, 1, 2, 0});
  const DispatchPlan plan = plan_dispatch(gate, shape);
  EXPECT_EQ(plan.capacity, 8u);
  EXPECT_EQ(plan.dropped, 0u);
  const std::vector<Assignment> kept = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {3, 1, 0},
                                        {0, 1, 1}, {2, 1, 1}, {1, 1, 2}, {3, 0, 2}};
  EXPECT_EQ(plan.kept, kept);
  EXPECT_EQ(plan.per_expert, (std::vector<size_t>{4, 2, 2}));
  EXPECT_EQ(plan.wanted, plan.per_expert);
}

TEST(MoeDispatch, ConsistentWithTheGate) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 1.5f);
  const MoeShape shape{4, 5, 2, 1.0};
  const size_t tokens = 40;
  std::vector<float> x(tokens * shape.width), wg(shape.experts * shape.width);
  for (float& v : x) v = n(rng);
  for (float& v : wg) v = n(rng);
  const GateOutput gate = gate_forward(x, tokens, shape, wg.data());
  const DispatchPlan plan = plan_dispatch(gate, shape);
  EXPECT_EQ(plan.capacity, 16u);
  EXPECT_EQ(std::accumulate(plan.wanted.begin(), plan.wanted.end(), size_t{0}), tokens * 2);
  EXPECT_EQ(plan.kept.size() + plan.dropped, tokens * 2);
  std::vector<size_t> per(shape.experts, 0);
  for (size_t i = 0; i < plan.kept.size(); ++i) {
    const Assignment& a = plan.kept[i];
    EXPECT_EQ(gate.chosen[a.token * shape.top_k + a.slot], a.expert);
    ++per[a.expert];
    if (i > 0) {
      const Assignment& b = plan.kept[i - 1];
      EXPECT_TRUE(std::tie(b.expert, b.token, b.slot) < std::tie(a.expert, a.token, a.slot));
    }
  }
  EXPECT_EQ(per, plan.per_expert);
  for (size_t e = 0; e < shape.experts; ++e) {
    EXPECT_LE(plan.per_expert[e], plan.capacity);
    EXPECT_EQ(plan.per_expert[e], std::min(plan.wanted[e], plan.capacity));
  }
}

TEST(MoeOwnership, FiveExpertsOverTwoRanks) {
  EXPECT_EQ(experts_of_rank(0, 2, 5), (Range{0, 3}));
  EXPECT_EQ(experts_of_rank(1, 2, 5), (Range{3, 5}));
  const std::vector<size_t> owners = {0, 0, 0, 1, 1};
  for (size_t e = 0; e < 5; ++e) EXPECT_EQ(owner_of_expert(e, 2, 5), owners[e]) << e;
  // Fewer experts than ranks: the last ranks hold none.
  EXPECT_EQ(experts_of_rank(1, 4, 2), (Range{1, 2}));
  EXPECT_EQ(experts_of_rank(3, 4, 2).size(), 0u);
  EXPECT_EQ(owner_of_expert(1, 4, 2), 1u);
  EXPECT_THROW(owner_of_expert(5, 2, 5), std::invalid_argument);
  EXPECT_THROW(experts_of_rank(2, 2, 5), std::invalid_argument);
  EXPECT_THROW(experts_of_rank(0, 0, 5), std::invalid_argument);
}

TEST(MoeOwnership, OwnerConsistentWithRanges) {
  for (size_t ranks = 1; ranks <= 7; ++ranks) {
    for (size_t experts = 1; experts <= 13; ++experts) {
      size_t next = 0;
      for (size_t r = 0; r < ranks; ++r) {
        const Range range = experts_of_rank(r, ranks, experts);
        EXPECT_EQ(range.begin, next);
        EXPECT_LE(range.size(), experts / ranks + 1);
        EXPECT_GE(range.size(), experts / ranks);
        for (size_t e = range.begin; e < range.end; ++e)
          EXPECT_EQ(owner_of_expert(e, ranks, experts), r)
              << e << " of " << experts << " over " << ranks;
        next = range.end;
      }
      EXPECT_EQ(next, experts);
    }
  }
}

TEST(MoeLoad, Imbalance) {
  EXPECT_DOUBLE_EQ(load_imbalance(std::vector<size_t>{2, 2, 2, 2}), 1.0);
  EXPECT_DOUBLE_EQ(load_imbalance(std::vector<size_t>{4, 0, 0, 0}), 4.0);
  EXPECT_DOUBLE_EQ(load_imbalance(std::vector<size_t>{3, 1}), 1.5);
  EXPECT_DOUBLE_EQ(load_imbalance(std::vector<size_t>{5, 2, 2}), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(load_imbalance(std::vector<size_t>{0, 0}), 0.0);
  EXPECT_DOUBLE_EQ(load_imbalance(std::vector<size_t>{}), 0.0);
}

}  // namespace
}  // namespace ccscope::training_probe
