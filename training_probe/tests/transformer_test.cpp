// The transformer (transformer.h): its gradients against central finite
// differences, the float model against its float64 reference, the teacher's
// data, and Megatron's tensor and sequence parallelism at 2 and 4 in-process
// ranks (ccscope's ring algorithms on the hostile in-process transport)
// against one rank, recomputation against none, and the tensor group's
// traffic per block against the formula.
#include "ccscope/training_probe/transformer.h"

#include <algorithm>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/group_point_to_point.h"
#include "ccscope/collectives/in_process_transport.h"
#include "ccscope/training_probe/accounting.h"
#include "ccscope/training_probe/data.h"
#include "ccscope/training_probe/equivalence.h"
#include "ccscope/training_probe/parallel_trainer.h"
#include "ccscope/training_probe/train_setup.h"
#include "ccscope/training_probe/trainer.h"

namespace ccscope::training_probe {
namespace {

// Names of the parameter groups, for messages: each element's group.
std::vector<std::string> group_names(const TransformerShape& s) {
  const TransformerLayout l = transformer_layout(s);
  std::vector<std::string> names(l.total);
  auto name_range = [&](size_t begin, size_t n, const std::string& what) {
    for (size_t i = begin; i < begin + n; ++i) names[i] = what;
  };
  const BlockLayout& b = l.block;
  const size_t h = s.hidden, f = s.ffn_size();
  name_range(l.tok_emb, s.vocab * h, "tok_emb");
  name_range(l.pos_emb, s.seq_len * h, "pos_emb");
  for (size_t i = 0; i < s.layers; ++i) {
    const size_t o = l.blocks[i];
    const std::string p = "block" + std::to_string(i) + ".";
    name_range(o + b.ln1_w, h, p + "ln1.w");
    name_range(o + b.ln1_b, h, p + "ln1.b");
    name_range(o + b.qkv_w, 3 * h * h, p + "qkv.w");
    name_range(o + b.qkv_b, 3 * h, p + "qkv.b");
    name_range(o + b.proj_w, h * h, p + "proj.w");
    name_range(o + b.proj_b, h, p + "proj.b");
    name_range(o + b.ln2_w, h, p + "ln2.w");
    name_range(o + b.ln2_b, h, p + "ln2.b");
    name_range(o + b.fc1_w, f * h, p + "fc1.w");
    name_range(o + b.fc1_b, f, p + "fc1.b");
    name_range(o + b.fc2_w, h * f, p + "fc2.w");
    name_range(o + b.fc2_b, h, p + "fc2.b");
  }
  name_range(l.lnf_w, h, "lnf.w");
  name_range(l.lnf_b, h, "lnf.b");
  name_range(l.head, s.vocab * h, "head.w");
  return names;
}

// Initial parameters with the layer norms' 1s and 0s (and every other value)
// moved by a random amount, so that no group sits at a special point.
std::vector<float> jittered_parameters(const TransformerShape& s, uint64_t seed) {
  std::vector<float> p = transformer_initial_parameters(s, seed);
  for (size_t i = 0; i < p.size(); ++i) p[i] += 0.2f * uniform_pm1(seed + 99, i);
  return p;
}

TEST(Transformer, LayoutIsTheDocumentedOrder) {
  const TransformerShape s{11, 6, 8, 2, 3, 12};
  const TransformerLayout l = transformer_layout(s);
  const size_t h = 8, f = 12;
  const size_t block = 2 * h + 3 * h * h + 3 * h + h * h + h + 2 * h + f * h + f + h * f + h;
  EXPECT_EQ(l.block.size, block);
  EXPECT_EQ(l.total, 11 * h + 6 * h + 3 * block + 2 * h + 11 * h);
  EXPECT_EQ(transformer_parameter_count(s), l.total);
  ASSERT_EQ(l.units.size(), 5u);
  for (size_t u = 1; u < l.units.size(); ++u) EXPECT_EQ(l.units[u].begin, l.units[u - 1].end);
  EXPECT_EQ(l.units.back().end, l.total);
  // A tensor-parallel rank's shard is its layout's size, and the shards of a
  // split matrix add up to it.
  for (size_t tp : {2u, 4u}) {
    if (s.heads % tp) continue;
    const TransformerLayout mine = transformer_layout(s, tp, 0);
    EXPECT_EQ(transformer_shard(s, std::vector<float>(l.total), tp, tp - 1).size(), mine.total);
    EXPECT_EQ(mine.block.size * tp - block, (tp - 1) * (2 * h + h + 2 * h + h));
  }
  EXPECT_NE(transformer_problem(s, 4, false), "");  // 2 heads over 4 ranks
  EXPECT_EQ(transformer_problem(s, 2, false), "");
  EXPECT_EQ(transformer_problem({11, 6, 8, 2, 3, 12}, 2, true), "");
  EXPECT_NE(transformer_problem({11, 5, 8, 2, 3, 12}, 2, true), "");  // seq 5 over 2
}

// Every rank's shard, concatenated, gives back the whole vector; a replicated
// element comes from rank 0, and a changed element of a split matrix lands in
// its one place.
TEST(Transformer, UnshardInvertsTheShards) {
  const TransformerShape s{11, 6, 8, 4, 2, 12};
  const size_t total = transformer_parameter_count(s);
  std::vector<float> full(total);
  for (size_t i = 0; i < total; ++i) full[i] = static_cast<float>(i);
  for (size_t tp : {1u, 2u, 4u}) {
    std::vector<float> ranks;
    for (size_t r = 0; r < tp; ++r) {
      const std::vector<float> mine = transformer_shard(s, full, tp, r);
      ranks.insert(ranks.end(), mine.begin(), mine.end());
    }
    EXPECT_EQ(transformer_unshard(s, ranks, tp), full) << "tp " << tp;
    if (tp == 1) continue;
    const size_t local = ranks.size() / tp;
    const std::vector<float> unique = transformer_unique(s, tp, tp - 1);
    // The last rank's first element it alone holds, and its first copy.
    const size_t split = static_cast<size_t>(
        std::find(unique.begin(), unique.end(), 1.0f) - unique.begin());
    const size_t copy = static_cast<size_t>(
        std::find(unique.begin(), unique.end(), 0.0f) - unique.begin());
    std::vector<float> changed = ranks;
    changed[(tp - 1) * local + split] = -1.0f;
    changed[(tp - 1) * local + copy] = -2.0f;
    const std::vector<float> back = transformer_unshard(s, changed, tp);
    EXPECT_EQ(std::count(back.begin(), back.end(), -1.0f), 1) << "tp " << tp;
    EXPECT_EQ(std::count(back.begin(), back.end(), -2.0f), 0) << "tp " << tp;  // rank 0's copy
  }
  EXPECT_THROW(transformer_unshard(s, std::vector<float>(total + 2), 2), std::invalid_argument);
}

TEST(Transformer, TeacherDataIsDeterministicAndLearnable) {
  const TransformerShape s{13, 9, 8, 2, 1};
  const TokenDataset a = make_token_dataset(50, s, 4);
  const TokenDataset b = make_token_dataset(50, s, 4);
  const TokenDataset c = make_token_dataset(50, s, 5);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_NE(a.tokens, c.tokens);
  // The next token is a function of the two before it, the same in every sequence.
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> rule;
  for (size_t n = 0; n < a.samples; ++n) {
    const auto t = a.sequence(n);
    for (size_t i = 2; i < t.size(); ++i) {
      ASSERT_LT(t[i], s.vocab);
      const auto [it, fresh] = rule.emplace(std::make_pair(t[i - 2], t[i - 1]), t[i]);
      EXPECT_EQ(it->second, t[i]);
    }
  }
  EXPECT_GT(rule.size(), 20u);
}

// Every parameter's float64 gradient against a central difference of the
// float64 loss. eps 1e-6: the truncation error (eps^2 f''' ~ 1e-12) and the
// rounding error (1e-16 / eps ~ 1e-10) are far below the 1e-7 + 1e-6 |g|
// allowed, while a wrong term in any backward (a softmax's missing
// rowsum, a transposed GEMM) is off by the gradient's own size.
TEST(Transformer, GradientsMatchFiniteDifferencesForEveryGroup) {
  const TransformerShape s{7, 5, 8, 2, 2, 12};
  const std::vector<float> start = jittered_parameters(s, 3);
  std::vector<double> p(start.begin(), start.end());
  const size_t batch = 3;
  const TokenDataset data = make_token_dataset(batch, s, 8);
  const std::vector<uint32_t> seqs = gather_sequences(data, std::vector<size_t>{0, 1, 2});
  std::vector<double> grads, scratch;
  const double loss = transformer_loss_and_gradients_f64(s, p, seqs, batch, grads);
  EXPECT_GT(loss, 0.5);
  const std::vector<std::string> names = group_names(s);
  std::map<std::string, double> largest;  // per group, the largest |gradient|
  size_t failures = 0;
  const double eps = 1e-6;
  for (size_t i = 0; i < p.size(); ++i) {
    const double keep = p[i];
    p[i] = keep + eps;
    const double up = transformer_loss_and_gradients_f64(s, p, seqs, batch, scratch);
    p[i] = keep - eps;
    const double down = transformer_loss_and_gradients_f64(s, p, seqs, batch, scratch);
    p[i] = keep;
    const double numeric = (up - down) / (2 * eps);
    if (std::abs(grads[i] - numeric) > 1e-7 + 1e-6 * std::abs(numeric) && failures++ < 10)
      ADD_FAILURE() << names[i] << " element " << i << ": backward " << grads[i]
                    << ", finite difference " << numeric;
    largest[names[i]] = std::max(largest[names[i]], std::abs(grads[i]));
  }
  EXPECT_EQ(failures, 0u);
  // Every group has a gradient to check (none is zero by construction).
  EXPECT_EQ(largest.size(), 5 + 12 * s.layers);
  for (const auto& [group, g] : largest) EXPECT_GT(g, 1e-4) << group;
}

// The float model is the same arithmetic as the float64 reference.
TEST(Transformer, FloatModelMatchesItsFloat64Reference) {
  set_compute_threads(1);
  const TransformerShape s{9, 6, 16, 4, 2};
  const std::vector<float> p = jittered_parameters(s, 5);
  const size_t batch = 4;
  const TokenDataset data = make_token_dataset(batch, s, 2);
  const std::vector<uint32_t> seqs = gather_sequences(data, std::vector<size_t>{0, 1, 2, 3});
  std::vector<double> ref;
  const double ref_loss = transformer_loss_and_gradients_f64(
      s, std::vector<double>(p.begin(), p.end()), seqs, batch, ref);
  const Transformer model(s, Precision::kFloat32);
  std::vector<float> g(p.size(), 0.0f);
  FlatUnits units(model.layout(), p.data(), g.data());
  const double loss = model.train_micro_batch(seqs, batch, batch, 1.0f, units, nullptr);
  EXPECT_NEAR(loss, ref_loss, 1e-5 * ref_loss);
  double largest = 0;
  for (double v : ref) largest = std::max(largest, std::abs(v));
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], ref[i], 1e-4 * largest) << i;
}

// Plain SGD on the teacher's data: the loss falls from about ln V (the mean
// of the last 10 steps' against the first's; the teacher's rule needs two
// tokens combined, so it falls slowly and not monotonically).
TEST(Transformer, LossFallsUnderSgd) {
  set_compute_threads(1);
  const TransformerShape s{16, 8, 32, 4, 2};
  const Transformer model(s, Precision::kFloat32);
  std::vector<float> p = transformer_initial_parameters(s, 1);
  const size_t batch = 16, steps = 150;
  const TokenDataset data = make_token_dataset(8 * batch, s, 1);
  double first = 0, last = 0;
  for (size_t step = 0; step < steps; ++step) {
    const std::vector<size_t> samples = batch_samples(data.samples, 1, 0, batch, 1, step);
    std::vector<float> g(p.size(), 0.0f);
    FlatUnits units(model.layout(), p.data(), g.data());
    const double loss = model.train_micro_batch(gather_sequences(data, samples), batch, batch, 1.0f,
                                                units, nullptr);
    if (step == 0) first = loss;
    if (step + 10 >= steps) last += loss / 10;
    for (size_t i = 0; i < p.size(); ++i) p[i] -= 0.3f * g[i];
  }
  EXPECT_NEAR(first, std::log(16.0), 0.7);
  EXPECT_LT(last, 0.85 * first);
}

// ------------------------------------------------------------ tensor parallel

// The tensor group over a Communicator, counting each operation's elements
// (of the whole tensor: an all-gather's output, a reduce-scatter's input).
class CountingGroup final : public TensorGroup {
 public:
  explicit CountingGroup(Communicator& c) : c_(c) {}
  void all_reduce(std::vector<float>& v) override {
    c_.all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
    ++all_reduces;
    all_reduce_elements += v.size();
  }
  void all_gather(std::span<const float> mine, std::vector<float>& full) override {
    full.resize(mine.size() * static_cast<size_t>(c_.size()));
    c_.all_gather(mine.data(), full.data(), mine.size(), DataType::kFloat32);
    ++all_gathers;
    all_gather_elements += full.size();
  }
  void reduce_scatter(std::span<const float> full, std::vector<float>& mine) override {
    mine.resize(full.size() / static_cast<size_t>(c_.size()));
    c_.reduce_scatter(full.data(), mine.data(), mine.size(), DataType::kFloat32, ReduceOp::kSum);
    ++reduce_scatters;
    reduce_scatter_elements += full.size();
  }
  size_t all_reduces = 0, all_gathers = 0, reduce_scatters = 0;
  size_t all_reduce_elements = 0, all_gather_elements = 0, reduce_scatter_elements = 0;

 private:
  Communicator& c_;
};

struct RankRun {
  double loss = 0;
  std::vector<float> gradients;  // the rank's vector
  size_t all_reduces = 0, all_gathers = 0, reduce_scatters = 0;
  size_t all_reduce_elements = 0, all_gather_elements = 0, reduce_scatter_elements = 0;
};

const TransformerShape kTpShape{11, 8, 16, 4, 2, 32};
constexpr size_t kTpBatch = 3;

std::vector<uint32_t> tp_sequences() {
  const TokenDataset data = make_token_dataset(kTpBatch, kTpShape, 6);
  return gather_sequences(data, std::vector<size_t>{0, 1, 2});
}

// One micro-batch on `tp` in-process ranks; under sequence parallelism the
// partial gradients summed over the group afterwards (counted apart).
std::vector<RankRun> run_tensor_parallel(size_t tp, bool sp, Recompute recompute,
                                         const std::vector<float>& full) {
  const std::vector<uint32_t> seqs = tp_sequences();
  std::vector<RankRun> runs(tp);
  InProcessTransport::run(static_cast<int>(tp), [&](PointToPoint& p2p) {
    set_compute_threads(1);
    const size_t me = static_cast<size_t>(p2p.rank());
    auto comm = make_ring_communicator(p2p);
    CountingGroup group(*comm);
    const Transformer model(kTpShape, Precision::kFloat32, {tp, me, sp, recompute});
    const std::vector<float> p = transformer_shard(kTpShape, full, tp, me);
    std::vector<float> g(p.size(), 0.0f);
    FlatUnits units(model.layout(), p.data(), g.data());
    RankRun& run = runs[me];
    run.loss = model.train_micro_batch(seqs, kTpBatch, kTpBatch, 1.0f, units, &group);
    run.all_reduces = group.all_reduces;
    run.all_gathers = group.all_gathers;
    run.reduce_scatters = group.reduce_scatters;
    run.all_reduce_elements = group.all_reduce_elements;
    run.all_gather_elements = group.all_gather_elements;
    run.reduce_scatter_elements = group.reduce_scatter_elements;
    if (sp && tp > 1)
      for (const Range& r : sequence_parallel_partial(kTpShape, tp))
        comm->all_reduce(g.data() + r.begin, g.data() + r.begin, r.size(), DataType::kFloat32,
                         ReduceOp::kSum);
    run.gradients = std::move(g);
  });
  return runs;
}

// One rank's loss and gradients of kTpShape.
RankRun run_single(const std::vector<float>& full) {
  const Transformer model(kTpShape, Precision::kFloat32);
  std::vector<float> g(full.size(), 0.0f);
  FlatUnits units(model.layout(), full.data(), g.data());
  const std::vector<uint32_t> seqs = tp_sequences();
  RankRun run;
  run.loss = model.train_micro_batch(seqs, kTpBatch, kTpBatch, 1.0f, units, nullptr);
  run.gradients = std::move(g);
  return run;
}

void expect_equivalent(size_t tp, bool sp) {
  set_compute_threads(1);
  const std::vector<float> full = jittered_parameters(kTpShape, 4);
  const RankRun single = run_single(full);
  double largest = 0;
  for (float v : single.gradients) largest = std::max(largest, std::abs(double{v}));
  const std::vector<RankRun> runs = run_tensor_parallel(tp, sp, Recompute::kNone, full);
  for (size_t r = 0; r < tp; ++r) {
    EXPECT_NEAR(runs[r].loss, single.loss, 1e-6 * single.loss) << "rank " << r;
    const std::vector<float> expected = transformer_shard(kTpShape, single.gradients, tp, r);
    ASSERT_EQ(runs[r].gradients.size(), expected.size());
    // Float sums in another order: a few units of float rounding of the largest gradient.
    for (size_t i = 0; i < expected.size(); ++i)
      ASSERT_NEAR(runs[r].gradients[i], expected[i], 1e-5 * largest)
          << "rank " << r << " element " << i;
  }
}

TEST(TransformerTensorParallel, TwoRanksGiveOneRanksLossAndGradients) {
  expect_equivalent(2, false);
}
TEST(TransformerTensorParallel, FourRanksGiveOneRanksLossAndGradients) {
  expect_equivalent(4, false);
}
TEST(TransformerSequenceParallel, TwoRanksGiveOneRanksLossAndGradients) {
  expect_equivalent(2, true);
}
TEST(TransformerSequenceParallel, FourRanksGiveOneRanksLossAndGradients) {
  expect_equivalent(4, true);
}

// Recomputation reruns the same operations on the same values: bit-identical.
TEST(TransformerRecompute, SelectiveAndFullGiveBitIdenticalGradients) {
  set_compute_threads(1);
  const std::vector<float> full = jittered_parameters(kTpShape, 9);
  for (const auto& [tp, sp] : {std::pair<size_t, bool>{1, false}, {2, false}, {2, true}}) {
    const std::vector<RankRun> none = run_tensor_parallel(tp, sp, Recompute::kNone, full);
    for (Recompute r : {Recompute::kSelective, Recompute::kFull}) {
      const std::vector<RankRun> again = run_tensor_parallel(tp, sp, r, full);
      for (size_t k = 0; k < tp; ++k) {
        EXPECT_EQ(again[k].loss, none[k].loss) << name(r) << " tp " << tp << " sp " << sp;
        EXPECT_EQ(again[k].gradients, none[k].gradients) << name(r) << " tp " << tp << " sp " << sp;
      }
    }
  }
}

// What each recomputation mode keeps for backward, per block: none every
// activation (x, ln1's statistics and output, Q K V, the s^2 probabilities
// per head, the attention output, x1, ln2's, fc1's output and its GELU);
// selective all but the probabilities; full the block's input alone.
TEST(TransformerRecompute, HeldActivationsAreWhatEachModeKeeps) {
  const TransformerShape s = kTpShape;
  const std::vector<float> p = jittered_parameters(s, 2);
  const std::vector<uint32_t> seqs = tp_sequences();
  std::map<Recompute, size_t> held;
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    const Transformer model(s, Precision::kFloat32, {1, 0, false, r});
    std::vector<float> g(p.size(), 0.0f);
    FlatUnits units(model.layout(), p.data(), g.data());
    model.train_micro_batch(seqs, kTpBatch, kTpBatch, 1.0f, units, nullptr, &held[r]);
  }
  const size_t L = s.layers, R = s.seq_len * kTpBatch, h = s.hidden, f = s.ffn_size();
  const size_t probs = kTpBatch * s.heads * s.seq_len * s.seq_len;
  EXPECT_EQ(held[Recompute::kNone],
            L * (4 * R * h + 4 * R + 3 * R * h + R * h + 2 * R * f + probs));
  EXPECT_EQ(held[Recompute::kNone] - held[Recompute::kSelective], L * probs);
  EXPECT_EQ(held[Recompute::kFull], L * R * h);
}

// Megatron's count: 4 all-reduces of s x b x h per block per micro-batch (2
// forward, 2 backward); sequence parallel moves the same bytes as 4
// all-gathers and 4 reduce-scatters of s x b x h (a ring all-reduce is a
// reduce-scatter then an all-gather), plus one all-gather before the final
// norm. Full recomputation reruns the forward's 2 per block.
TEST(TransformerTensorParallel, TrafficPerBlockMatchesTheFormula) {
  set_compute_threads(1);
  const std::vector<float> full = jittered_parameters(kTpShape, 1);
  const size_t L = kTpShape.layers;
  const size_t sbh = kTpShape.seq_len * kTpBatch * kTpShape.hidden;
  for (size_t tp : {2u, 4u}) {
    for (const RankRun& r : run_tensor_parallel(tp, false, Recompute::kNone, full)) {
      EXPECT_EQ(r.all_reduces, 4 * L);
      EXPECT_EQ(r.all_reduce_elements, 4 * L * sbh);
      EXPECT_EQ(r.all_gathers + r.reduce_scatters, 0u);
    }
    for (const RankRun& r : run_tensor_parallel(tp, false, Recompute::kSelective, full))
      EXPECT_EQ(r.all_reduces, 4 * L);
    for (const RankRun& r : run_tensor_parallel(tp, false, Recompute::kFull, full))
      EXPECT_EQ(r.all_reduces, 6 * L);
    for (const RankRun& r : run_tensor_parallel(tp, true, Recompute::kNone, full)) {
      EXPECT_EQ(r.all_reduces, 0u);
      EXPECT_EQ(r.reduce_scatters, 4 * L);
      EXPECT_EQ(r.all_gathers, 4 * L + 1);
      // Ring bytes: all-reduce 2 N (n-1)/n, all-gather and reduce-scatter N (n-1)/n each.
      EXPECT_EQ(r.reduce_scatter_elements + r.all_gather_elements - sbh, 2 * 4 * L * sbh);
    }
    for (const RankRun& r : run_tensor_parallel(tp, true, Recompute::kFull, full)) {
      EXPECT_EQ(r.reduce_scatters, 6 * L);
      EXPECT_EQ(r.all_gathers, 6 * L + 1);
    }
  }
}

// ------------------------------------------------------------- the engine

TrainOptions transformer_options(Strategy strategy) {
  TrainOptions o;
  o.strategy = strategy;
  o.model = TrainedModel::kTransformer;
  o.transformer = {16, 8, 16, 4, 2, 32};
  o.global_batch = 8;
  o.steps = 12;
  o.optimizer.kind = OptimizerKind::kAdam;
  o.optimizer.lr = 0.01;
  o.bucket_bytes = 4000;  // several buckets, boundaries inside units
  o.first_bucket_bytes = 1000;
  o.check_consistency = true;
  o.timeout = std::chrono::seconds(20);
  return o;
}

// The data-parallel strategies run the transformer through the one engine:
// single's losses within the fp32 tolerance, parameters agreeing, the bytes
// of the formula.
TEST(TransformerEngine, DataParallelStrategiesMatchSingle) {
  set_compute_threads(1);
  const TrainOptions base = transformer_options(Strategy::kDdp);
  const TrainResult reference = train_single(base);
  EXPECT_LT(reference.steps.back().loss, reference.steps.front().loss);
  EXPECT_EQ(reference.parameters, transformer_parameter_count(base.transformer));
  for (Strategy strategy : {Strategy::kDdp, Strategy::kZero1, Strategy::kZero2, Strategy::kZero3}) {
    TrainOptions o = base;
    o.strategy = strategy;
    std::vector<TrainResult> results(2);
    InProcessTransport::run(2, [&](PointToPoint& p2p) {
      set_compute_threads(1);
      auto comm = make_ring_communicator(p2p);
      results[static_cast<size_t>(p2p.rank())] = train(*comm, o);
    });
    const EquivalenceResult eq =
        compare_losses(losses(results[0]), losses(reference), loss_tolerance(o.precision));
    EXPECT_TRUE(eq.equivalent) << name(strategy) << ": " << eq.summary();
    for (const StepFigures& f : results[0].steps) EXPECT_TRUE(f.consistent) << name(strategy);
    const double expected =
        expected_bytes_per_step(strategy, results[0].communicated_elements, 2, 4);
    EXPECT_GE(results[0].steps.back().bytes_sent, expected) << name(strategy);
    EXPECT_LE(results[0].steps.back().bytes_sent, expected + 32) << name(strategy);
  }
}

// Tensor parallel (and sequence parallel, and recomputation) in the engine at
// 2 ranks against the one-rank reference; skipping the tensor group's
// backward reductions fails the check.
TEST(TransformerEngine, TensorParallelMatchesOneRank) {
  set_compute_threads(1);
  struct Case {
    bool sp;
    Recompute recompute;
    bool fault;
  };
  for (const Case c :
       {Case{false, Recompute::kNone, false}, Case{true, Recompute::kSelective, false},
        Case{true, Recompute::kFull, false}, Case{false, Recompute::kNone, true},
        Case{true, Recompute::kNone, true}}) {
    TrainOptions o = transformer_options(Strategy::kTensor);
    o.parallel.tp = 2;
    o.sequence_parallel = c.sp;
    o.recompute = c.recompute;
    o.faults.skipped_tp_all_reduce = c.fault;
    std::vector<TrainResult> results(2);
    InProcessTransport::run(2, [&](PointToPoint& p2p) {
      set_compute_threads(1);
      auto world = make_ring_communicator(p2p);
      auto tp_p2p = make_group_point_to_point(p2p, {0, 1});
      auto tp = make_ring_communicator(*tp_p2p);
      results[static_cast<size_t>(p2p.rank())] =
          train_parallel({world.get(), tp.get(), nullptr, nullptr}, o);
    });
    EXPECT_EQ(losses(results[0]), losses(results[1]));
    const EquivalenceResult eq = compare_losses(
        losses(results[0]), losses(train_parallel_single(o)), loss_tolerance(o.precision));
    EXPECT_EQ(eq.equivalent, !c.fault) << "sp " << c.sp << " " << name(c.recompute) << " fault "
                                       << c.fault << ": " << eq.summary();
    if (!c.fault)
      for (const StepFigures& f : results[0].steps) EXPECT_TRUE(f.consistent);
    // Per step: 4 all-reduces of s x b x h per block (6 with full recomputation),
    // as ring bytes 2 N (n-1)/n; sequence parallel the same as all-gathers and
    // reduce-scatters, plus the final gather and the partial gradients' all-reduce.
    const size_t L = o.transformer.layers;
    const size_t sbh = o.transformer.seq_len * o.global_batch * o.transformer.hidden;
    const size_t per_block = c.recompute == Recompute::kFull ? 6 : 4;
    double expected = 0;
    if (!c.fault && !c.sp) expected = all_reduce_bytes(per_block * L * sbh, 2, 4);
    if (!c.fault && c.sp) {
      size_t partial = 0;
      for (const Range& r : sequence_parallel_partial(o.transformer, 2)) partial += r.size();
      expected = 2 * all_gather_bytes(per_block * L * sbh, 2, 4) + all_gather_bytes(sbh, 2, 4) +
                 all_reduce_bytes(partial, 2, 4);
    }
    if (!c.fault) EXPECT_NEAR(results[0].steps.back().tp_bytes, expected, 1e-6 * expected);
  }
}

// ------------------------------------------------------------ the settings

std::string problem_of(TrainSettings s) {
  TrainOptions o;
  return options_from_settings(s, o, 0);
}

TEST(TransformerSettings, ShapeFromTheFlagsAndRefusalsInOneLine) {
  TrainSettings s;
  s.model = "transformer";
  TrainOptions o;
  ASSERT_EQ(options_from_settings(s, o, 0), "");
  EXPECT_EQ(o.model, TrainedModel::kTransformer);
  EXPECT_EQ(o.transformer.hidden, 64u);  // --width not given: the transformer's default
  EXPECT_EQ(o.transformer.layers, 2u);
  s.width = 96;
  s.width_given = true;
  s.depth = 3;
  s.depth_given = true;
  s.heads = 6;
  s.recompute = "selective";
  ASSERT_EQ(options_from_settings(s, o, 0), "");
  EXPECT_EQ(o.transformer.hidden, 96u);
  EXPECT_EQ(o.transformer.layers, 3u);
  EXPECT_EQ(o.transformer.heads, 6u);
  EXPECT_EQ(o.recompute, Recompute::kSelective);
  EXPECT_EQ(model_parameters(o), transformer_parameter_count(o.transformer));
  for (const char* strategy : {"pp", "ep", "3d"}) {
    TrainSettings t;
    t.model = "transformer";
    t.strategy = strategy;
    EXPECT_NE(problem_of(t).find("built for the MLP only"), std::string::npos) << strategy;
  }
  TrainSettings t;
  t.model = "transformer";
  t.sequence_parallel = true;  // with ddp
  EXPECT_NE(problem_of(t).find("needs --strategy tp"), std::string::npos);
  t = TrainSettings{};
  t.heads = 8;  // the MLP
  EXPECT_NE(problem_of(t).find("need --model transformer"), std::string::npos);
  t = TrainSettings{};
  t.model = "transformer";
  t.heads = 5;  // 64 does not divide into 5
  EXPECT_NE(problem_of(t).find("does not divide into 5 heads"), std::string::npos);
  t.model = "gpt";
  EXPECT_NE(problem_of(t).find("use mlp or transformer"), std::string::npos);
  t = TrainSettings{};
  t.model = "transformer";
  t.recompute = "some";
  EXPECT_NE(problem_of(t).find("none, selective or full"), std::string::npos);
}

// The memory refusal counts the transformer's parameters (12 h^2 per block)
// and activations (the s^2 probabilities per head), not the MLP's.
TEST(TransformerSettings, MemoryRefusalCountsTheTransformer) {
  TrainSettings s;
  s.model = "transformer";
  TrainOptions o;
  EXPECT_EQ(options_from_settings(s, o, 16e9), "");
  s.width = 2048;  // 12 x 2048^2 x 24 blocks = 1.2 G parameters, x 6 copies x 4 bytes
  s.width_given = true;
  s.depth = 24;
  s.depth_given = true;
  EXPECT_NE(options_from_settings(s, o, 16e9).find("GB per rank"), std::string::npos);
  s.width = 64;  // small, but 128 sequences of 4096 tokens hold 4 x 4096^2 probabilities each
  s.depth = 2;
  s.seq_len = 4096;
  EXPECT_NE(options_from_settings(s, o, 16e9).find("GB per rank"), std::string::npos);
}

// Heads that do not split over the tensor degree are refused when the layout is known.
TEST(TransformerSettings, TensorDegreeMustSplitTheHeads) {
  TrainOptions o = transformer_options(Strategy::kTensor);
  o.parallel.tp = 3;  // 4 heads
  EXPECT_NE(validate_parallel(o, 3).find("4 heads do not split over 3"), std::string::npos);
  o.parallel.tp = 4;
  EXPECT_EQ(validate_parallel(o, 4), "");
  o.sequence_parallel = true;
  o.transformer.seq_len = 6;  // over 4
  EXPECT_NE(validate_parallel(o, 4).find("--seq-len 6"), std::string::npos);
}

TEST(TransformerSettings, ExportHoldsTheModelsFiles) {
  TrainOptions o = transformer_options(Strategy::kSingle);
  std::map<std::string, std::string> files;
  for (ExportFile& f : export_files(o)) files[f.name] = std::move(f.bytes);
  const size_t samples = dataset_size(o);
  EXPECT_EQ(files.at("initial_parameters.f32").size(),
            4 * transformer_parameter_count(o.transformer));
  EXPECT_EQ(files.at("sequences.i64").size(), 8 * samples * (o.transformer.seq_len + 1));
  EXPECT_EQ(files.at("batches.i64").size(), 8 * o.steps * o.global_batch);
  EXPECT_NE(files.at("model.json").find("\"model\": \"transformer\""), std::string::npos);
  // The parameters are the initial vector, in its order.
  const std::vector<float> p = transformer_initial_parameters(o.transformer, o.seed);
  EXPECT_EQ(std::memcmp(files.at("initial_parameters.f32").data(), p.data(), p.size() * 4), 0);
}

}  // namespace
}  // namespace ccscope::training_probe
