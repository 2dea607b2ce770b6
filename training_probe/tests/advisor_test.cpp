// The strategy advisor's arithmetic against examples worked by hand (each in
// its comment) and its decisions on clusters built to make them go one way or
// the other.
#include "ccscope/training_probe/advisor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

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
  m.flash_attention = false;  // the s^2 term of Korthikanti's formulas kept
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

// Korthikanti et al. 2022, Table 2, per layer per micro-batch, 16-bit: s =
// 2048, h = 4096, a = 32, b = 1, t = 2, so s b h = 8388608 and 5 a s / h = 80.
// tp2 x dp32 on 64 ranks, 64 samples: 2 micro-batches of 1 sample each.
TEST(Advisor, ActivationsWithSequenceParallelismAndRecomputation) {
  AdvisorModel m = zero_paper_model();  // standard attention
  const AdvisorCluster c = cluster(64, 8, 80);
  auto activ = [&](bool sp, Recompute rc) {
    Layout l = layout(2, 1, 32, 0, 2);
    l.sp = sp;
    l.recompute = rc;
    return estimate(m, c, {}, l).memory;
  };
  // Sequence parallelism: s b h / t (34 + 5 a s / h) = 8388608 x 114 / 2 =
  // 478150656 B per layer, x 32 layers = 15300820992 B.
  EXPECT_NEAR(activ(true, Recompute::kNone).activations, 15300820992.0, 1);
  // Selective without sequence parallelism: s b h (10 + 24/t) = 8388608 x 22
  // = 184549376 B per layer, x 32 = 5905580032 B.
  EXPECT_NEAR(activ(false, Recompute::kSelective).activations, 5905580032.0, 1);
  // Selective with sequence parallelism: 34 s b h / t = 8388608 x 17 =
  // 142606336 B per layer, x 32 = 4563402752 B.
  EXPECT_NEAR(activ(true, Recompute::kSelective).activations, 4563402752.0, 1);
  // Full: each layer's input, 2 s b h / t with sequence parallelism =
  // 8388608 B per layer, x 32 = 268435456 B; backward rematerialises one
  // layer: 478150656 B of working memory.
  const MemoryPerRank full = activ(true, Recompute::kFull);
  EXPECT_NEAR(full.activations, 268435456.0, 1);
  EXPECT_NEAR(full.working, 478150656.0, 1);
  // Full without tp (ddp over 64, 1 sample): 2 s b h x 32 = 536870912 B.
  EXPECT_NEAR(estimate(m, c, {}, Layout{1, 1, 64, 1, 0, false, 1, false, Recompute::kFull})
                  .memory.activations,
              536870912.0, 1);
  // FlashAttention keeps no s x s scores: as selective, s b h (10 + 24/t).
  m.flash_attention = true;
  EXPECT_NEAR(activ(false, Recompute::kNone).activations, 5905580032.0, 1);
  EXPECT_NEAR(activ(true, Recompute::kNone).activations, 4563402752.0, 1);
}

// Recomputation costs compute: full repeats the forward (a third of forward
// + backward), selective the attention core, 4 s^2 h per layer per sample.
// Per sample: s (6 Psi + 12 L h s) = 2048 x (4.5e10 + 3221225472) =
// 98757069766656 FLOPs; selective adds 4 x 32 x 2048^2 x 4096 =
// 2199023255552.
TEST(Advisor, RecomputationCostsCompute) {
  const AdvisorModel m = zero_paper_model();
  const AdvisorCluster c = cluster(64, 8, 80);
  auto compute = [&](Recompute rc) {
    Layout l = layout(2, 1, 32, 0, 2);
    l.recompute = rc;
    return estimate(m, c, {}, l);
  };
  const Estimate none = compute(Recompute::kNone);
  EXPECT_NEAR(compute(Recompute::kFull).compute_s / none.compute_s, 4.0 / 3, 1e-12);
  EXPECT_NEAR(compute(Recompute::kSelective).compute_s / none.compute_s,
              (98757069766656.0 + 2199023255552.0) / 98757069766656.0, 1e-12);
  // 64 samples x 98757069766656 FLOPs over 64 ranks at 400 TFLOP/s x the
  // GEMM efficiency of min(b s, h / t) = min(2048, 2048): 2048 / (2048 + 64).
  EXPECT_NEAR(none.gemm_efficiency, 2048.0 / 2112, 1e-12);
  EXPECT_NEAR(none.compute_s, 98757069766656.0 / (400e12 * 2048 / 2112), 1e-9);
  // Full recomputation repeats the forward's 2 tensor-parallel all-reduces per
  // layer: 6 per layer x 32 layers x 2 micro-batches = 384 (none: 256).
  ASSERT_EQ(none.comm[0].group, "tp");
  EXPECT_EQ(none.comm[0].operations, 256);
  EXPECT_EQ(compute(Recompute::kFull).comm[0].operations, 384);
}

TEST(Advisor, GemmEfficiency) {
  EXPECT_EQ(gemm_efficiency(512, 0), 1);
  EXPECT_NEAR(gemm_efficiency(512, 64), 512.0 / 576, 1e-15);
  // tp 8 on h 4096: 512 columns per rank, 8/9 of the large-GEMM rate; tp 1
  // with one 2048-token sample per micro-batch: 2048 / 2112.
  const AdvisorModel m = zero_paper_model();
  const AdvisorCluster c = cluster(64, 8, 80);
  EXPECT_NEAR(estimate(m, c, {}, layout(8, 1, 8, 0, 8)).gemm_efficiency, 512.0 / 576, 1e-12);
  EXPECT_NEAR(estimate(m, c, {}, layout(1, 1, 64, 1, 1)).gemm_efficiency, 2048.0 / 2112, 1e-12);
}

// Sequence parallelism moves the same bytes: an all-reduce of N over t ranks
// is a reduce-scatter of N and an all-gather of N (nccl-tests' sizes), each
// N (t-1)/t on the wire: 16 MiB x 1/2 / 300 GB/s = 27.96 us each, 256 each.
TEST(Advisor, SequenceParallelismTradesEachAllReduceForTwoHalves) {
  const AdvisorModel m = zero_paper_model();
  const AdvisorCluster c = cluster(64, 8, 80);
  Layout l = layout(2, 1, 32, 0, 2);
  const Estimate ar = estimate(m, c, {}, l);
  l.sp = true;
  const Estimate sp = estimate(m, c, {}, l);
  ASSERT_GE(sp.comm.size(), 2u);
  EXPECT_EQ(sp.comm[0].collective, Collective::kAllGather);
  EXPECT_EQ(sp.comm[1].collective, Collective::kReduceScatter);
  EXPECT_EQ(sp.comm[0].operations, 256);
  EXPECT_EQ(sp.comm[0].operation_bytes, 16 * kMiB);
  EXPECT_NEAR(sp.comm[0].seconds, 256 * 16 * kMiB * 0.5 / 300e9, 1e-12);
  EXPECT_NEAR(sp.comm[0].seconds + sp.comm[1].seconds, ar.comm[0].seconds, 1e-12);
}

// Narayanan et al. 2021: with v model chunks per rank the bubble is (p-1) /
// (v m) of the compute and the point-to-point volume v times 1F1B's;
// Korthikanti et al. 2022 4.2.3: the first stage holds (1 + (p-1)/(p v)) x
// p micro-batches of its layers. pp4 over 32 layers, v = 2, 8 micro-batches
// of 8 samples (64 samples, dp 1).
TEST(Advisor, InterleavedSchedule) {
  const AdvisorModel m = zero_paper_model();
  const AdvisorCluster c = cluster(4, 4, 80);
  Layout l = layout(1, 4, 1, 0, 8);
  const Estimate plain = estimate(m, c, {}, l);
  l.vpp = 2;
  const Estimate inter = estimate(m, c, {}, l);
  ASSERT_EQ(inter.comm.size(), 1u);
  EXPECT_EQ(inter.comm[0].group, "pp");
  EXPECT_EQ(inter.comm[0].operations, 2 * 8 * 2);  // 1F1B: 16
  EXPECT_EQ(plain.comm[0].operations, 16);
  // A boundary of 8 x 2048 x 4096 x 2 B = 128 MiB at 300 GB/s; the ramp's
  // 2 (p-1) = 6 transfers.
  const double transfer = 128 * kMiB / 300e9;
  EXPECT_NEAR(inter.bubble_s, inter.compute_s * 3 / 16 + 6 * transfer, 1e-12);
  EXPECT_NEAR(plain.bubble_s, plain.compute_s * 3 / 8 + 6 * transfer, 1e-12);
  // 8 layers x 4 micro-batches x (1 + 3/8) x 8 samples x 956301312 B.
  EXPECT_NEAR(inter.memory.activations, 8 * 4 * 1.375 * 8 * 956301312.0, 1);
  EXPECT_NEAR(plain.memory.activations, 8 * 4 * 8 * 956301312.0, 1);
}

// Hybrid sharding (HSDP): ZeRO-3 over a node's 8 ranks, 2 replicas. States
// 16 x 7.5e9 / 8 = 15e9 B (over all 16: 7.5e9); the shard group's gathers
// stay intra-node; the gradient shard, 2 x 7.5e9 / 8 = 1.875e9 B, is
// all-reduced over the 2 replicas inter-node each micro-batch: at 25 GB/s,
// factor 1, 0.075 s.
TEST(Advisor, HybridShardingShardsInsideTheNode) {
  const AdvisorModel m = zero_paper_model();
  const AdvisorCluster c = cluster(16, 8, 80);
  Layout l = layout(1, 1, 16, 3, 1);
  const Estimate full = estimate(m, c, {}, l);
  l.shard = 8;
  const Estimate hsdp = estimate(m, c, {}, l);
  EXPECT_EQ(label(l), "zero3 hsdp8");
  EXPECT_NEAR(full.memory.model_states(), 7.5e9, 1e3);
  EXPECT_NEAR(hsdp.memory.model_states(), 15e9, 1e3);
  double replica_s = 0, replica_bytes = 0;
  for (const CommPart& p : hsdp.comm) {
    if (p.collective == Collective::kAllReduce) {
      EXPECT_EQ(p.scope, Scope::kInterNode);
      EXPECT_EQ(p.group_size, 2u);
      replica_s += p.seconds;
      replica_bytes += p.operation_bytes;
    } else {
      EXPECT_EQ(p.scope, Scope::kIntraNode) << advice_name(p.collective);
      EXPECT_EQ(p.group_size, 8u);
    }
  }
  EXPECT_NEAR(replica_s, 0.075, 1e-9);
  for (const CommPart& p : full.comm) EXPECT_EQ(p.scope, Scope::kInterNode);
  // Over 2 nodes at 25 GB/s the hybrid layout's per-layer gathers run at
  // NVLink speed: it is faster than sharding over all 16.
  EXPECT_LT(hsdp.step_s, full.step_s);
}

// ZeRO inside model-parallel layouts: tp2 x dp8 with ZeRO-3 (FSDP with
// tensor parallelism, as OPT-175B): 7.5e9 / 2 x 16 B / 8 = 7.5e9 B; ZeRO-2:
// 2 B x 3.75e9 + 14 B x 3.75e9 / 8 = 14.0625e9 B.
TEST(Advisor, ZeroInsideTensorParallelLayouts) {
  const AdvisorModel m = zero_paper_model();
  const AdvisorCluster c = cluster(16, 8, 80);
  EXPECT_NEAR(estimate(m, c, {}, layout(2, 1, 8, 3, 8)).memory.model_states(), 7.5e9, 1e3);
  EXPECT_NEAR(estimate(m, c, {}, layout(2, 1, 8, 2, 8)).memory.model_states(), 14.0625e9, 1e3);
  bool saw_tp_zero3 = false;
  for (const Estimate& e : advise(m, c, {}).candidates)
    saw_tp_zero3 = saw_tp_zero3 || (e.layout.tp > 1 && e.layout.zero == 3);
  EXPECT_TRUE(saw_tp_zero3);
}

// ZeRO-1 reduce-scatters once per step (at the accumulation boundary),
// ZeRO-2 every micro-batch (DeepSpeed's engine.allreduce_gradients).
TEST(Advisor, ZeroTwoReducesEveryMicroBatch) {
  const AdvisorModel m = zero_paper_model();
  const AdvisorCluster c = cluster(16, 8, 80);
  auto reduce_scatters = [&](int zero, size_t micro) {
    double ops = 0;
    for (const CommPart& p : estimate(m, c, {}, layout(1, 1, 16, zero, micro)).comm)
      if (p.collective == Collective::kReduceScatter) ops += p.operations;
    return ops;
  };
  EXPECT_EQ(reduce_scatters(1, 4), reduce_scatters(1, 1));
  EXPECT_EQ(reduce_scatters(2, 4), 4 * reduce_scatters(2, 1));
}

TEST(Advisor, SettingsInTheLabel) {
  Layout l = layout(8, 4, 12, 1, 12);
  l.sp = true;
  l.vpp = 3;
  l.recompute = Recompute::kSelective;
  EXPECT_EQ(label(l), "tp8 x pp4 x dp12 zero1 sp vpp3 recompute=selective");
  EXPECT_EQ(label(Layout{1, 1, 8, 1, 0, false, 1, false, Recompute::kFull}), "ddp recompute=full");
}

// The published runs of data/advise/public_configs.csv (sources there and in
// docs/advise.md): each on its own hardware (nominal busbw inside and across
// nodes, 8 GPUs per node, peak x 0.45 on large GEMMs, the advisor's defaults
// otherwise). For every run a layout must fit, and the published layout's
// neighbourhood -- tp and pp each within a factor 2 of the published ones
// (dp follows; ZeRO stage, micro-batches, recomputation, sequence
// parallelism and interleaving free) -- must hold one of the advisor's first
// kPublicTop layouts, or one whose step is within kPublicSlack of the first's
// (closer than the estimates can tell apart). The published shape itself
// must fit too.
struct PublicRun {
  std::string name, source, gpu, attention;
  double memory_gib = 0, peak_tflops = 0, intra = 0, inter = 0, params = 0;
  size_t ranks = 0, layers = 0, hidden = 0, heads = 0, seq = 0, batch = 0, tp = 0, pp = 0, dp = 0;
  int zero = 0;
};

std::vector<PublicRun> public_runs() {
  std::ifstream in(std::string(CCSCOPE_DS_CONFIG_DIR) + "/../advise/public_configs.csv");
  std::vector<PublicRun> runs;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> f;
    std::stringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) f.push_back(cell);
    if (f.size() != 19) {
      ADD_FAILURE() << "not 19 fields: " << line;
      continue;
    }
    PublicRun r;
    r.name = f[0];
    r.source = f[1];
    r.gpu = f[2];
    r.memory_gib = std::stod(f[3]);
    r.peak_tflops = std::stod(f[4]);
    r.intra = std::stod(f[5]);
    r.inter = std::stod(f[6]);
    r.ranks = std::stoul(f[7]);
    r.params = std::stod(f[8]);
    r.layers = std::stoul(f[9]);
    r.hidden = std::stoul(f[10]);
    r.heads = std::stoul(f[11]);
    r.seq = std::stoul(f[12]);
    r.batch = std::stoul(f[13]);
    r.attention = f[14];
    r.tp = std::stoul(f[15]);
    r.pp = std::stoul(f[16]);
    r.dp = std::stoul(f[17]);
    r.zero = std::stoi(f[18]);
    runs.push_back(r);
  }
  return runs;
}

constexpr size_t kPublicTop = 5;
constexpr double kPublicSlack = 0.10;  // or a step within 10% of the first's

bool within_two(size_t a, size_t b) { return std::max(a, b) <= 2 * std::min(a, b); }

TEST(Advisor, PublicConfigurations) {
  const std::vector<PublicRun> runs = public_runs();
  ASSERT_GE(runs.size(), 15u);
  std::printf("%-12s %-30s %-50s %4s %5s %4s %5s %s\n", "model", "published", "advisor's first",
              "rank", "x", "near", "x", "the nearest");
  for (const PublicRun& r : runs) {
    AdvisorModel m;
    m.parameters = r.params;
    m.layers = r.layers;
    m.hidden = r.hidden;
    m.heads = r.heads;
    m.sequence_length = r.seq;
    m.global_batch = r.batch;
    m.flash_attention = r.attention == "flash";
    AdvisorCluster c = cluster(r.ranks, 8, r.memory_gib);
    c.flops_per_rank = r.peak_tflops * 1e12 * 0.45;
    flat(c, Scope::kIntraNode, r.intra);
    flat(c, Scope::kInterNode, r.inter);
    c.intra_step_latency_s = 5e-6;  // as the verb's expected figures
    c.inter_step_latency_s = 10e-6;
    ASSERT_EQ(validate(m, c, {}), "") << r.name;
    const Advice a = advise(m, c, {});
    ASSERT_TRUE(a.recommended) << r.name << ": " << a.reason;
    // Ranks among the layouts that fit (they come first), 1-based.
    size_t exact = 0, neighbour = 0;
    for (size_t i = 0; i < a.candidates.size() && a.candidates[i].fits; ++i) {
      const Layout& l = a.candidates[i].layout;
      if (!neighbour && l.ep == 1 && within_two(l.tp, r.tp) && within_two(l.pp, r.pp))
        neighbour = i + 1;
      if (!exact && l.tp == r.tp && l.pp == r.pp && l.dp == r.dp && l.zero == r.zero &&
          l.shard == 0)
        exact = i + 1;
    }
    const std::string published = label(Layout{r.tp, r.pp, r.dp, 1, r.zero, false, 1});
    const double first = a.candidates[0].step_s;
    const double near = neighbour ? a.candidates[neighbour - 1].step_s / first : 0;
    const double same = exact ? a.candidates[exact - 1].step_s / first : 0;
    std::printf("%-12s %-30s %-50s %4s %5.3f %4zu %5.3f %s\n", r.name.c_str(), published.c_str(),
                label(a.candidates[0].layout).c_str(), exact ? std::to_string(exact).c_str() : "-",
                same, neighbour, near,
                neighbour ? label(a.candidates[neighbour - 1].layout).c_str() : "-");
    EXPECT_GT(exact, 0u) << r.name << ": the published " << published << " does not fit";
    ASSERT_GT(neighbour, 0u) << r.name;
    EXPECT_TRUE(neighbour <= kPublicTop || near <= 1 + kPublicSlack)
        << r.name << ": nothing near the published " << published << " among the first "
        << kPublicTop << " or within " << 100 * kPublicSlack << "% of the first ("
        << label(a.candidates[0].layout) << "): the nearest is " << neighbour << "th, " << near
        << " x its step";
  }
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
  // us; then all-gathers the updated parameters after the step, as ccscope
  // train does, exposed: 0.83968 ms.
  o.overlap = true;
  const Estimate z1 = estimate(m, c, o, layout(1, 1, 2, 1));
  EXPECT_NEAR(z1.comm_s, 2 * 0.83968e-3, 1e-9);
  EXPECT_NEAR(z1.exposed_comm_s, 0.83968e-3 + 0.8192e-6, 1e-9);
}

// A transformer's ZeRO-1 all-gathers its updated parameters under the next
// step's first forward (Megatron-LM's --overlap-param-gather): 7.5e9 x 2 B
// over 16 ranks inter-node at 25 GB/s, 15e9 x 15/16 / 25e9 = 0.5625 s in 25
// MiB buckets; one micro-batch's forward, a third of the compute (64 x
// 98757069766656 FLOPs / 16 ranks at 400e12 x 4096 / 4160 = 1.003 s), hides
// 0.334 s of it; --no-overlap exposes all of it.
TEST(Advisor, ZeroOneGathersUnderTheNextForward) {
  const AdvisorModel m = zero_paper_model();
  const AdvisorCluster c = cluster(16, 8, 80);
  AdvisorOptions o;
  auto gather = [&](const AdvisorOptions& opt) {
    for (const CommPart& p : estimate(m, c, opt, layout(1, 1, 16, 1, 1)).comm)
      if (p.collective == Collective::kAllGather) return p;
    return CommPart{};
  };
  const double compute = 64 * 98757069766656.0 / (16 * 400e12 * 4096 / 4160);
  EXPECT_NEAR(estimate(m, c, o, layout(1, 1, 16, 1, 1)).compute_s, compute, 1e-9);
  const CommPart hidden = gather(o);
  EXPECT_NEAR(hidden.seconds, 15e9 * 15 / 16 / 25e9, 1e-9);
  EXPECT_NEAR(hidden.exposed_seconds, hidden.seconds - compute / 3, 1e-9);
  o.overlap = false;
  EXPECT_NEAR(gather(o).exposed_seconds, hidden.seconds, 1e-12);
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
// So at 300 GB/s tensor parallelism beats the pipeline (0.109 s against
// pp8's 0.176); at 20 GB/s the pipeline wins (0.2 s against tp2's 0.77).
// (Figures before sequence parallelism, the GEMM efficiency and ZeRO-1's
// gathers under the next forward: the order is what is checked.)
TEST(Advisor, SlowIntraNodeLinksTurnTensorParallelIntoPipeline) {
  AdvisorModel m = zero_paper_model();
  m.parameters = 7e9;
  m.global_batch = 8;
  AdvisorCluster fast = cluster(8, 8, 80);
  fast.flops_per_rank = 1e15;
  // 1F1B only: interleaving 16 one-layer chunks would shrink pp's bubble to
  // 1/32 of its compute and win at 300 GB/s too (see InterleavedSchedule).
  AdvisorOptions o;
  o.interleave = false;
  // The fastest tensor-parallel (pp 1) and pipeline (tp 1) layouts; ZeRO-1's
  // gathers hidden under the next forward make plain data parallelism
  // compete with both, so the two are compared with each other.
  auto fastest = [](const Advice& advice, bool tensor) {
    double best = 1e30;
    for (const Estimate& e : advice.candidates)
      if (e.fits &&
          (tensor ? e.layout.tp > 1 && e.layout.pp == 1 : e.layout.tp == 1 && e.layout.pp > 1))
        best = std::min(best, e.step_s);
    return best;
  };
  const Advice a = advise(m, fast, o);
  ASSERT_TRUE(a.recommended);
  EXPECT_LT(fastest(a, true), fastest(a, false));
  EXPECT_EQ(a.rule.rfind("does not fit one GPU, fast intra-node links", 0), 0u) << a.rule;
  ASSERT_TRUE(a.rule_pick);
  EXPECT_EQ(a.candidates[*a.rule_pick].layout.tp, 2u);

  AdvisorCluster slow = fast;
  flat(slow, Scope::kIntraNode, 20);
  const Advice b = advise(m, slow, o);
  ASSERT_TRUE(b.recommended);
  EXPECT_LT(fastest(b, false), fastest(b, true));
  EXPECT_EQ(b.candidates[*b.recommended].layout.tp, 1u);
  // The rule of thumb, without a fast interconnect: ZeRO-2 with offload, slower.
  EXPECT_NE(b.rule.find("no fast interconnect"), std::string::npos) << b.rule;
  ASSERT_TRUE(b.rule_pick);
  EXPECT_EQ(label(b.candidates[*b.rule_pick].layout), "zero2+offload");
  EXPECT_NE(b.rule_verdict.find("faster"), std::string::npos) << b.rule_verdict;
  // Tensor parallelism's own estimate got slower by what its all-reduces take
  // at 20 GB/s.
  EXPECT_GT(fastest(b, true), fastest(a, true));
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
    if (l.pp > 1 || (l.tp > 1 && l.ep > 1)) {
      EXPECT_LE(l.zero, 1) << label(l);
    }
    if (l.shard > 0) {
      EXPECT_GE(l.zero, 2) << label(l);
      EXPECT_EQ(l.shard * l.tp, 8u) << "a node's data-parallel ranks: " << label(l);
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
