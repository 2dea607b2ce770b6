#include "ccscope/training_probe/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <numeric>
#include <stdexcept>

namespace ccscope::training_probe {

std::string_view name(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::kGpipe:
      return "gpipe";
    case PipelineSchedule::kOneFOneB:
      return "1f1b";
    case PipelineSchedule::kInterleaved:
      return "interleaved";
  }
  return "?";
}

std::optional<PipelineSchedule> parse_pipeline_schedule(std::string_view text) {
  for (PipelineSchedule s :
       {PipelineSchedule::kGpipe, PipelineSchedule::kOneFOneB, PipelineSchedule::kInterleaved}) {
    if (text == name(s)) return s;
  }
  return std::nullopt;
}

namespace {

// The fewest contiguous pieces of weights[begin, end) with none above `cap`
// (every single weight must be <= cap), greedily from the back.
size_t pieces_needed(std::span<const size_t> weights, size_t begin, size_t cap) {
  size_t pieces = 0;
  size_t end = weights.size();
  while (end > begin) {
    size_t sum = 0;
    size_t i = end;
    while (i > begin && sum + weights[i - 1] <= cap) sum += weights[--i];
    ++pieces;
    end = i;
  }
  return pieces;
}

}  // namespace

std::vector<Range> balance_stages(std::span<const size_t> weights, size_t pieces) {
  const size_t n = weights.size();
  if (pieces == 0 || pieces > n) {
    throw std::invalid_argument(fmt::format(
        "balance_stages: {} pieces of {} blocks (needs 1 <= pieces <= blocks)", pieces, n));
  }
  // The smallest feasible largest piece: binary search between the largest
  // block and the total (feasible when the greedy needs at most `pieces`;
  // fewer can always be split further since n >= pieces).
  size_t lo = *std::max_element(weights.begin(), weights.end());
  size_t hi = std::accumulate(weights.begin(), weights.end(), size_t{0});
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (pieces_needed(weights, 0, mid) <= pieces) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  const size_t cap = lo;
  // Ties: the earliest cuts. Each cut as early as it can be while the rest
  // still fits in the remaining pieces (non-empty, none above cap).
  std::vector<Range> ranges;
  size_t begin = 0;
  for (size_t p = 0; p + 1 < pieces; ++p) {
    const size_t left = pieces - p - 1;  // pieces after this one
    size_t sum = 0;
    size_t end = begin;
    for (;;) {
      sum += weights[end];
      ++end;  // the piece [begin, end) holds at least one block
      if (n - end >= left && pieces_needed(weights, end, cap) <= left) break;
      // The piece must grow; it can (an optimal partition exists from here).
      if (sum + weights[end] > cap) {
        throw std::logic_error("balance_stages: no partition under the optimum");
      }
    }
    ranges.push_back({begin, end});
    begin = end;
  }
  ranges.push_back({begin, n});
  return ranges;
}

std::string validate_pipeline(PipelineSchedule schedule, size_t stages, size_t micro_batches,
                              size_t chunks) {
  if (stages < 1) return "pipeline stages must be at least 1";
  if (micro_batches < 1) return "pipeline micro-batches must be at least 1";
  if (chunks < 1) return "pipeline chunks must be at least 1";
  if (chunks > 1 && schedule != PipelineSchedule::kInterleaved) {
    return fmt::format("{} chunks per stage need the interleaved schedule, not {}", chunks,
                       name(schedule));
  }
  if (schedule == PipelineSchedule::kInterleaved && micro_batches % stages != 0) {
    return fmt::format(
        "the interleaved schedule needs micro-batches ({}) to be a multiple of the stages ({})",
        micro_batches, stages);
  }
  return "";
}

namespace {

void require_valid(PipelineSchedule schedule, size_t stages, size_t stage, size_t micro_batches,
                   size_t chunks) {
  const std::string why = validate_pipeline(schedule, stages, micro_batches, chunks);
  if (!why.empty()) throw std::invalid_argument(why);
  if (stage >= stages) {
    throw std::invalid_argument(fmt::format("pipeline stage {} of {}", stage, stages));
  }
}

using Kind = PipelinePass::Kind;
using TKind = PipelineTransfer::Kind;

// Warm-up forwards of a stage (clamped to the forwards it runs).
size_t warmup_forwards(PipelineSchedule schedule, size_t stages, size_t stage, size_t micro_batches,
                       size_t chunks) {
  const size_t total = micro_batches * chunks;
  switch (schedule) {
    case PipelineSchedule::kGpipe:
      return total;
    case PipelineSchedule::kOneFOneB:
      return std::min(stages - stage - 1, total);
    case PipelineSchedule::kInterleaved:
      return std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, total);
  }
  return total;
}

// Megatron-LM's get_model_chunk_id / microbatch id in model chunk: the k-th
// forward (or backward) of a stage in the interleaved order.
PipelinePass interleaved_pass(Kind kind, size_t k, size_t stages, size_t chunks) {
  const size_t group = stages * chunks;
  const size_t micro_batch = (k / group) * stages + k % stages;
  size_t chunk = (k % group) / stages;
  if (kind == Kind::kBackward) chunk = chunks - 1 - chunk;
  return {kind, micro_batch, chunk};
}

// The passes of a stage cut into units: the passes run between two batches.
// GPipe and 1F1B: one pass a unit. Interleaved: Megatron-LM's grouping, one
// forward and one backward a unit in the steady state (see pipeline.h).
std::vector<std::vector<PipelinePass>> pipeline_units(PipelineSchedule schedule, size_t stages,
                                                      size_t stage, size_t micro_batches,
                                                      size_t chunks) {
  const std::vector<PipelinePass> passes =
      pipeline_passes(schedule, stages, stage, micro_batches, chunks);
  std::vector<std::vector<PipelinePass>> units;
  if (schedule != PipelineSchedule::kInterleaved) {
    for (const PipelinePass& p : passes) units.push_back({p});
    return units;
  }
  const size_t total = micro_batches * chunks;
  const size_t warmup = warmup_forwards(schedule, stages, stage, micro_batches, chunks);
  const size_t steady = total - warmup;
  size_t i = 0;
  for (size_t k = 0; k < warmup; ++k) units.push_back({passes[i++]});
  for (size_t k = 0; k < steady; ++k, i += 2) units.push_back({passes[i], passes[i + 1]});
  while (i < passes.size()) units.push_back({passes[i++]});
  return units;
}

// The stages of the adjacent virtual stages (virtual stage v = chunk * N +
// stage; v + 1 is on the next stage, in the next chunk after the last stage).
size_t next_stage(size_t stages, size_t stage) { return (stage + 1) % stages; }
size_t previous_stage(size_t stages, size_t stage) { return (stage + stages - 1) % stages; }

// What a pass receives before it runs (none at the ends of the pipeline).
std::optional<PipelineTransfer> pass_input(const PipelinePass& p, size_t stages, size_t stage,
                                           size_t chunks) {
  const size_t virtual_stage = p.chunk * stages + stage;
  if (p.kind == Kind::kForward) {
    if (virtual_stage == 0) return std::nullopt;
    return PipelineTransfer{TKind::kActivation, p.micro_batch, p.chunk,
                            previous_stage(stages, stage)};
  }
  if (virtual_stage + 1 == stages * chunks) return std::nullopt;  // from the loss
  return PipelineTransfer{TKind::kGradient, p.micro_batch, p.chunk, next_stage(stages, stage)};
}

// What a pass sends after it ran (none at the ends of the pipeline).
std::optional<PipelineTransfer> pass_output(const PipelinePass& p, size_t stages, size_t stage,
                                            size_t chunks) {
  const size_t virtual_stage = p.chunk * stages + stage;
  if (p.kind == Kind::kForward) {
    if (virtual_stage + 1 == stages * chunks) return std::nullopt;  // into the loss
    return PipelineTransfer{TKind::kActivation, p.micro_batch, p.chunk, next_stage(stages, stage)};
  }
  if (virtual_stage == 0) return std::nullopt;
  return PipelineTransfer{TKind::kGradient, p.micro_batch, p.chunk, previous_stage(stages, stage)};
}

}  // namespace

std::vector<PipelinePass> pipeline_passes(PipelineSchedule schedule, size_t stages, size_t stage,
                                          size_t micro_batches, size_t chunks) {
  require_valid(schedule, stages, stage, micro_batches, chunks);
  const size_t total = micro_batches * chunks;
  const size_t warmup = warmup_forwards(schedule, stages, stage, micro_batches, chunks);
  auto forward = [&](size_t k) {
    return schedule == PipelineSchedule::kInterleaved
               ? interleaved_pass(Kind::kForward, k, stages, chunks)
               : PipelinePass{Kind::kForward, k, 0};
  };
  auto backward = [&](size_t k) {
    return schedule == PipelineSchedule::kInterleaved
               ? interleaved_pass(Kind::kBackward, k, stages, chunks)
               : PipelinePass{Kind::kBackward, k, 0};
  };
  std::vector<PipelinePass> passes;
  passes.reserve(2 * total);
  for (size_t k = 0; k < warmup; ++k) passes.push_back(forward(k));
  for (size_t k = 0; k + warmup < total; ++k) {
    passes.push_back(forward(k + warmup));
    passes.push_back(backward(k));
  }
  for (size_t k = total - warmup; k < total; ++k) passes.push_back(backward(k));
  return passes;
}

size_t peak_in_flight(std::span<const PipelinePass> passes) {
  size_t held = 0;
  size_t peak = 0;
  for (const PipelinePass& p : passes) {
    if (p.kind == Kind::kForward) {
      peak = std::max(peak, ++held);
    } else if (held > 0) {
      --held;
    }
  }
  return peak;
}

double textbook_bubble(size_t stages, size_t micro_batches, size_t chunks) {
  const double idle = static_cast<double>(stages) - 1.0;
  return idle / (static_cast<double>(chunks) * static_cast<double>(micro_batches) + idle);
}

std::vector<PipelineStep> pipeline_plan(PipelineSchedule schedule, size_t stages, size_t stage,
                                        size_t micro_batches, size_t chunks) {
  const std::vector<std::vector<PipelinePass>> units =
      pipeline_units(schedule, stages, stage, micro_batches, chunks);
  std::vector<PipelineStep> plan;
  const std::vector<PipelinePass>* previous = nullptr;
  auto post_outputs = [&](PipelineStep& step) {
    if (previous == nullptr) return;
    for (const PipelinePass& p : *previous) {
      if (auto t = pass_output(p, stages, stage, chunks)) step.sends.push_back(*t);
    }
  };
  for (const std::vector<PipelinePass>& unit : units) {
    PipelineStep step;
    post_outputs(step);
    for (const PipelinePass& p : unit) {
      if (auto t = pass_input(p, stages, stage, chunks)) step.recvs.push_back(*t);
    }
    step.pass = unit.front();
    plan.push_back(std::move(step));
    for (size_t i = 1; i < unit.size(); ++i) plan.push_back(PipelineStep{{}, {}, unit[i]});
    previous = &unit;
  }
  PipelineStep last;
  post_outputs(last);
  plan.push_back(std::move(last));
  return plan;
}

namespace {

std::string describe(const PipelineTransfer& t) {
  return fmt::format("{} (micro-batch {}, chunk {})",
                     t.kind == TKind::kActivation ? "activation" : "gradient", t.micro_batch,
                     t.chunk);
}

// Whether stage `from`'s send `s` is what stage `to`'s receive `r` expects:
// same tensor, and the receiving chunk is the adjacent virtual stage.
bool partners(const PipelineTransfer& s, size_t from, const PipelineTransfer& r, size_t to,
              size_t stages) {
  if (s.kind != r.kind || s.micro_batch != r.micro_batch) return false;
  const size_t sender = s.chunk * stages + from;
  const size_t receiver = r.chunk * stages + to;
  return s.kind == TKind::kActivation ? receiver == sender + 1 : receiver + 1 == sender;
}

}  // namespace

PipelineSimulation simulate_plans(const std::vector<std::vector<PipelineStep>>& plans,
                                  double forward_cost, double backward_cost) {
  const size_t n = plans.size();
  PipelineSimulation sim;
  sim.idle.assign(n, 0.0);
  for (size_t s = 0; s < n; ++s) {
    for (const PipelineStep& step : plans[s]) {
      for (const auto* list : {&step.sends, &step.recvs}) {
        for (const PipelineTransfer& t : *list) {
          if (t.peer >= n) {
            sim.problem = fmt::format("stage {} names peer {} of {} stages", s, t.peer, n);
            return sim;
          }
        }
      }
    }
  }
  // A posted transfer: which stage, which step, which entry.
  struct Posted {
    size_t stage;
    size_t step;
    size_t index;
  };
  // Per directed pair (from * n + to): the sends and receives posted and not
  // yet matched, in posting order (messages between a pair match in order).
  std::vector<std::deque<Posted>> sends(n * n), recvs(n * n);
  struct State {
    size_t step = 0;
    double posted_at = 0;   // when the current batch was posted
    size_t unmatched = 0;   // transfers of the current batch without a partner
    double matched_at = 0;  // when the last of them found its partner
    double busy = 0;
    bool done = false;
    std::vector<char> sent, received;  // which of the current batch's transfers matched
  };
  std::vector<State> state(n);

  auto match = [&](size_t from, size_t to) -> bool {
    auto& sq = sends[from * n + to];
    auto& rq = recvs[from * n + to];
    while (!sq.empty() && !rq.empty()) {
      const Posted a = sq.front();
      const Posted b = rq.front();
      sq.pop_front();
      rq.pop_front();
      const PipelineTransfer& st = plans[a.stage][a.step].sends[a.index];
      const PipelineTransfer& rt = plans[b.stage][b.step].recvs[b.index];
      if (!partners(st, from, rt, to, n)) {
        sim.problem = fmt::format(
            "stage {} step {} sends {} to stage {}, whose receive in order (step {}) is {} from "
            "stage {}",
            from, a.step, describe(st), to, b.step, describe(rt), from);
        return false;
      }
      const double at = std::max(state[from].posted_at, state[to].posted_at);
      state[from].sent[a.index] = 1;
      state[to].received[b.index] = 1;
      for (size_t s : {from, to}) {
        --state[s].unmatched;
        state[s].matched_at = std::max(state[s].matched_at, at);
      }
    }
    return true;
  };
  // Posts stage s's current batch at its posted_at; false on a mismatch.
  auto post = [&](size_t s) -> bool {
    State& st = state[s];
    const PipelineStep& step = plans[s][st.step];
    st.unmatched = step.sends.size() + step.recvs.size();
    st.matched_at = st.posted_at;
    st.sent.assign(step.sends.size(), 0);
    st.received.assign(step.recvs.size(), 0);
    for (size_t i = 0; i < step.sends.size(); ++i) {
      sends[s * n + step.sends[i].peer].push_back({s, st.step, i});
    }
    for (size_t i = 0; i < step.recvs.size(); ++i) {
      recvs[step.recvs[i].peer * n + s].push_back({s, st.step, i});
    }
    for (const PipelineTransfer& t : step.sends) {
      if (!match(s, t.peer)) return false;
    }
    for (const PipelineTransfer& t : step.recvs) {
      if (!match(t.peer, s)) return false;
    }
    return true;
  };

  for (size_t s = 0; s < n; ++s) {
    if (plans[s].empty()) {
      state[s].done = true;
    } else if (!post(s)) {
      return sim;
    }
  }
  for (;;) {
    bool progressed = false;
    bool all_done = true;
    for (size_t s = 0; s < n; ++s) {
      State& st = state[s];
      // Run this stage as far as it goes without its peers.
      while (!st.done && st.unmatched == 0) {
        progressed = true;
        double t = st.matched_at;
        if (const auto& pass = plans[s][st.step].pass) {
          const double cost = pass->kind == Kind::kForward ? forward_cost : backward_cost;
          st.busy += cost;
          t += cost;
        }
        st.posted_at = t;
        if (++st.step == plans[s].size()) {
          st.done = true;
          sim.makespan = std::max(sim.makespan, t);
        } else if (!post(s)) {
          return sim;
        }
      }
      all_done = all_done && st.done;
    }
    if (all_done) break;
    if (!progressed) {
      sim.deadlocked = true;
      std::string waits;
      for (size_t s = 0; s < n; ++s) {
        if (state[s].done) continue;
        const PipelineStep& step = plans[s][state[s].step];
        waits += fmt::format("{}stage {} waits in step {} of {}", waits.empty() ? "" : "; ", s,
                             state[s].step, plans[s].size());
        for (size_t i = 0; i < step.sends.size(); ++i) {
          if (state[s].sent[i]) continue;
          waits +=
              fmt::format(" to send {} to stage {}", describe(step.sends[i]), step.sends[i].peer);
        }
        for (size_t i = 0; i < step.recvs.size(); ++i) {
          if (state[s].received[i]) continue;
          waits += fmt::format(" to receive {} from stage {}", describe(step.recvs[i]),
                               step.recvs[i].peer);
        }
      }
      sim.problem = "deadlock: " + waits;
      return sim;
    }
  }
  for (size_t s = 0; s < n; ++s) sim.idle[s] = sim.makespan - state[s].busy;
  return sim;
}

PipelineSimulation simulate_pipeline(PipelineSchedule schedule, size_t stages, size_t micro_batches,
                                     size_t chunks, double forward_cost, double backward_cost) {
  require_valid(schedule, stages, 0, micro_batches, chunks);
  std::vector<std::vector<PipelineStep>> plans;
  for (size_t s = 0; s < stages; ++s) {
    plans.push_back(pipeline_plan(schedule, stages, s, micro_batches, chunks));
  }
  return simulate_plans(plans, forward_cost, backward_cost);
}

}  // namespace ccscope::training_probe
