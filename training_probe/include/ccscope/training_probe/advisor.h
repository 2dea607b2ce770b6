#pragma once
// The strategy advisor (`ccscope advise`): from a model's size, the GPUs'
// memory, the rank count and this cluster's measured bandwidth curves, the
// memory per rank and the time per step of every layout (DDP, ZeRO-1/2/3 with
// and without CPU offload, tensor, pipeline and expert parallel and their
// combinations), the fastest that fits, the runner-up, and what the rule of
// thumb would have picked, with a sentence when the numbers disagree with it.
// Pure functions of their inputs: no files, no flags (app/src/advise_verb.cpp).
//
// Formulas (each documented where it is computed, advisor.cpp):
//  - model states: the ZeRO paper's accounting (accounting.h expected_memory),
//    over Psi / (tp pp) dense parameters and Psi_E / (tp pp ep) expert ones;
//  - activations: Korthikanti et al. 2022 (recomputation none, selective or
//    full; sequence parallelism; FlashAttention drops the 5 a s / h term) for
//    transformers, the probe's own buffers for `probe`;
//  - compute: 6 Psi_active + 12 L h s FLOPs per token (forward + backward),
//    plus what recomputation repeats, at the achieved rate times a GEMM-size
//    efficiency, or a measured single-rank time divided over the ranks;
//  - communication: nccl-tests' bus bandwidth taken from the measured curve at
//    each operation's size, time = size x bus factor / busbw;
//  - pipeline bubble: (p-1) / (v m) of the compute (1F1B, v = 1; the
//    interleaved schedule of Narayanan et al. 2021 with v chunks per rank,
//    which moves v times the point-to-point volume);
//  - hybrid sharding (HSDP, ZeRO++'s hierarchical partitioning): ZeRO-2/3
//    inside a node's data-parallel ranks, replicas across nodes.
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccscope/records/collective.h"
#include "ccscope/training_probe/model.h"

namespace ccscope::training_probe {

// Activation recomputation: model.h's Recompute.

// kTransformer: a GPT-style decoder (Megatron-LM's accounting). kProbe:
// ccscope train's MLP (`depth` linear layers of width x width + bias), so that
// predictions can be checked against `ccscope train` on the same machine.
enum class ModelKind { kTransformer, kProbe };
std::string_view name(ModelKind kind);

struct AdvisorModel {
  ModelKind kind = ModelKind::kTransformer;
  // Psi: every parameter, every expert's included. kProbe: 0 computes it from
  // hidden (width) and layers (depth), experts included.
  double parameters = 0;
  size_t layers = 0;  // transformer layers (kProbe: linear layers, train's --depth)
  size_t hidden = 0;  // h (kProbe: train's --width)
  size_t heads = 0;   // attention heads a; 0: hidden / 128, at least 1
  // Mixture of experts: experts per MoE layer (0: dense) and experts per
  // token. Transformer: every layer's MLP is a MoE layer; kProbe: every odd
  // layer but the last, as ccscope train's ep.
  size_t experts = 0;
  size_t top_k = 1;
  // Of `parameters`, those in experts (transformer; 0: everything outside
  // attention, Psi - 4 L h^2). kProbe computes it.
  double expert_parameters = 0;
  size_t sequence_length = 2048;  // tokens per sample (kProbe: 1, a sample is a row)
  size_t global_batch = 1024;     // samples per optimizer step
  Precision precision = Precision::kBFloat16;
  size_t optimizer_words = 2;  // state_words_per_parameter: Adam 2, SGD with momentum 1
  // Attention without the s^2 score matrix kept for backward (FlashAttention,
  // recomputed inside its backward kernel): Korthikanti's 5 a s / h term
  // drops out. Transformers only.
  bool flash_attention = true;
};

// Why the model cannot be advised on ("" when it can).
std::string validate(const AdvisorModel& model);

// The collectives the advisor models, described in records/collective.h
// (their bus factors are nccl-tests' from there).
inline constexpr Collective kAdvisedCollectives[] = {Collective::kAllReduce, Collective::kAllGather,
                                                     Collective::kReduceScatter,
                                                     Collective::kAllToAll, Collective::kSendRecv};
// Where a group's ranks sit: all on one node, or across nodes.
enum class Scope { kIntraNode, kInterNode };
// The advice's spelling: "all_reduce", "all_gather", "reduce_scatter",
// "all_to_all", "sendrecv" (ccscope.advice/1 and its console lines; records
// spell them "allreduce", ... -- kept, as documents already hold it).
std::string_view advice_name(Collective collective);
std::string_view name(Scope scope);  // "intra-node", "inter-node"

// One measured size of a collective: nccl-tests' size convention (all-gather
// the output, reduce-scatter the input, all-to-all one rank's send buffer),
// bus bandwidth, time.
struct CurvePoint {
  double bytes = 0;
  double busbw_GBps = 0;
  double time_s = 0;
};
// Samples sorted by size, one point per size (the median busbw and time of
// that size's samples); points without a positive size or busbw dropped.
std::vector<CurvePoint> make_curve(std::vector<CurvePoint> samples);

// nccl-tests' bus factor (records/collective.h), over at least one rank.
double bus_factor(Collective collective, size_t ranks);
// The curve's busbw at `bytes`: linear in log2(size) between the two nearest
// points; the largest point's beyond it; below the smallest, the smallest
// point's latency floor (see operation_seconds). `curve` non-empty.
double curve_busbw(const std::vector<CurvePoint>& curve, double bytes);
// Seconds of one operation of `bytes` over `ranks`: bytes x bus factor /
// busbw(bytes); below the curve's smallest size, that size's time (a latency
// floor: small operations cost what the smallest measured one did).
double operation_seconds(const std::vector<CurvePoint>& curve, Collective collective, double bytes,
                         size_t ranks);

// Bandwidth curves per collective and scope; an empty curve is missing.
struct BandwidthTable {
  std::map<std::pair<Collective, Scope>, std::vector<CurvePoint>> curves;
  std::vector<CurvePoint>& at(Collective c, Scope s) { return curves[{c, s}]; }
  const std::vector<CurvePoint>& at(Collective c, Scope s) const;  // empty when missing
  bool empty() const;
};

// The curve an estimate uses for (collective, scope): its own, else the same
// scope's closest collective (busbw is comparable across them), else the
// other scope's; `fallback` says which stood in ("" when its own). Null when
// the table is empty.
struct ResolvedCurve {
  const std::vector<CurvePoint>* curve = nullptr;
  std::string fallback;
};
ResolvedCurve resolve_curve(const BandwidthTable& table, Collective collective, Scope scope);

struct AdvisorCluster {
  size_t ranks = 1;
  size_t ranks_per_node = 8;  // capped at ranks; ranks are placed node by node
  double gpu_memory_bytes = 0;
  // Of the GPU's memory, what a framework gets to use (CUDA context, the
  // allocator's fragmentation and buffers take the rest).
  double usable_memory_fraction = 0.9;
  double host_memory_bytes = 0;  // per node, for offload; 0: unknown (not checked)
  double pcie_GBps = 25;         // per rank, host <-> device (offload)
  // Parameters per second one rank's CPU optimizer steps (offload; DeepSpeed's
  // CPU Adam is of this order per GPU's share of a node's cores).
  double host_optimizer_rate = 1e9;
  // Achieved FLOP/s per rank on large GEMMs (peak x model FLOP utilisation);
  // a layout's rate is this x gemm_efficiency(n) of its smallest GEMM
  // dimension n (AdvisorOptions::gemm_knee).
  double flops_per_rank = 0;
  // Measured: one rank's compute seconds for the whole global batch (wins over
  // flops_per_rank; `ccscope train --strategy single` for kProbe).
  double compute_seconds = 0;
  BandwidthTable bandwidth;
  // Latency per algorithm step, added to every operation: all-gather,
  // reduce-scatter and all-to-all n-1 steps (rings), all-reduce 2 ceil(log2
  // n) (NCCL's tree where latency matters), sendrecv 1. 0 (the default):
  // the curves' own latency floor only, measured at their rank count. The
  // verb sets NCCL's tuning-model figures with topo's expected bandwidth.
  double intra_step_latency_s = 0;
  double inter_step_latency_s = 0;
};
// The steps above of one operation over `ranks`.
double latency_steps(Collective collective, size_t ranks);

struct AdvisorOptions {
  bool overlap = true;  // DDP/ZeRO communication overlaps backward (forward: ZeRO-3)
  double bucket_bytes = 25.0 * 1024 * 1024;  // DDP's bucket_cap_mb, DeepSpeed's bucket sizes
  bool tp_across_nodes = false;              // by default a tensor-parallel group stays in a node
  // Samples per micro-batch at least (unless the replica's batch is smaller):
  // the arithmetic divides compute evenly over micro-batches, which small
  // GEMMs do not (a transformer's sample is a whole sequence; the probe's a
  // single row, far below a GEMM's rate alone).
  size_t min_micro_batch = 1;
  // The rule of thumb's thresholds: a "fast interconnect" (NVLink) gives an
  // intra-node all-reduce busbw above what PCIe gives; a "slow network" an
  // inter-node busbw of 100 Gbit/s or less; "many layers" 4 per node at least.
  double fast_intra_GBps = 50;
  double slow_inter_GBps = 12.5;
  size_t many_layers_per_node = 4;
  // What the search may choose per layout (each layout at its fastest that
  // fits): recomputation kinds tried (empty: none, selective, full), sequence
  // parallelism with tp, interleaved schedules with pp, hybrid sharding.
  std::vector<Recompute> recompute;
  bool sequence_parallel = true;
  bool interleave = true;
  bool hybrid_shard = true;
  // The GEMM-size efficiency: a layout's rate is flops_per_rank x n / (n +
  // gemm_knee), n the smallest of its GEMMs' dimensions (micro-batch tokens,
  // h / t): small per-rank GEMMs (large tp, short micro-batches) run below
  // the large-GEMM rate. 0: flat.
  double gemm_knee = 64;
};
// The efficiency above: n / (n + knee), 1 for knee 0.
double gemm_efficiency(double n, double knee);

// Why the cluster or options cannot be advised on ("" when they can).
std::string validate(const AdvisorModel& model, const AdvisorCluster& cluster,
                     const AdvisorOptions& options);

// A layout: rank = (pp_index * dp + dp_index) * tp + tp_index (Megatron-LM's
// order, as ccscope train's ParallelOptions), expert-parallel groups carved
// out of the data-parallel one (ep consecutive dp indices); ZeRO stage 0-3
// over the data-parallel group (0: DDP), offload: ZeRO-Offload (stage 1/2:
// optimizer state and its step on the CPU; stage 3: parameters too).
// Settings chosen per layout with the micro-batch count: sequence
// parallelism (tp > 1: all-gather and reduce-scatter in place of each
// all-reduce, the activations outside attention and the MLP split too),
// activation recomputation, the interleaved schedule's chunks per rank (vpp,
// pp > 1; Megatron-LM: L divisible by pp vpp, micro-batches by pp), and hybrid
// sharding: ZeRO-2/3 over `shard` consecutive data-parallel ranks (a node's),
// the dp / shard replicas all-reducing the gradient shards once per step
// (0: over the whole data-parallel group).
struct Layout {
  size_t tp = 1, pp = 1, dp = 1, ep = 1;
  int zero = 0;
  bool offload = false;
  size_t micro_batches = 1;  // gradient accumulation / pipeline micro-batches per step
  bool sp = false;
  Recompute recompute = Recompute::kNone;
  size_t vpp = 1;
  size_t shard = 0;
  // The same layout, whatever the micro-batch count and the settings.
  bool same_shape(const Layout& other) const {
    return tp == other.tp && pp == other.pp && dp == other.dp && ep == other.ep &&
           zero == other.zero && offload == other.offload && shard == other.shard;
  }
};
// "ddp", "zero2+offload", "tp8 x pp2 x dp4 zero1", "single", "zero3 hsdp8",
// "tp8 x pp4 x dp12 zero1 sp vpp3 recompute=selective".
std::string label(const Layout& layout);

// One kind of communication of a layout, per step on the busiest rank.
struct CommPart {
  std::string group;  // "tp", "pp", "dp", "ep" (dp: dense and expert data-parallel)
  Collective collective = Collective::kAllReduce;
  Scope scope = Scope::kIntraNode;
  size_t group_size = 1;
  double operation_bytes = 0;  // one operation (nccl-tests' size)
  double operations = 0;       // per step
  double busbw_GBps = 0;       // the curve's at operation_bytes
  double seconds = 0;          // all of them
  double exposed_seconds = 0;  // of it, not hidden under compute
  std::string fallback;        // "" or which curve stood in for a missing one
};

struct MemoryPerRank {
  double parameters = 0, gradients = 0, optimizer = 0;  // model states on the GPU
  // ZeRO-3's gathered layers (two, prefetch) and one layer's gradient; full
  // recomputation: one layer's activations rematerialised in backward.
  double working = 0;
  double activations = 0;  // kept for backward, the micro-batches in flight
  double host = 0;         // offloaded states in host memory
  double model_states() const { return parameters + gradients + optimizer; }
  double total() const { return model_states() + working + activations; }
};

struct Estimate {
  Layout layout;
  MemoryPerRank memory;
  bool fits = false;           // GPU memory (and host memory when known)
  std::string why_not;         // "" or what does not fit
  double compute_s = 0;        // the busiest stage's forward + backward (+ recomputation)
  double gemm_efficiency = 1;  // of the large-GEMM rate (flops_per_rank)
  double bubble_s = 0;         // pipeline fill and drain (with the ramp's transfers)
  double comm_s = 0;           // every operation's time
  double exposed_comm_s = 0;
  double offload_s = 0;  // PCIe transfers and the CPU optimizer step
  double step_s = 0;     // compute + bubble + exposed communication + offload
  std::vector<CommPart> comm;
};

// One estimate: the layout must be valid (candidate_layouts' checks).
Estimate estimate(const AdvisorModel& model, const AdvisorCluster& cluster,
                  const AdvisorOptions& options, const Layout& layout);

struct Advice {
  // One estimate per layout (its best micro-batch count): those that fit,
  // fastest first, then the others, smallest memory first.
  std::vector<Estimate> candidates;
  std::optional<size_t> recommended, runner_up;  // indices into candidates
  std::string reason;                            // one line
  std::string rule;                              // the rule of thumb that applies, in words
  std::optional<size_t> rule_pick;               // its layout in candidates
  std::string rule_verdict;                      // agrees, or why the numbers disagree
  std::vector<std::string> notes;                // fallbacks, assumptions, skipped layouts
};

// Every valid layout (tp over the divisors of ranks per node, pp over those
// of the ranks with layers >= pp, dp the rest, ep over dp's divisors that
// divide the experts), each at its best micro-batch count, and the advice.
// validate() first.
Advice advise(const AdvisorModel& model, const AdvisorCluster& cluster,
              const AdvisorOptions& options);

// The advice as a JSON document (schema "ccscope.advice/1").
std::string advice_json(const Advice& advice, const AdvisorModel& model,
                        const AdvisorCluster& cluster, const AdvisorOptions& options);

}  // namespace ccscope::training_probe
