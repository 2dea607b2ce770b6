#include "ccscope/training_probe/moe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "ccscope/training_probe/data.h"
#include "engine.h"
#include "moe_layout.h"

namespace ccscope::training_probe {
namespace {

void check_shape(const MoeShape& shape) {
  if (shape.experts == 0) throw std::invalid_argument("MoE layer with zero experts");
  if (shape.experts > std::numeric_limits<uint32_t>::max())
    throw std::invalid_argument("MoE layer with more than 2^32 - 1 experts");
  if (shape.top_k == 0 || shape.top_k > shape.experts)
    throw std::invalid_argument("MoE top_k " + std::to_string(shape.top_k) + " outside 1.." +
                                std::to_string(shape.experts) + " (the number of experts)");
  if (!(shape.capacity_factor >= 0.0) || !std::isfinite(shape.capacity_factor))
    throw std::invalid_argument("MoE capacity factor must be a finite number >= 0 (0: no limit)");
}

void check_gate(const GateOutput& gate, const MoeShape& shape) {
  if (gate.probabilities.size() != gate.tokens * shape.experts ||
      gate.chosen.size() != gate.tokens * shape.top_k)
    throw std::invalid_argument("MoE gate output does not match the layer's shape");
}

}  // namespace

GateOutput gate_forward(std::span<const float> x, size_t tokens, const MoeShape& shape,
                        const float* gate_weight) {
  check_shape(shape);
  const size_t width = shape.width, experts = shape.experts, k = shape.top_k;
  if (x.size() < tokens * width)
    throw std::invalid_argument("MoE gate input holds fewer than tokens x width values");
  if (gate_weight == nullptr && tokens > 0 && width > 0)
    throw std::invalid_argument("MoE gate weight missing");

  GateOutput out;
  out.tokens = tokens;
  out.probabilities.resize(tokens * experts);
  out.chosen.resize(tokens * k);
  // E is small: plain loops (deterministic whatever the BLAS threading), the
  // logits and the softmax in double, stored as float32.
  std::vector<double> logits(experts);
  std::vector<bool> taken(experts);
  for (size_t t = 0; t < tokens; ++t) {
    const float* xt = x.data() + t * width;
    double max_logit = -std::numeric_limits<double>::infinity();
    for (size_t e = 0; e < experts; ++e) {
      const float* w = gate_weight + e * width;
      double s = 0.0;
      for (size_t c = 0; c < width; ++c) s += static_cast<double>(w[c]) * xt[c];
      logits[e] = s;
      max_logit = std::max(max_logit, s);
    }
    double sum = 0.0;
    for (size_t e = 0; e < experts; ++e) {
      logits[e] = std::exp(logits[e] - max_logit);
      sum += logits[e];
    }
    float* p = out.probabilities.data() + t * experts;
    for (size_t e = 0; e < experts; ++e) p[e] = static_cast<float>(logits[e] / sum);

    // Top-k by the stored probability, ties to the lower index: k passes of a
    // strict-greater scan (k <= E is small; a NaN cannot break the order).
    std::fill(taken.begin(), taken.end(), false);
    for (size_t slot = 0; slot < k; ++slot) {
      size_t best = experts;
      for (size_t e = 0; e < experts; ++e) {
        if (taken[e]) continue;
        if (best == experts || p[e] > p[best]) best = e;
      }
      taken[best] = true;
      out.chosen[t * k + slot] = static_cast<uint32_t>(best);
    }
  }
  return out;
}

void gate_backward(std::span<const float> x, const GateOutput& gate, const MoeShape& shape,
                   const float* gate_weight, std::span<const float> d_weight, float* gate_grad,
                   float* dx) {
  check_shape(shape);
  check_gate(gate, shape);
  const size_t tokens = gate.tokens, width = shape.width, experts = shape.experts, k = shape.top_k;
  if (x.size() < tokens * width)
    throw std::invalid_argument("MoE gate input holds fewer than tokens x width values");
  if (d_weight.size() < tokens * k)
    throw std::invalid_argument("MoE gate backward: d_weight holds fewer than tokens x top_k");

  std::vector<double> dp(experts), dlogit(experts);
  for (size_t t = 0; t < tokens; ++t) {
    const float* p = gate.probabilities.data() + t * experts;
    // d loss / d p_e: the combine weight of a kept slot is p of its expert.
    std::fill(dp.begin(), dp.end(), 0.0);
    for (size_t slot = 0; slot < k; ++slot) {
      const uint32_t e = gate.chosen[t * k + slot];
      if (e >= experts) throw std::invalid_argument("MoE gate output chose a non-existent expert");
      dp[e] += d_weight[t * k + slot];
    }
    // Softmax backward: dlogit_j = p_j (dp_j - sum_i p_i dp_i).
    double dot = 0.0;
    for (size_t e = 0; e < experts; ++e) dot += static_cast<double>(p[e]) * dp[e];
    bool any = false;
    for (size_t e = 0; e < experts; ++e) {
      dlogit[e] = static_cast<double>(p[e]) * (dp[e] - dot);
      any = any || dlogit[e] != 0.0;
    }
    if (!any) continue;
    const float* xt = x.data() + t * width;
    for (size_t e = 0; e < experts; ++e) {
      const double g = dlogit[e];
      if (g == 0.0) continue;
      if (gate_grad != nullptr) {
        float* gg = gate_grad + e * width;
        for (size_t c = 0; c < width; ++c) gg[c] += static_cast<float>(g * xt[c]);
      }
      if (dx != nullptr) {
        const float* w = gate_weight + e * width;
        float* dxt = dx + t * width;
        for (size_t c = 0; c < width; ++c) dxt[c] += static_cast<float>(g * w[c]);
      }
    }
  }
}

DispatchPlan plan_dispatch(const GateOutput& gate, const MoeShape& shape) {
  check_shape(shape);
  check_gate(gate, shape);
  const size_t tokens = gate.tokens, experts = shape.experts, k = shape.top_k;
  DispatchPlan plan;
  if (shape.capacity_factor > 0.0) {
    // ceil(cf * tokens * k / E), with a relative 1e-12 allowance so that a
    // product that is an integer on paper (1.1 * 50 / 1) is not rounded up
    // past it by binary floating point.
    const double v =
        shape.capacity_factor * static_cast<double>(tokens * k) / static_cast<double>(experts);
    plan.capacity = static_cast<size_t>(std::ceil(v * (1.0 - 1e-12)));
  } else {
    plan.capacity = tokens * k;
  }
  plan.per_expert.assign(experts, 0);
  plan.wanted.assign(experts, 0);
  plan.kept.reserve(std::min(tokens * k, plan.capacity * experts));
  // GShard priority: all first choices in token order, then all second ones, ...
  for (size_t slot = 0; slot < k; ++slot) {
    for (size_t t = 0; t < tokens; ++t) {
      const uint32_t e = gate.chosen[t * k + slot];
      if (e >= experts) throw std::invalid_argument("MoE gate output chose a non-existent expert");
      ++plan.wanted[e];
      if (plan.per_expert[e] < plan.capacity) {
        ++plan.per_expert[e];
        plan.kept.push_back({static_cast<uint32_t>(t), static_cast<uint32_t>(slot), e});
      } else {
        ++plan.dropped;
      }
    }
  }
  std::sort(plan.kept.begin(), plan.kept.end(), [](const Assignment& a, const Assignment& b) {
    if (a.expert != b.expert) return a.expert < b.expert;
    if (a.token != b.token) return a.token < b.token;
    return a.slot < b.slot;
  });
  return plan;
}

Range experts_of_rank(size_t rank, size_t ranks, size_t experts) {
  if (ranks == 0) throw std::invalid_argument("experts over zero ranks");
  if (rank >= ranks)
    throw std::invalid_argument("rank " + std::to_string(rank) + " outside 0.." +
                                std::to_string(ranks - 1));
  return split_evenly(experts, ranks, rank);
}

size_t owner_of_expert(size_t expert, size_t ranks, size_t experts) {
  if (ranks == 0) throw std::invalid_argument("experts over zero ranks");
  if (expert >= experts)
    throw std::invalid_argument("expert " + std::to_string(expert) + " outside 0.." +
                                std::to_string(experts) + " - 1");
  // split_evenly: the first experts % ranks ranks hold base + 1, the rest base.
  const size_t base = experts / ranks, extra = experts % ranks;
  const size_t long_span = extra * (base + 1);
  if (expert < long_span) return expert / (base + 1);
  return extra + (expert - long_span) / base;  // base > 0 here: expert < experts
}

double load_imbalance(std::span<const size_t> per_expert) {
  if (per_expert.empty()) return 0.0;
  size_t total = 0, most = 0;
  for (size_t n : per_expert) {
    total += n;
    most = std::max(most, n);
  }
  if (total == 0) return 0.0;
  const double mean = static_cast<double>(total) / static_cast<double>(per_expert.size());
  return static_cast<double>(most) / mean;
}

bool mixture_layer(size_t layer, size_t depth) { return layer % 2 == 1 && layer + 1 < depth; }

MoeLayout moe_layout(const ModelShape& shape, size_t experts) {
  MoeLayout layout;
  const size_t w = shape.width;
  for (size_t l = 0; l < shape.depth; ++l) {
    MoeLayout::Layer layer;
    layer.mixture = mixture_layer(l, shape.depth);
    layer.offset = layout.total;
    if (!layer.mixture) {
      layout.total += w * w + w;
    } else {
      layout.total += experts * w;
      for (size_t e = 0; e < experts; ++e) {
        layer.expert_offsets.push_back(layout.total);
        layout.total += w * w + w;
      }
    }
    layout.layers.push_back(layer);
  }
  return layout;
}

std::vector<float> moe_initial_parameters(size_t total, size_t width, uint64_t seed) {
  std::vector<float> values(total);
  const float bound = 1.0f / std::sqrt(static_cast<float>(width));
  const uint64_t stream = splitmix64(seed ^ 0x6d6f652d696e6974ULL);
  for (size_t i = 0; i < total; ++i) values[i] = bound * uniform_pm1(stream, i);
  return values;
}

void add_routing_figures(EngineState& state, std::vector<double> wanted, size_t dropped,
                         StepFigures& f) {
  const size_t experts = wanted.size();
  wanted.push_back(static_cast<double>(dropped));
  if (state.world != nullptr)
    state.comm.run(state.world, 0, nullptr, [&](Communicator& comm) {
      comm.all_reduce(wanted.data(), wanted.data(), wanted.size(), DataType::kFloat64,
                      ReduceOp::kSum);
    });
  std::vector<size_t> per_expert;
  for (size_t e = 0; e < experts; ++e) {
    per_expert.push_back(static_cast<size_t>(wanted[e]));
    f.routed_tokens += per_expert.back();
  }
  f.dropped_tokens = static_cast<size_t>(wanted.back());
  f.load_imbalance = load_imbalance(per_expert);
}

}  // namespace ccscope::training_probe
