// The strategy advisor's arithmetic against examples worked by hand (each in
// its comment) and its decisions on clusters built to make them go one way or
// the other.
#include "ccscope/training_probe/advisor.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ccscope/records/document_kind.h"

namespace ccscope::training_probe {
namespace {

constexpr double kMiB = 1024.0 * 1024;
constexpr double kGiB = kMiB * 1024;

// Every collective of a scope at one busbw, no latency (a point at 1 byte).
void flat(AdvisorCluster& c, Scope scope, double busbw) {
  for (Collective coll : kAdvisedCollectives) c.bandwidth.at(coll, scope) = {{1, busbw, 0}};
}

AdvisorModel zero_paper_model() {
  // The ZeRO paper's Figure 1: Psi = 7.5B, mixed-precision Adam (K = 12).
  AdvisorModel m;
  m.parameters = 7.5e9;
  m.layers = 32;
  m.hidden = 4096;
  m.sequence_length = 2048;
  m.global_batch = 64;
  m.precision = Precision::kBFloat16;
  m.optimizer_words = 2;
  return m;
}

AdvisorCluster cluster(size_t ranks, size_t per_node, double memory_gib) {
  AdvisorCluster c;
  c.ranks = ranks;
  c.ranks_per_node = per_node;
  c.gpu_memory_bytes = memory_gib * kGiB;
  c.flops_per_rank = 400e12;
  flat(c, Scope::kIntraNode, 300);
  flat(c, Scope::kInterNode, 25);
  return c;
}

Layout layout(size_t tp, size_t pp, size_t dp, int zero, size_t micro_batches = 1) {
  return Layout{tp, pp, dp, 1, zero, false, micro_batches};
}

TEST(Advisor, ZeroPaperFigure1MemoryPerRank) {
  // 7.5B parameters on 64 ranks: DDP (2 + 2 + 12) Psi = 120 GB; ZeRO-1 4 Psi +
  // 12 Psi / 64 = 30 + 1.40625 = 31.4 GB; ZeRO-2 2 Psi + 14 Psi / 64 = 15 +
  // 1.640625 = 16.6 GB; ZeRO-3 16 Psi / 64 = 1.875 = 1.9 GB (GB = 1e9 B).
  const AdvisorModel m = zero_paper_model();
  const AdvisorCluster c = cluster(64, 8, 80);
  const double want[] = {120e9, 31.40625e9, 16.640625e9, 1.875e9};
  for (int z = 0; z <= 3; ++z) {
    const Estimate e = estimate(m, c, {}, layout(1, 1, 64, z));
    EXPECT_NEAR(e.memory.model_states(), want[z], 1e3) << "zero " << z;
  }
  // ZeRO-3 also holds two gathered layers and one layer's gradient: 3 x 2 B x
  // 7.5e9 / 32 = 1.40625e9 B.
  EXPECT_NEAR(estimate(m, c, {}, layout(1, 1, 64, 3)).memory.working, 1.40625e9, 1e3);
  EXPECT_EQ(estimate(m, c, {}, layout(1, 1, 64, 2)).memory.working, 0);
}

TEST(Advisor, TensorAndPipelineDivideTheModelStates) {
  const AdvisorModel m = zero_paper_model();
  const AdvisorCluster c = cluster(64, 8, 80);
  // tp2 x pp4 x dp8, DDP: each rank holds 7.5e9 / 8 = 0.9375e9 parameters, 16
  // B each = 15e9 B.
  EXPECT_NEAR(estimate(m, c, {}, layout(2, 4, 8, 0)).memory.model_states(), 15e9, 1e3);
  // tp2 x pp2 x dp16 with ZeRO-1: 1.875e9 parameters per rank, 4 B each +
  // 12 B / 16 = 7.5e9 + 1.40625e9 = 8.90625e9 B.
  EXPECT_NEAR(estimate(m, c, {}, layout(2, 2, 16, 1)).memory.model_states(), 8.90625e9, 1e3);
  // pp 3 over 32 layers: the busiest stage holds ceil(32/3) = 11 layers,
  // 7.5e9 x 11 / 32 = 2.578125e9 parameters, 16 B each = 41.25e9 B (ranks 3).
  const AdvisorCluster three = cluster(3, 3, 80);
  EXPECT_NEAR(estimate(m, three, {}, layout(1, 3, 1, 0)).memory.model_states(), 41.25e9, 1e3);
}

TEST(Advisor, ActivationsFollowKorthikanti) {
  // s = 2048, h = 4096, a = 4096 / 128 = 32, one sample per micro-batch:
  // s b h (34 + 5 a s / h) = 2048 x 4096 x (34 + 80) = 956301312 B per layer,
  // x 32 layers = 30601641984 B.
  const AdvisorModel m = zero_paper_model();  // global batch 64
  const AdvisorCluster c = cluster(64, 8, 80);
  EXPECT_NEAR(estimate(m, c, {}, layout(1, 1, 64, 1)).memory.activations, 30601641984.0, 1);
  // tp 2: 10 + 24/2 + 80/2 = 62: 2048 x 4096 x 62 x 32 = 16642998272 B (dp 32,
  // 2 samples per replica, 2 micro-batches of 1).
  EXPECT_NEAR(estimate(m, c, {}, layout(2, 1, 32, 0, 2)).memory.activations, 16642998272.0, 1);
  // pp 4, 1F1B: the first stage holds min(4, m = 4) micro-batches of 8
  // layers: as much as the whole model's layers for one micro-batch.
  EXPECT_NEAR(estimate(m, c, {}, layout(1, 4, 16, 0, 4)).memory.activations, 30601641984.0, 1);
}

TEST(Advisor, OperationTimeFromATwoPointCurve) {
  // 1 MiB at 10 GB/s, 16 MiB at 50 GB/s.
  const std::vector<CurvePoint> curve = make_curve({{16 * kMiB, 50, 0}, {kMiB, 10, 0}});
  ASSERT_EQ(curve.size(), 2u);
  EXPECT_EQ(curve[0].bytes, kMiB);
  // 4 MiB is halfway in log2 size: busbw 30 GB/s. An all-reduce over 8 ranks
  // moves 2 x 7/8 = 1.75 x its size: 4194304 x 1.75 / 30e9 = 244.67 us.
  EXPECT_NEAR(curve_busbw(curve, 4 * kMiB), 30, 1e-9);
  EXPECT_NEAR(operation_seconds(curve, Collective::kAllReduce, 4 * kMiB, 8), 244.6677e-6, 1e-9);
  // An all-gather over 4 ranks, (n-1)/n = 0.75: 4194304 x 0.75 / 30e9 = 104.86 us.
  EXPECT_NEAR(operation_seconds(curve, Collective::kAllGather, 4 * kMiB, 4), 104.8576e-6, 1e-9);
  // Sendrecv, factor 1: 4194304 / 30e9 = 139.81 us.
  EXPECT_NEAR(operation_seconds(curve, Collective::kSendRecv, 4 * kMiB, 2), 139.8101e-6, 1e-9);
  // Below the smallest size: the latency floor, what 1 MiB takes (183.5 us).
  EXPECT_NEAR(operation_seconds(curve, Collective::kAllReduce, 512 * 1024, 8), 183.5008e-6, 1e-9);
  // Beyond the largest: its busbw, 64 MiB x 1.75 / 50e9 = 2.3488 ms.
  EXPECT_NEAR(operation_seconds(curve, Collective::kAllReduce, 64 * kMiB, 8), 2.34881e-3, 1e-8);
  EXPECT_EQ(operation_seconds(curve, Collective::kAllReduce, 4 * kMiB, 1), 0);
  // Samples of one size: their median.
  const auto merged = make_curve({{kMiB, 10, 1}, {kMiB, 30, 3}, {kMiB, 11, 2}, {0, 5, 1}});
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].busbw_GBps, 11);
  EXPECT_EQ(merged[0].time_s, 2);
}

TEST(Advisor, MissingCurvesFallBackAndSaySo) {
  BandwidthTable t;
  t.at(Collective::kAllReduce, Scope::kIntraNode) = {{1, 100, 0}};
  const ResolvedCurve own = resolve_curve(t, Collective::kAllReduce, Scope::kIntraNode);
  ASSERT_NE(own.curve, nullptr);
  EXPECT_EQ(own.fallback, "");
  const ResolvedCurve ag = resolve_curve(t, Collective::kAllGather, Scope::kIntraNode);
  ASSERT_NE(ag.curve, nullptr);
  EXPECT_EQ(ag.fallback, "intra-node all_gather: no curve, used intra-node all_reduce's");
  const ResolvedCurve inter = resolve_curve(t, Collective::kAllReduce, Scope::kInterNode);
  EXPECT_EQ(inter.fallback,
            "inter-node all_reduce: no curve, used intra-node all_reduce's (likely optimistic)");
  EXPECT_EQ(resolve_curve(BandwidthTable{}, Collective::kAllReduce, Scope::kIntraNode).curve,
            nullptr);
}

// The probe: 4 layers of 1024 x 1024 + bias = 4198400 parameters, float32:
// 16793600 B of gradients.
AdvisorModel probe_model(size_t width, size_t depth, size_t batch) {
  AdvisorModel m;
  m.kind = ModelKind::kProbe;
  m.hidden = width;
  m.layers = depth;
  m.sequence_length = 1;
  m.global_batch = batch;
  m.precision = Precision::kFloat32;
  m.optimizer_words = 1;
  return m;
}

TEST(Advisor, DdpCommunicationOverlapsBackward) {
  const AdvisorModel m = probe_model(1024, 4, 64);
  AdvisorCluster c = cluster(2, 2, 80);
  flat(c, Scope::kIntraNode, 10);
  c.compute_seconds = 0.1;  // one rank, the whole batch: 0.05 s each of 2
  AdvisorOptions o;
  o.bucket_bytes = 4 * kMiB;
  // 16793600 B in DDP's buckets, backward order: the first 1 MiB, then 3 of
  // 4 MiB, the last 16793600 - 1048576 - 3 x 4194304 = 3162112 B. Two ranks:
  // factor 1, 10 GB/s: 1.67936 ms in all.
  const Estimate e = estimate(m, c, o, layout(1, 1, 2, 0));
  EXPECT_NEAR(e.compute_s, 0.05, 1e-12);
  ASSERT_EQ(e.comm.size(), 1u);
  EXPECT_EQ(e.comm[0].operations, 5);
  EXPECT_NEAR(e.comm_s, 1.67936e-3, 1e-9);
  // Backward (2/3 of 0.05 s) hides all but the last bucket: 316.2112 us.
  EXPECT_NEAR(e.exposed_comm_s, 316.2112e-6, 1e-12);
  EXPECT_NEAR(e.step_s, 0.05 + 316.2112e-6, 1e-12);
  // Without overlap all of it is exposed.
  o.overlap = false;
  EXPECT_NEAR(estimate(m, c, o, layout(1, 1, 2, 0)).exposed_comm_s, 1.67936e-3, 1e-9);
  // ZeRO-1 (DeepSpeed's buckets, no small first one: 4 of 4 MiB and 16384 B)
  // reduce-scatters, factor 1/2: 0.83968 ms, all hidden but the last 0.8192
  // us; then all-gathers the updated parameters, exposed: 0.83968 ms.
  o.overlap = true;
  const Estimate z1 = estimate(m, c, o, layout(1, 1, 2, 1));
  EXPECT_NEAR(z1.comm_s, 2 * 0.83968e-3, 1e-9);
  EXPECT_NEAR(z1.exposed_comm_s, 0.83968e-3 + 0.8192e-6, 1e-9);
}

TEST(Advisor, ProbeTensorParallelPairs) {
  // ccscope train's tp: 5 layers = 2 column/row pairs and a replicated last
  // layer; one all-reduce forward per pair, one backward but for the first
  // pair's: 3 per micro-batch, each [micro-batch x width] = 16 x 256 x 4 B.
  const AdvisorModel m = probe_model(256, 5, 64);
  const AdvisorCluster c = cluster(2, 2, 80);
  const Estimate e = estimate(m, c, {}, layout(2, 1, 1, 0, 4));
  ASSERT_EQ(e.comm.size(), 1u);
  EXPECT_EQ(e.comm[0].group, "tp");
  EXPECT_NEAR(e.comm[0].operations, 4 * 3, 1e-12);
  EXPECT_EQ(e.comm[0].operation_bytes, 16 * 256 * 4);
  // Parameters: 5 x (256 x 256 + 256) = 328960, over tp 2 = 164480 per rank,
  // float32 SGD with momentum: 4 + 4 + 4 B each = 1973760 B.
  EXPECT_NEAR(e.memory.model_states(), 1973760, 1e-6);
  // Activations: pairs keep (2 + 2/2) x 256 each, the last layer 2 x 256,
  // per sample, 4 B: (2 x 3 + 2) x 256 x 4 = 8192 B x 16 samples.
  EXPECT_NEAR(e.memory.activations, 8192.0 * 16, 1e-6);
}

TEST(Advisor, SmallestMicroBatch) {
  // 64 rows over pp 2 (dp 1): every divisor of 64 is a micro-batch count,
  // unless micro-batches must hold 16 rows: then at most 4.
  const AdvisorModel m = probe_model(1024, 8, 64);
  AdvisorCluster c = cluster(2, 2, 80);
  c.compute_seconds = 1;
  auto pp2 = [&](const AdvisorOptions& o) {
    for (const Estimate& e : advise(m, c, o).candidates)
      if (label(e.layout) == "pp2") return e.layout.micro_batches;
    return size_t{0};
  };
  EXPECT_EQ(pp2({}), 64u);  // the bubble shrinks with more, the transfers cost ~nothing
  AdvisorOptions o;
  o.min_micro_batch = 16;
  EXPECT_EQ(pp2(o), 4u);
  o.min_micro_batch = 1000;  // larger than the batch: one micro-batch
  EXPECT_EQ(pp2(o), 1u);
}

TEST(Advisor, PipelineBubble) {
  // 8 layers of 1024 on 4 stages, batch 64, 8 micro-batches of 8 samples.
  const AdvisorModel m = probe_model(1024, 8, 64);
  AdvisorCluster c = cluster(4, 4, 80);
  flat(c, Scope::kIntraNode, 10);
  c.compute_seconds = 1.0;  // 0.25 s per rank, each stage a quarter of the layers
  const Estimate e = estimate(m, c, {}, layout(1, 4, 1, 0, 8));
  EXPECT_NEAR(e.compute_s, 0.25, 1e-12);
  // A boundary tensor is 8 x 1024 x 4 B = 32768 B: 3.2768 us at 10 GB/s. The
  // bubble: (p-1)/m = 3/8 of the compute, 0.09375 s ((p-1)/(m+p-1) = 3/11 of
  // compute + bubble), plus the ramp's 2 (p-1) = 6 transfers.
  EXPECT_NEAR(e.bubble_s, 0.09375 + 6 * 3.2768e-6, 1e-12);
  EXPECT_NEAR(0.09375 / (0.25 + 0.09375), 3.0 / 11, 1e-12);
  // Each micro-batch's activation and gradient: 16 transfers.
  ASSERT_EQ(e.comm.size(), 1u);
  EXPECT_EQ(e.comm[0].group, "pp");
  EXPECT_NEAR(e.comm_s, 16 * 3.2768e-6, 1e-12);
  EXPECT_NEAR(e.step_s, 0.25 + e.bubble_s + 16 * 3.2768e-6, 1e-12);
}

TEST(Advisor, GroupsAcrossNodesUseTheInterNodeCurve) {
  const AdvisorModel m = zero_paper_model();
  const AdvisorCluster c = cluster(16, 8, 80);
  // tp 2 x dp 8: a data-parallel group is ranks 0, 2, ..., 14: both nodes.
  const Estimate e = estimate(m, c, {}, layout(2, 1, 8, 0, 8));
  ASSERT_EQ(e.comm.size(), 2u);
  EXPECT_EQ(e.comm[0].group, "tp");
  EXPECT_EQ(e.comm[0].scope, Scope::kIntraNode);
  // Megatron-LM: 2 all-reduces forward and 2 backward per layer, of b s h =
  // 1 x 2048 x 4096 bf16 = 16 MiB (64 samples over dp 8 in 8 micro-batches):
  // 8 x 32 x 4 = 1024 per step.
  EXPECT_EQ(e.comm[0].operations, 1024);
  EXPECT_EQ(e.comm[0].operation_bytes, 16 * kMiB);
  EXPECT_EQ(e.comm[0].collective, Collective::kAllReduce);
  EXPECT_EQ(e.comm[1].group, "dp");
  EXPECT_EQ(e.comm[1].scope, Scope::kInterNode);
  // tp 8 x dp 2 across 2 nodes; pp 2 x dp 8: the pipeline crosses, dp does not.
  const Estimate pp = estimate(m, c, {}, layout(1, 2, 8, 0, 8));
  for (const CommPart& p : pp.comm)
    EXPECT_EQ(p.scope, p.group == "pp" ? Scope::kInterNode : Scope::kIntraNode) << p.group;
}

// 1.3B parameters (24 layers of 2048, 16 heads) on 8 GPUs: 20.8 GB of DDP
// states and 11.5 GB of activations per sample fit 72 GiB; a global batch of
// 512 x 2048 tokens keeps each rank computing 2.5 s per step, long enough for
// the gradients' all-reduce (2.6 GB at 300 GB/s: 15 ms) to hide under the last
// micro-batch's backward (27 ms).
TEST(Advisor, DdpWhenTheModelFitsOneGpu) {
  AdvisorModel m = zero_paper_model();
  m.parameters = 1.3e9;
  m.layers = 24;
  m.hidden = 2048;
  m.global_batch = 512;
  const AdvisorCluster c = cluster(8, 8, 80);
  const Advice a = advise(m, c, {});
  ASSERT_TRUE(a.recommended);
  EXPECT_EQ(label(a.candidates[*a.recommended].layout), "ddp");
  EXPECT_TRUE(a.runner_up);
  EXPECT_EQ(a.rule, "the model fits one GPU -> DDP");
  EXPECT_EQ(a.rule_verdict, "the rule of thumb agrees: ddp");
  EXPECT_EQ(a.reason.rfind("ddp: the fastest of", 0), 0u) << a.reason;
}

// A model too small for its communication: 4 layers of 1024 at 400 TFLOP/s
// compute in microseconds, while DDP's 16.8 MB all-reduce takes 84 us at
// 300 GB/s. A pipeline over the 4 ranks moves only 32 KiB boundary tensors:
// the numbers overrule "fits one GPU -> DDP".
TEST(Advisor, TheNumbersOverruleDdpForATinyModel) {
  const AdvisorModel m = probe_model(1024, 4, 64);
  const AdvisorCluster c = cluster(4, 4, 80);
  const Advice a = advise(m, c, {});
  ASSERT_TRUE(a.recommended);
  EXPECT_EQ(a.rule, "the model fits one GPU -> DDP");
  EXPECT_NE(label(a.candidates[*a.recommended].layout), "ddp");
  EXPECT_EQ(a.rule_verdict.rfind("the rule of thumb picks ddp", 0), 0u) << a.rule_verdict;
  EXPECT_NE(a.rule_verdict.find("the intra-node all_reduce busbw of 300 GB/s at"),
            std::string::npos)
      << a.rule_verdict;
}

TEST(Advisor, NothingFits) {
  AdvisorModel m = zero_paper_model();
  m.parameters = 175e9;
  m.layers = 96;
  m.hidden = 12288;
  const AdvisorCluster c = cluster(8, 8, 16);
  ASSERT_EQ(validate(m, c, {}), "");
  const Advice a = advise(m, c, {});
  EXPECT_FALSE(a.recommended);
  EXPECT_FALSE(a.runner_up);
  ASSERT_FALSE(a.candidates.empty());
  for (const Estimate& e : a.candidates) EXPECT_FALSE(e.fits) << label(e.layout);
  EXPECT_EQ(a.reason.rfind("nothing fits: the smallest, ", 0), 0u) << a.reason;
  // The smallest first.
  for (size_t i = 1; i < a.candidates.size(); ++i)
    EXPECT_LE(a.candidates[i - 1].memory.total(), a.candidates[i].memory.total());
}

// One node of 8 GPUs at 1 PFLOP/s each, 7B parameters, a global batch of 8
// samples (16384 tokens). DDP needs 16 x 7e9 = 112 GB: it does not fit 72 GiB.
//  tp2 x dp4: 56 GB of states + 16.6 GB of activations (62 s h per layer,
//    one sample); compute 6 x 7e9 x 16384 + attention = 94 ms per rank; the
//    tensor-parallel all-reduces are 2 x 32 x 4 = 256 of 16.8 MB over 2 ranks:
//    at 300 GB/s 14.3 ms, at 20 GB/s 215 ms, all exposed; the data-parallel
//    all-reduce of 7 GB over 4 ranks (35 ms at 300 GB/s) hides under backward.
//  zero3 over 8: 3 x 14 GB x 7/8 = 123 ms at 300 GB/s, more than the 94 ms of
//    compute it hides under: 29 ms exposed.
//  pp8: 14 GB of states + 30.6 GB of activations; bubble 7/8 of the compute
//    (82 ms) and little communication (16.8 MB transfers: 56 us at 300 GB/s,
//    0.84 ms at 20 GB/s, 30 of them).
// So at 300 GB/s tensor parallelism wins (0.109 s against zero3's 0.123 and
// pp8's 0.176); at 20 GB/s the pipeline does (0.2 s against tp2's 0.77).
TEST(Advisor, SlowIntraNodeLinksTurnTensorParallelIntoPipeline) {
  AdvisorModel m = zero_paper_model();
  m.parameters = 7e9;
  m.global_batch = 8;
  AdvisorCluster fast = cluster(8, 8, 80);
  fast.flops_per_rank = 1e15;
  const Advice a = advise(m, fast, {});
  ASSERT_TRUE(a.recommended);
  const Estimate& best = a.candidates[*a.recommended];
  EXPECT_EQ(best.layout.tp, 2u) << label(best.layout);
  EXPECT_EQ(best.layout.pp, 1u) << label(best.layout);
  EXPECT_EQ(a.rule.rfind("does not fit one GPU, fast intra-node links", 0), 0u) << a.rule;
  EXPECT_EQ(a.rule_verdict, "the rule of thumb agrees: " + label(best.layout));

  AdvisorCluster slow = fast;
  flat(slow, Scope::kIntraNode, 20);
  const Advice b = advise(m, slow, {});
  ASSERT_TRUE(b.recommended);
  const Estimate& now = b.candidates[*b.recommended];
  EXPECT_EQ(now.layout.tp, 1u) << label(now.layout);
  EXPECT_GT(now.layout.pp, 1u) << label(now.layout);
  // The rule of thumb, without a fast interconnect: ZeRO-2 with offload, slower.
  EXPECT_NE(b.rule.find("no fast interconnect"), std::string::npos) << b.rule;
  ASSERT_TRUE(b.rule_pick);
  EXPECT_EQ(label(b.candidates[*b.rule_pick].layout), "zero2+offload");
  EXPECT_NE(b.rule_verdict.find("faster"), std::string::npos) << b.rule_verdict;
  // tp2's own estimate got slower by what its all-reduces take at 20 GB/s.
  for (const Estimate& e : b.candidates)
    if (label(e.layout) == "tp2 x dp4") {
      EXPECT_GT(e.step_s, now.step_s);
    }
}

TEST(Advisor, RuleOfThumbTensorParallelLosesToZeroWhenTheBatchIsLarge) {
  // 7B on 2 nodes of 8, global batch 1024 x 2048 tokens: tensor parallel's
  // all-reduces grow with the tokens, ZeRO-1's traffic does not.
  AdvisorModel m = zero_paper_model();
  m.parameters = 7e9;
  m.global_batch = 1024;
  const AdvisorCluster c = cluster(16, 8, 80);
  const Advice a = advise(m, c, {});
  ASSERT_TRUE(a.recommended);
  ASSERT_TRUE(a.rule_pick);
  const Estimate& rule = a.candidates[*a.rule_pick];
  EXPECT_GT(rule.layout.tp, 1u);
  EXPECT_NE(*a.rule_pick, *a.recommended);
  EXPECT_EQ(a.rule_verdict.rfind("the rule of thumb picks " + label(rule.layout), 0), 0u)
      << a.rule_verdict;
  EXPECT_NE(a.rule_verdict.find("faster"), std::string::npos) << a.rule_verdict;
}

TEST(Advisor, CandidatesStayInsideTheirLimits) {
  AdvisorModel m = zero_paper_model();
  m.experts = 8;
  m.top_k = 2;
  m.parameters = 47e9;
  const AdvisorCluster c = cluster(16, 8, 80);
  ASSERT_EQ(validate(m, c, {}), "");
  const Advice a = advise(m, c, {});
  bool saw_ep = false;
  for (const Estimate& e : a.candidates) {
    const Layout& l = e.layout;
    EXPECT_EQ(l.tp * l.pp * l.dp, 16u);
    EXPECT_EQ(8 % l.tp, 0u) << "tp stays in the node";
    EXPECT_LE(l.pp, 32u);
    EXPECT_EQ(l.dp % l.ep, 0u);
    EXPECT_EQ(8 % l.ep, 0u);
    EXPECT_EQ(m.global_batch % (l.dp * l.micro_batches), 0u);
    if (l.pp > 1 || l.tp > 1) {
      EXPECT_LE(l.zero, 1);
    }
    saw_ep = saw_ep || l.ep > 1;
  }
  EXPECT_TRUE(saw_ep);
  // Experts: everything outside attention, 47e9 - 4 x 32 x 4096^2 = 44.85e9,
  // 2 of 8 active per token.
  const Estimate e = estimate(m, c, {}, Layout{1, 1, 16, 8, 1, false, 4});
  bool a2a = false;
  for (const CommPart& p : e.comm) a2a = a2a || p.group == "ep";
  EXPECT_TRUE(a2a);
}

TEST(Advisor, LabelsAndValidation) {
  EXPECT_EQ(label(layout(1, 1, 1, 0)), "single");
  EXPECT_EQ(label(layout(1, 1, 8, 0)), "ddp");
  EXPECT_EQ(label(layout(1, 1, 8, 3)), "zero3");
  EXPECT_EQ(label(Layout{1, 1, 8, 1, 2, true, 1}), "zero2+offload");
  EXPECT_EQ(label(layout(8, 2, 4, 1)), "tp8 x pp2 x dp4 zero1");
  EXPECT_EQ(label(layout(8, 1, 1, 0)), "tp8");
  EXPECT_EQ(label(Layout{1, 1, 8, 4, 0, false, 1}), "dp8 x ep4");
  AdvisorModel m = zero_paper_model();
  AdvisorCluster c = cluster(8, 8, 80);
  EXPECT_EQ(validate(m, c, {}), "");
  c.bandwidth = {};
  EXPECT_NE(validate(m, c, {}).find("no bandwidth"), std::string::npos);
  c.ranks = 1;
  EXPECT_EQ(validate(m, c, {}), "");
  m.experts = 4;
  m.top_k = 5;
  EXPECT_NE(validate(m).find("top-k 5"), std::string::npos);
  AdvisorModel p = probe_model(64, 2, 8);
  p.parameters = 10;
  EXPECT_NE(validate(p).find("width and depth"), std::string::npos);
}

TEST(Advisor, JsonDocument) {
  const AdvisorModel m = probe_model(256, 4, 64);
  const AdvisorCluster c = cluster(2, 2, 80);
  const Advice a = advise(m, c, {});
  const auto doc = nlohmann::json::parse(advice_json(a, m, c, {}));
  EXPECT_EQ(doc["schema"], "ccscope.advice/1");
  ASSERT_TRUE(a.recommended);
  EXPECT_EQ(doc["recommended"]["label"], label(a.candidates[*a.recommended].layout));
  EXPECT_EQ(doc["recommended_index"], *a.recommended);
  EXPECT_EQ(doc["rule_of_thumb"]["verdict"], a.rule_verdict);
  EXPECT_EQ(doc["candidates"].size(), a.candidates.size());
  EXPECT_EQ(doc["model"]["parameters"], 4 * (256 * 256 + 256));
  EXPECT_TRUE(doc["candidates"][0]["fits"].get<bool>());
}

// Every key advice_json writes is in the ccscope.advice/1 table (docs/records.md), with the
// table's type, and every key of the table is written: a probe and a 7.5B transformer on 16
// ranks, and a layout search where nothing fits (null recommendation).
TEST(Advisor, JsonKeysAreTheDocumentKindTable) {
  const AdvisorModel probe = probe_model(256, 4, 64);
  const AdvisorCluster two = cluster(2, 2, 80);
  const AdvisorModel big = zero_paper_model();
  const AdvisorCluster sixteen = cluster(16, 8, 80);
  const AdvisorCluster tiny = cluster(2, 2, 1);
  const std::vector<std::string> documents = {
      advice_json(advise(probe, two, {}), probe, two, {}),
      advice_json(advise(big, sixteen, {}), big, sixteen, {}),
      advice_json(advise(big, tiny, {}), big, tiny, {})};
  const std::vector<std::string> differences =
      records::document_key_differences(records::advice_document_kind(), documents);
  EXPECT_TRUE(differences.empty()) << ::testing::PrintToString(differences);
}

}  // namespace
}  // namespace ccscope::training_probe
