#include "ccscope/training_probe/advisor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <utility>

#include "ccscope/common/sizes.h"
#include "ccscope/common/statistics.h"
#include "ccscope/training_probe/accounting.h"

namespace ccscope::training_probe {

std::string_view name(ModelKind kind) {
  return kind == ModelKind::kProbe ? "probe" : "transformer";
}

std::string_view advice_name(Collective collective) {
  switch (collective) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllToAll:
      return "all_to_all";
    case Collective::kSendRecv:
      return "sendrecv";
    default:
      return ccscope::name(collective);  // not advised on
  }
}

std::string_view name(Scope scope) {
  return scope == Scope::kIntraNode ? "intra-node" : "inter-node";
}

double latency_steps(Collective collective, size_t ranks) {
  if (ranks <= 1) return 0;
  const double n = static_cast<double>(ranks);
  switch (collective) {
    case Collective::kAllReduce:
      return 2 * std::ceil(std::log2(n));
    case Collective::kSendRecv:
      return 1;
    default:
      return n - 1;
  }
}

double gemm_efficiency(double n, double knee) {
  if (!(knee > 0)) return 1;
  return n > 0 ? n / (n + knee) : 0;
}

namespace {

std::string gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024)); }

std::string size_text(double bytes) {
  return format_size(static_cast<size_t>(std::max(0.0, std::round(bytes))));
}

}  // namespace

std::vector<CurvePoint> make_curve(std::vector<CurvePoint> samples) {
  std::erase_if(samples, [](const CurvePoint& p) {
    return !(p.bytes > 0) || !(p.busbw_GBps > 0) || !std::isfinite(p.busbw_GBps);
  });
  std::sort(samples.begin(), samples.end(),
            [](const CurvePoint& a, const CurvePoint& b) { return a.bytes < b.bytes; });
  std::vector<CurvePoint> curve;
  for (size_t i = 0; i < samples.size();) {
    size_t j = i;
    std::vector<double> busbw, time;
    for (; j < samples.size() && samples[j].bytes == samples[i].bytes; ++j) {
      busbw.push_back(samples[j].busbw_GBps);
      time.push_back(samples[j].time_s);
    }
    curve.push_back({samples[i].bytes, median(busbw), median(time)});
    i = j;
  }
  return curve;
}

double bus_factor(Collective collective, size_t ranks) {
  return bus_bandwidth_factor(collective, static_cast<int>(std::max<size_t>(ranks, 1)));
}

double curve_busbw(const std::vector<CurvePoint>& curve, double bytes) {
  const CurvePoint& first = curve.front();
  const CurvePoint& last = curve.back();
  // Below the smallest size the time stays that size's (a latency floor), so
  // the effective busbw falls in proportion to the size.
  if (bytes < first.bytes) return first.busbw_GBps * bytes / first.bytes;
  if (bytes >= last.bytes) return last.busbw_GBps;
  const auto above = std::upper_bound(curve.begin(), curve.end(), bytes,
                                      [](double b, const CurvePoint& p) { return b < p.bytes; });
  const CurvePoint& hi = *above;
  const CurvePoint& lo = *(above - 1);
  const double x = std::log2(bytes / lo.bytes) / std::log2(hi.bytes / lo.bytes);
  return lo.busbw_GBps + x * (hi.busbw_GBps - lo.busbw_GBps);
}

double operation_seconds(const std::vector<CurvePoint>& curve, Collective collective, double bytes,
                         size_t ranks) {
  if (ranks <= 1 || !(bytes > 0)) return 0;
  // Below the smallest size curve_busbw falls with the size: the time stays
  // the smallest size's (the latency floor).
  return bytes * bus_factor(collective, ranks) / (curve_busbw(curve, bytes) * 1e9);
}

const std::vector<CurvePoint>& BandwidthTable::at(Collective c, Scope s) const {
  static const std::vector<CurvePoint> kMissing;
  const auto it = curves.find({c, s});
  return it == curves.end() ? kMissing : it->second;
}

bool BandwidthTable::empty() const {
  for (const auto& [key, curve] : curves)
    if (!curve.empty()) return false;
  return true;
}

ResolvedCurve resolve_curve(const BandwidthTable& table, Collective collective, Scope scope) {
  // The closest stand-ins first: busbw is nccl-tests' figure comparable
  // across collectives (each moves its bytes over the same links).
  using C = Collective;
  std::vector<C> order;
  switch (collective) {
    case C::kAllReduce:
      order = {C::kAllReduce, C::kReduceScatter, C::kAllGather, C::kAllToAll, C::kSendRecv};
      break;
    case C::kAllGather:
      order = {C::kAllGather, C::kReduceScatter, C::kAllReduce, C::kAllToAll, C::kSendRecv};
      break;
    case C::kReduceScatter:
      order = {C::kReduceScatter, C::kAllGather, C::kAllReduce, C::kAllToAll, C::kSendRecv};
      break;
    case C::kAllToAll:
      order = {C::kAllToAll, C::kAllGather, C::kReduceScatter, C::kAllReduce, C::kSendRecv};
      break;
    case C::kSendRecv:
      order = {C::kSendRecv, C::kAllReduce, C::kAllGather, C::kReduceScatter, C::kAllToAll};
      break;
    default:  // not advised on: its own curve only
      order = {collective};
      break;
  }
  const Scope other = scope == Scope::kIntraNode ? Scope::kInterNode : Scope::kIntraNode;
  for (Scope s : {scope, other}) {
    for (C c : order) {
      const auto& curve = table.at(c, s);
      if (curve.empty()) continue;
      ResolvedCurve r{&curve, ""};
      if (c != collective || s != scope) {
        r.fallback = fmt::format("{} {}: no curve, used {} {}'s", name(scope),
                                 advice_name(collective), name(s), advice_name(c));
        if (s != scope)
          r.fallback +=
              scope == Scope::kIntraNode ? " (likely pessimistic)" : " (likely optimistic)";
      }
      return r;
    }
  }
  return {};
}

std::string label(const Layout& l) {
  std::string settings;
  if (l.shard > 0 && l.shard < l.dp) settings += fmt::format(" hsdp{}", l.shard);
  if (l.sp) settings += " sp";
  if (l.vpp > 1) settings += fmt::format(" vpp{}", l.vpp);
  if (l.recompute != Recompute::kNone) settings += fmt::format(" recompute={}", name(l.recompute));
  std::vector<std::string> parts;
  if (l.tp > 1) parts.push_back(fmt::format("tp{}", l.tp));
  if (l.pp > 1) parts.push_back(fmt::format("pp{}", l.pp));
  const std::string zero =
      l.zero > 0 ? fmt::format("zero{}{}", l.zero, l.offload ? "+offload" : "") : "";
  if (parts.empty() && l.ep == 1) {
    if (l.zero > 0) return zero + settings;
    return (l.dp > 1 ? "ddp" : "single") + settings;
  }
  if (l.dp > 1 || parts.empty()) parts.push_back(fmt::format("dp{}", l.dp));
  if (l.ep > 1) parts.push_back(fmt::format("ep{}", l.ep));
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " x ") + p;
  if (!zero.empty()) out += " " + zero;
  return out + settings;
}

namespace {

constexpr double kDdpFirstBucket = 1024.0 * 1024;
constexpr size_t kMaxChunks = 8;  // the interleaved schedule's chunks per rank, at most

// What a layout's arithmetic needs of the model, per kind.
struct Facts {
  bool probe = false;
  double psi = 0, psi_expert = 0, psi_dense = 0, psi_active = 0;
  size_t layers = 0;      // what pipeline stages cut
  size_t moe_layers = 0;  // layers with experts
  size_t pairs = 0;       // probe: Megatron column/row pairs
  double element = 4;     // bytes of a parameter, gradient, activation
  double flops_per_sample = 0;
  // Tensor parallel: all-reduces per layer per micro-batch (forward +
  // backward) and each one's elements per sample.
  double tp_per_layer = 0;
  double tp_elements = 0;
  double boundary_elements = 0;  // pipeline: one boundary tensor per sample
  double a2a_elements = 0;       // expert parallel: one rank's send buffer per sample
  double a2a_per_moe_layer = 4;  // dispatch and combine, forward and backward
  double full_recompute_flops = 0, selective_recompute_flops = 0;  // per sample
  // Activations kept for backward per layer per sample, tensor-parallel t.
  double s = 1, h = 0, a = 1, k = 1, width = 0;
  size_t depth = 0;
  bool flash = false;  // attention without the s^2 scores kept (FlashAttention)
  double activation_bytes(size_t t, bool sp = false, Recompute rc = Recompute::kNone) const {
    const double tt = static_cast<double>(t);
    if (probe) {
      // ccscope train keeps each layer's input and pre-activation [batch x
      // width]; under tp a pair keeps the column layer's input (full) and
      // pre-activation (width / t), the row layer's input (width / t) and
      // pre-activation (full): (2 + 2/t) width per pair; an odd last layer is
      // replicated (2 width).
      if (t == 1) return 2 * width * element;
      const double odd = depth % 2 ? 2 * width : 0;
      return (static_cast<double>(pairs) * (2 + 2 / tt) * width + odd) /
             static_cast<double>(depth) * element;
    }
    // Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
    // Transformer Models", 16-bit activations, bytes per layer for a
    // micro-batch of b samples (Table 2): tensor parallel without sequence
    // parallelism s b h (10 + 24/t + 5 a s / (h t)) (eq. 2: 10 s b h -- the
    // layer-norm inputs, dropout masks, the attention and MLP inputs -- held
    // whole on every tensor-parallel rank, the rest split by t); with
    // sequence parallelism all of it split, s b h / t (34 + 5 a s / h) (eq.
    // 4); selective recomputation drops the attention core's 5 a s / h term
    // (s b h (10 + 24/t), with sequence parallelism 34 s b h / t, eq. 6), and
    // so does FlashAttention, which keeps no s x s matrix for backward; full
    // recomputation keeps only each layer's input, 2 s b h (Table 2; split by
    // t under sequence parallelism, Megatron-LM keeps it sequence-sharded). A
    // mixture of experts processes each token top_k times: every extra copy
    // adds the MLP's split part, 16 s b h / t.
    if (rc == Recompute::kFull) return 2 * s * h / (sp ? tt : 1) * element / 2;
    const double attention = rc == Recompute::kSelective || flash ? 0 : 5 * a * s / h;
    double per = sp ? s * h * (34 + attention) / tt : s * h * (10 + 24 / tt + attention / tt);
    if (moe_layers > 0) per += (k - 1) * 16 / tt * s * h;
    return per * element / 2;
  }
};

Facts facts_of(const AdvisorModel& m) {
  Facts f;
  f.probe = m.kind == ModelKind::kProbe;
  f.element = static_cast<double>(element_bytes(m.precision));
  f.layers = m.layers;
  f.depth = m.layers;
  f.k = static_cast<double>(m.top_k);
  const double experts = static_cast<double>(m.experts);
  if (f.probe) {
    const double w = static_cast<double>(m.hidden);
    f.width = w;
    f.pairs = m.layers / 2;
    // ccscope train's ep: every odd layer but the last is a mixture of
    // experts, each expert a width x width + bias linear layer, the gate
    // [experts x width] without bias.
    f.moe_layers = m.experts > 0 && m.layers >= 2 ? (m.layers - 1) / 2 : 0;
    const double layer = w * w + w;
    const double moe = static_cast<double>(f.moe_layers);
    f.psi_expert = moe * experts * layer;
    f.psi_dense = (static_cast<double>(m.layers) - moe) * layer + moe * experts * w;
    f.psi = f.psi_dense + f.psi_expert;
    f.psi_active = f.psi_dense + moe * f.k * layer;
    // 2 FLOPs per multiply-add forward, 4 backward (input and weight gradients).
    f.flops_per_sample = 6 * f.psi_active;
    // A pair: one all-reduce forward (the row layer's partial outputs), one
    // backward (the column layer's input gradient), none backward for the
    // first pair; per layer on average.
    f.tp_per_layer =
        f.pairs > 0 ? (2.0 * static_cast<double>(f.pairs) - 1) / static_cast<double>(m.layers) : 0;
    f.tp_elements = w;
    f.boundary_elements = w;
    f.a2a_elements = f.k * w;
    return f;
  }
  const double L = static_cast<double>(m.layers);
  f.s = static_cast<double>(m.sequence_length);
  f.h = static_cast<double>(m.hidden);
  f.flash = m.flash_attention;
  f.a = static_cast<double>(m.heads ? m.heads : std::max<size_t>(1, m.hidden / 128));
  f.psi = m.parameters;
  f.moe_layers = m.experts > 0 ? m.layers : 0;
  f.psi_expert = m.experts == 0 ? 0
                                : (m.expert_parameters > 0 ? m.expert_parameters
                                                           : m.parameters - 4 * L * f.h * f.h);
  f.psi_dense = f.psi - f.psi_expert;
  f.psi_active = f.psi_dense + (m.experts ? f.psi_expert * f.k / experts : 0);
  // Forward + backward: 6 FLOPs per active parameter per token, plus the
  // attention scores and their product with V: 4 s h per token per layer
  // forward, 12 with backward (Narayanan et al. 2021's 72 B s L h^2 (1 + s /
  // (6h)) without the vocabulary term and without recomputation).
  f.flops_per_sample = f.s * (6 * f.psi_active + 12 * L * f.h * f.s);
  // Recomputation repeats forward work: full the whole forward (a third of
  // forward + backward), selective the attention core's QK^T and its product
  // with V, 4 s^2 h per layer per sample (Korthikanti et al. 2022, section 5;
  // with FlashAttention that recomputation is inside its backward already).
  f.full_recompute_flops = f.flops_per_sample / 3;
  f.selective_recompute_flops = m.flash_attention ? 0 : 4 * L * f.s * f.s * f.h;
  // Megatron-LM: two all-reduces forward (after attention, after the MLP)
  // and two backward per layer, each [b x s x h].
  f.tp_per_layer = 4;
  f.tp_elements = f.s * f.h;
  f.boundary_elements = f.s * f.h;
  f.a2a_elements = f.s * f.k * f.h;
  return f;
}

// Every rank r is on node r / ranks_per_node. A group of `size` ranks with
// `stride` (rank = base + i stride) stays in one node when each group's first
// and last rank share a node.
Scope group_scope(size_t stride, size_t size, size_t ranks, size_t per_node) {
  if (size <= 1) return Scope::kIntraNode;
  for (size_t base = 0; base < ranks; ++base) {
    if ((base / stride) % size != 0) continue;
    const size_t last = base + (size - 1) * stride;
    if (base / per_node != last / per_node) return Scope::kInterNode;
  }
  return Scope::kIntraNode;
}

size_t per_node(const AdvisorCluster& c) {
  return std::max<size_t>(1, std::min(c.ranks_per_node, c.ranks));
}

std::vector<size_t> divisors(size_t n) {
  std::vector<size_t> out;
  for (size_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

Strategy zero_strategy(int zero) {
  switch (zero) {
    case 1:
      return Strategy::kZero1;
    case 2:
      return Strategy::kZero2;
    case 3:
      return Strategy::kZero3;
    default:
      return Strategy::kDdp;
  }
}

// Operations of one kind, their time, and where the curve came from.
struct Timed {
  double seconds = 0;
  double last = 0;  // the last (smallest) operation's time: what overlap cannot hide
  double ops = 0;
  double op_bytes = 0;
  double busbw = 0;
  std::string fallback;
  Collective collective = Collective::kAllReduce;
  Scope scope = Scope::kIntraNode;
  size_t ranks = 1;
};

Timed time_ops(const AdvisorCluster& cluster, Collective c, Scope scope, size_t ranks,
               double op_bytes, double ops) {
  Timed t;
  t.collective = c;
  t.scope = scope;
  t.ranks = ranks;
  t.ops = ops;
  t.op_bytes = op_bytes;
  if (ranks <= 1 || !(op_bytes > 0) || !(ops > 0)) return t;
  const ResolvedCurve r = resolve_curve(cluster.bandwidth, c, scope);
  if (!r.curve) return t;
  t.fallback = r.fallback;
  const double one =
      operation_seconds(*r.curve, c, op_bytes, ranks) +
      latency_steps(c, ranks) * (scope == Scope::kIntraNode ? cluster.intra_step_latency_s
                                                            : cluster.inter_step_latency_s);
  t.seconds = one * ops;
  t.last = one;
  t.busbw = one > 0 ? op_bytes * bus_factor(c, ranks) / one / 1e9 : 0;
  return t;
}

// `total` bytes in buckets of at most `bucket` (DDP's and DeepSpeed's), the
// first of at most `first` when given (DDP's 1 MiB first bucket): the last
// bucket, the one backward fills last, holds what is left.
Timed time_buckets(const AdvisorCluster& cluster, Collective c, Scope scope, size_t ranks,
                   double total, double bucket, double first = 0) {
  if (!(total > 0) || ranks <= 1) return time_ops(cluster, c, scope, ranks, 0, 0);
  if (first > 0 && first < bucket && total > first) {
    Timed t = time_buckets(cluster, c, scope, ranks, total - first, bucket);
    t.seconds += time_ops(cluster, c, scope, ranks, first, 1).seconds;
    t.ops += 1;
    return t;
  }
  const double full = std::floor(total / bucket);
  const double rest = total - full * bucket;
  Timed t = time_ops(cluster, c, scope, ranks, std::min(bucket, total), full > 0 ? full : 1);
  if (full > 0 && rest > 0) {
    const Timed r = time_ops(cluster, c, scope, ranks, rest, 1);
    t.seconds += r.seconds;
    t.last = r.last;
    t.ops += 1;
  }
  return t;
}

CommPart part(const std::string& group, const Timed& t, double exposed) {
  CommPart p;
  p.group = group;
  p.collective = t.collective;
  p.scope = t.scope;
  p.group_size = t.ranks;
  p.operation_bytes = t.op_bytes;
  p.operations = t.ops;
  p.busbw_GBps = t.busbw;
  p.seconds = t.seconds;
  p.exposed_seconds = exposed;
  p.fallback = t.fallback;
  return p;
}

// Exposure of operations that overlap a compute window: what does not fit
// under it, and at least the last operation (it starts when the window ends).
double exposed_under(double seconds, double last, double window, bool overlap) {
  if (!overlap) return seconds;
  return std::min(seconds, std::max(seconds - window, last));
}

}  // namespace

std::string validate(const AdvisorModel& m) {
  if (m.layers == 0) return "the number of layers must be at least 1";
  if (m.hidden == 0) return "the hidden size must be at least 1";
  if (m.global_batch == 0) return "the global batch must be at least 1 sample";
  if (m.optimizer_words > 16) return "optimizer words per parameter must be 0 to 16";
  if (m.experts > 0 && (m.top_k == 0 || m.top_k > m.experts))
    return fmt::format("top-k {} must be 1 to the number of experts ({})", m.top_k, m.experts);
  if (m.experts == 0 && m.expert_parameters > 0) return "expert parameters given without experts";
  if (m.kind == ModelKind::kProbe) {
    if (m.parameters > 0)
      return "a probe model's parameters follow from its width and depth; do not give them";
    if (m.hidden > 46340) return "the probe's width must be 1 to 46340";
    return "";
  }
  if (!(m.parameters >= 1) || !std::isfinite(m.parameters))
    return "the number of parameters must be at least 1";
  if (m.sequence_length == 0) return "the sequence length must be at least 1";
  if (m.heads > m.hidden) return "more attention heads than the hidden size";
  if (m.experts > 0) {
    const double h = static_cast<double>(m.hidden);
    const double expert = m.expert_parameters > 0
                              ? m.expert_parameters
                              : m.parameters - 4 * static_cast<double>(m.layers) * h * h;
    if (!(expert > 0) || expert >= m.parameters)
      return fmt::format(
          "the experts' share of {:.3g} parameters is {:.3g}: give the parameters in experts "
          "(less than all)",
          m.parameters, expert);
  }
  return "";
}

std::string validate(const AdvisorModel& model, const AdvisorCluster& c, const AdvisorOptions& o) {
  if (std::string problem = validate(model); !problem.empty()) return problem;
  if (c.ranks == 0) return "the rank count must be at least 1";
  if (c.ranks > (size_t{1} << 20)) return "the rank count must be at most 1048576";
  if (c.ranks_per_node == 0) return "ranks per node must be at least 1";
  if (!(c.gpu_memory_bytes > 0)) return "the GPU memory must be positive";
  if (!(c.usable_memory_fraction > 0) || c.usable_memory_fraction > 1)
    return "the usable memory fraction must be in (0, 1]";
  if (c.host_memory_bytes < 0) return "the host memory must not be negative";
  if (!(c.pcie_GBps > 0)) return "the PCIe bandwidth must be positive";
  if (!(c.host_optimizer_rate > 0)) return "the host optimizer rate must be positive";
  if (!(c.compute_seconds > 0) && !(c.flops_per_rank > 0))
    return "give a compute rate (FLOP/s per rank) or a measured compute time";
  if (!(c.intra_step_latency_s >= 0) || !(c.inter_step_latency_s >= 0) ||
      !std::isfinite(c.intra_step_latency_s) || !std::isfinite(c.inter_step_latency_s))
    return "the step latencies must be 0 or more";
  if (c.ranks > 1 && c.bandwidth.empty())
    return "no bandwidth: give bench records (intra-node and inter-node) or busbw figures";
  if (!(o.bucket_bytes >= 1)) return "the bucket size must be at least 1 byte";
  if (o.min_micro_batch == 0) return "the smallest micro-batch must be at least 1 sample";
  if (!(o.gemm_knee >= 0) || !std::isfinite(o.gemm_knee))
    return "the GEMM efficiency's knee must be 0 or more";
  return "";
}

Estimate estimate(const AdvisorModel& model, const AdvisorCluster& cluster,
                  const AdvisorOptions& options, const Layout& l) {
  const Facts f = facts_of(model);
  Estimate e;
  e.layout = l;
  const size_t n = cluster.ranks;
  const size_t node = per_node(cluster);
  const double t = static_cast<double>(l.tp), p = static_cast<double>(l.pp);
  const double d = static_cast<double>(l.dp), ep = static_cast<double>(l.ep);
  const double m = static_cast<double>(l.micro_batches);
  const double v = static_cast<double>(std::max<size_t>(l.vpp, 1));
  // Hybrid sharding: ZeRO-2/3 over `shard` data-parallel ranks (HSDP's shard
  // group, a node's), dp / shard replicas of them.
  const bool hybrid = l.zero >= 2 && l.shard > 1 && l.shard < l.dp;
  const size_t shard_ranks = hybrid ? l.shard : l.dp;
  const size_t replicas = hybrid ? l.dp / l.shard : 1;
  // The busiest stage holds ceil(L / p) layers; interleaved, v chunks of
  // ceil(L / (p v)) (uneven chunks, as Llama 3's 126 layers over 16 stages;
  // Megatron-LM itself wants L a multiple of p v).
  const double stage_layers = v > 1 ? v * std::ceil(static_cast<double>(f.layers) / (p * v))
                                    : std::ceil(static_cast<double>(f.layers) / p);
  const double stage_share = stage_layers / static_cast<double>(f.layers);
  const double stage_moe = static_cast<double>(f.moe_layers) * stage_share;
  const double b = static_cast<double>(model.global_batch) / (d * m);  // samples per micro-batch
  const double dense = f.psi_dense * stage_share / t;
  const double expert = f.psi_expert * stage_share / (t * ep);
  const size_t expert_dp = l.dp / l.ep;

  // Model states: the ZeRO paper's accounting, the dense parameters sharded
  // over the data-parallel group (hybrid: the shard group), the experts' over
  // the expert-data-parallel one (dp / ep ranks hold the same experts).
  const Strategy strategy = zero_strategy(l.zero);
  const size_t words = model.optimizer_words;
  const MemoryFootprint md = expected_memory(strategy, static_cast<size_t>(std::llround(dense)),
                                             shard_ranks, model.precision, words);
  const MemoryFootprint me = expected_memory(strategy, static_cast<size_t>(std::llround(expert)),
                                             expert_dp, model.precision, words);
  MemoryPerRank& mem = e.memory;
  mem.parameters = md.parameters + me.parameters;
  mem.gradients = md.gradients + me.gradients;
  mem.optimizer = md.optimizer + me.optimizer;
  // The shard of the optimizer state this rank steps (ZeRO >= 1).
  const double shard =
      dense / static_cast<double>(shard_ranks) + expert / static_cast<double>(expert_dp);
  if (l.offload) {
    if (l.zero == 3) {
      // ZeRO-3 offload (ZeRO-Infinity to CPU): the shards of parameters,
      // gradients and optimizer state live in host memory.
      mem.host = mem.model_states();
      mem.parameters = mem.gradients = mem.optimizer = 0;
    } else {
      // ZeRO-Offload: the optimizer state (fp32 master weights included) and
      // the gradient shard it steps on the CPU.
      mem.host = mem.optimizer + f.element * shard;
      mem.optimizer = 0;
    }
  }
  // ZeRO-3 gathers a layer before its forward and backward, the next one
  // prefetched, and holds a layer's full gradient until it is reduce-scattered.
  const double layer_params = (dense + expert) / stage_layers;
  if (l.zero == 3) mem.working = 3 * f.element * layer_params;
  // 1F1B: the first stage holds min(p, m) micro-batches' activations of its
  // L/p layers; interleaved with v chunks per rank, (1 + (p-1)/(p v)) times
  // that (Korthikanti et al. 2022, section 4.2.3).
  double in_flight = l.pp > 1 ? std::min(p, m) : 1;
  if (l.pp > 1 && v > 1) in_flight *= 1 + (p - 1) / (p * v);
  mem.activations = stage_layers * in_flight * b * f.activation_bytes(l.tp, l.sp, l.recompute);
  // Full recomputation rematerialises one layer's activations in backward.
  if (l.recompute == Recompute::kFull && !f.probe)
    mem.working += b * f.activation_bytes(l.tp, l.sp, Recompute::kNone);
  const double usable = cluster.gpu_memory_bytes * cluster.usable_memory_fraction;
  e.fits = mem.total() <= usable;
  if (!e.fits)
    e.why_not = fmt::format("needs {} per rank of {} usable", gib(mem.total()), gib(usable));
  if (e.fits && cluster.host_memory_bytes > 0 && mem.host > 0) {
    const double host_usable = cluster.host_memory_bytes * cluster.usable_memory_fraction;
    const double host_node = mem.host * static_cast<double>(node);
    if (host_node > host_usable) {
      e.fits = false;
      e.why_not = fmt::format("offload needs {} of host memory per node of {} usable",
                              gib(host_node), gib(host_usable));
    }
  }

  // Compute: the ranks share the global batch's FLOPs evenly; the busiest
  // stage does ceil(L/p) / (L/p) of its share. Backward is 2/3 of it (of
  // what recomputation adds, all). A transformer's rate is the large-GEMM
  // rate x the GEMM-size efficiency of the layout's smallest GEMM dimension:
  // the micro-batch's tokens or h / t.
  double flops = f.flops_per_sample;
  if (l.recompute == Recompute::kFull) flops += f.full_recompute_flops;
  if (l.recompute == Recompute::kSelective) flops += f.selective_recompute_flops;
  if (!f.probe) e.gemm_efficiency = gemm_efficiency(std::min(b * f.s, f.h / t), options.gemm_knee);
  const double per_rank =
      cluster.compute_seconds > 0
          ? cluster.compute_seconds / static_cast<double>(n)
          : static_cast<double>(model.global_batch) * flops /
                (static_cast<double>(n) * cluster.flops_per_rank * e.gemm_efficiency);
  e.compute_s = per_rank * stage_share * p;
  const double extra = flops - f.flops_per_sample;  // recomputation, in backward
  const double forward_window = e.compute_s * (f.flops_per_sample / 3) / flops / m;
  const double backward_window = e.compute_s * (2 * f.flops_per_sample / 3 + extra) / flops / m;

  // Groups and where they sit (rank = (pp_i dp + dp_i) tp + tp_i).
  const Scope tp_scope = group_scope(1, l.tp, n, node);
  const Scope dp_scope = group_scope(l.tp, l.dp, n, node);
  const Scope shard_scope = group_scope(l.tp, shard_ranks, n, node);
  const Scope replica_scope = group_scope(l.tp * shard_ranks, replicas, n, node);
  const Scope pp_scope = group_scope(l.tp * l.dp, l.pp, n, node);
  const Scope ep_scope = group_scope(l.tp, l.ep, n, node);
  const Scope edp_scope = group_scope(l.tp * l.ep, expert_dp, n, node);

  // Tensor parallel: on the critical path, every micro-batch: Megatron-LM's
  // 2 all-reduces forward and 2 backward per layer, 2 more when full
  // recomputation repeats the forward; sequence parallelism turns each into
  // an all-gather and a reduce-scatter of the same [b s h] (the same bytes
  // on the wire, Korthikanti et al. 2022 section 4.2.2).
  if (l.tp > 1) {
    const double per_layer =
        f.tp_per_layer * (l.recompute == Recompute::kFull && !f.probe ? 1.5 : 1);
    const double ops = m * stage_layers * per_layer;
    const double bytes = b * f.tp_elements * f.element;
    if (l.sp) {
      const Timed ag = time_ops(cluster, Collective::kAllGather, tp_scope, l.tp, bytes, ops);
      const Timed rs = time_ops(cluster, Collective::kReduceScatter, tp_scope, l.tp, bytes, ops);
      e.comm.push_back(part("tp", ag, ag.seconds));
      e.comm.push_back(part("tp", rs, rs.seconds));
    } else {
      const Timed tp = time_ops(cluster, Collective::kAllReduce, tp_scope, l.tp, bytes, ops);
      e.comm.push_back(part("tp", tp, tp.seconds));
    }
  }
  // Pipeline: each micro-batch's activation forward and gradient backward
  // across each boundary (a sendrecv each), v times with v chunks per rank
  // (Narayanan et al. 2021: the interleaved schedule multiplies the
  // point-to-point volume by v); the ramp's 2 (p-1) transfers are part of
  // the bubble.
  double ramp = 0;
  if (l.pp > 1) {
    const Timed pp = time_ops(cluster, Collective::kSendRecv, pp_scope, 2,
                              b * f.boundary_elements * f.element, 2 * m * v);
    e.comm.push_back(part("pp", pp, pp.seconds));
    ramp = 2 * (p - 1) * pp.last;
  }
  // Expert parallel: dispatch and combine, forward and backward, per MoE layer.
  if (l.ep > 1 && stage_moe > 0) {
    const Timed a2a = time_ops(cluster, Collective::kAllToAll, ep_scope, l.ep,
                               b * f.a2a_elements * f.element, m * stage_moe * f.a2a_per_moe_layer);
    e.comm.push_back(part("ep", a2a, a2a.seconds));
  }
  // Data parallel, dense parameters over dp and experts over dp / ep.
  const double bucket = options.bucket_bytes;
  struct Group {
    std::string name;
    double bytes;
    size_t ranks;
    Scope scope;
  };
  const Group groups[] = {{"dp", dense * f.element, shard_ranks, hybrid ? shard_scope : dp_scope},
                          {"edp", expert * f.element, expert_dp, edp_scope}};
  const bool overlap = options.overlap;
  for (const Group& g : groups) {
    if (g.ranks <= 1 || !(g.bytes > 0)) continue;
    if (l.zero == 0) {
      // DDP: bucketed all-reduce in the last micro-batch's backward (no_sync
      // before), the first bucket 1 MiB (PyTorch's _DEFAULT_FIRST_BUCKET_BYTES).
      const Timed ar = time_buckets(cluster, Collective::kAllReduce, g.scope, g.ranks, g.bytes,
                                    bucket, std::min(bucket, kDdpFirstBucket));
      e.comm.push_back(
          part(g.name, ar, exposed_under(ar.seconds, ar.last, backward_window, overlap)));
    } else if (l.zero <= 2) {
      // ZeRO-1: gradients reduce-scattered in the last micro-batch's backward;
      // ZeRO-2: in every micro-batch's -- DeepSpeed's engine
      // (allreduce_gradients: "ZeRO stage >= 2 communicates during non
      // gradient accumulation boundaries as well"; stage 1 only at the
      // boundary), which is what frees the gradients between micro-batches.
      // Then the updated shards all-gathered: a transformer's overlapped
      // with the next step's first forward, bucket by bucket (Megatron-LM's
      // distributed optimizer with --overlap-param-gather; DeepSpeed's stage
      // 1/2 gather after the step: --no-overlap); the probe's after the step,
      // exposed, as ccscope train does.
      Timed rs =
          time_buckets(cluster, Collective::kReduceScatter, g.scope, g.ranks, g.bytes, bucket);
      const double times = l.zero == 2 ? m : 1;
      const double rs_exposed =
          times * exposed_under(rs.seconds, rs.last, backward_window, overlap);
      rs.seconds *= times;
      rs.ops *= times;
      e.comm.push_back(part(g.name, rs, rs_exposed));
      const Timed ag =
          time_buckets(cluster, Collective::kAllGather, g.scope, g.ranks, g.bytes, bucket);
      e.comm.push_back(
          part(g.name, ag,
               f.probe ? ag.seconds : exposed_under(ag.seconds, ag.last, forward_window, overlap)));
    } else {
      // ZeRO-3: per micro-batch, each layer gathered before its forward
      // (prefetched under the previous layer's forward) and before its
      // backward, its gradient reduce-scattered after it (DeepSpeed and FSDP
      // alike; FSDP's no_sync would keep unsharded gradients instead).
      const double layer = g.bytes / stage_layers;
      Timed ag = time_ops(cluster, Collective::kAllGather, g.scope, g.ranks, layer, stage_layers);
      Timed rs =
          time_ops(cluster, Collective::kReduceScatter, g.scope, g.ranks, layer, stage_layers);
      const double fwd = exposed_under(ag.seconds, ag.last, forward_window, overlap);
      const double bwd_total = ag.seconds + rs.seconds;
      const double bwd = exposed_under(bwd_total, rs.last, backward_window, overlap);
      const double ag_exposed = m * (fwd + (bwd_total > 0 ? bwd * ag.seconds / bwd_total : 0));
      const double rs_exposed = m * (bwd_total > 0 ? bwd * rs.seconds / bwd_total : 0);
      ag.seconds *= 2 * m;
      ag.ops *= 2 * m;
      rs.seconds *= m;
      rs.ops *= m;
      e.comm.push_back(part(g.name, ag, ag_exposed));
      e.comm.push_back(part(g.name, rs, rs_exposed));
    }
  }
  // Hybrid sharding across the replicas: after each reduce-scatter in the
  // shard group, the reduced gradient shard all-reduced over the replicas
  // (PyTorch FSDP's HYBRID_SHARD post-backward hook: every backward, as the
  // reduce-scatter), in buckets under that micro-batch's backward.
  if (hybrid && replicas > 1 && dense > 0) {
    Timed ar = time_buckets(cluster, Collective::kAllReduce, replica_scope, replicas,
                            dense * f.element / static_cast<double>(shard_ranks), bucket);
    const double exposed = m * exposed_under(ar.seconds, ar.last, backward_window, overlap);
    ar.seconds *= m;
    ar.ops *= m;
    e.comm.push_back(part("dp", ar, exposed));
  }
  for (const CommPart& c : e.comm) {
    e.comm_s += c.seconds;
    e.exposed_comm_s += c.exposed_seconds;
  }
  // Offload: the gradient shard down and the updated parameters up over
  // PCIe, the optimizer step on the CPU (ZeRO-3: the parameter shards come up
  // before every forward and backward, the gradients go down every
  // micro-batch), none of it overlapped.
  if (l.offload) {
    const double pcie_bytes = (l.zero == 3 ? 3 * m : 2) * f.element * shard;
    e.offload_s = pcie_bytes / (cluster.pcie_GBps * 1e9) + shard / cluster.host_optimizer_rate;
  }
  // 1F1B's bubble, (p-1)/(m+p-1) of the step: (p-1)/m of the compute (pipeline.h's
  // textbook_bubble); interleaved with v chunks per rank (p-1)/(v m)
  // (Narayanan et al. 2021, section 2.2.2); plus the ramp's transfers.
  if (l.pp > 1) e.bubble_s = e.compute_s * (p - 1) / (v * m) + ramp;
  e.step_s = e.compute_s + e.bubble_s + e.exposed_comm_s + e.offload_s;
  return e;
}

namespace {

struct Shape {
  size_t tp, pp, dp, ep;
  int zero;
  bool offload;
  size_t shard;  // hybrid sharding's group (0: the whole data-parallel group)
};

// Candidate shapes (micro-batches and settings chosen later), simplest first
// so that ties go to the simpler layout. ZeRO stages with model parallelism
// as frameworks run them: with tp alone every stage (Megatron-DeepSpeed's
// ZeRO-1/2 with tensor slicing, FSDP or ZeRO-3 with tensor parallelism, as
// OPT-175B); with pp only ZeRO-1 (Megatron-LM's distributed optimizer;
// DeepSpeed refuses ZeRO-2/3 with its pipeline engine); with ep alone
// DeepSpeed-MoE's ZeRO-1/2. Hybrid sharding (ZeRO-2/3 over a node's
// data-parallel ranks, replicated across nodes) without pp and ep. The probe
// (ccscope train's MLP) only as ccscope train runs it: no ZeRO-2/3 with tp,
// no hybrid sharding.
std::vector<Shape> shapes(const Facts& f, const AdvisorModel& model, const AdvisorCluster& c,
                          const AdvisorOptions& o) {
  std::vector<Shape> out;
  const size_t n = c.ranks;
  const size_t node = per_node(c);
  for (size_t tp : divisors(o.tp_across_nodes ? n : node)) {
    if (n % tp) continue;
    if (f.probe && tp > 1 && f.pairs == 0) continue;
    // The probe cuts tensor-parallel pairs (and an odd last layer) into stages.
    const size_t blocks = f.probe && tp > 1 ? f.pairs + f.depth % 2 : f.layers;
    for (size_t pp : divisors(n / tp)) {
      if (pp > blocks) continue;
      const size_t dp = n / (tp * pp);
      for (size_t ep : divisors(dp)) {
        if (ep > 1 && (model.experts == 0 || model.experts % ep || f.moe_layers == 0)) continue;
        std::vector<std::pair<int, bool>> zeros;
        if (tp == 1 && pp == 1 && ep == 1) {
          zeros.push_back({0, false});
          if (dp > 1)
            for (int z : {1, 2, 3}) zeros.push_back({z, false});
          for (int z : {1, 2, 3})
            if (dp > 1 || z >= 2) zeros.push_back({z, true});
        } else {
          zeros.push_back({0, false});
          if (dp > 1) zeros.push_back({1, false});
          if (dp > 1 && pp == 1 && (tp == 1 || (ep == 1 && !f.probe))) zeros.push_back({2, false});
          if (dp > 1 && pp == 1 && ep == 1 && !f.probe) zeros.push_back({3, false});
        }
        // A node's data-parallel ranks (tp is the fastest index).
        const size_t local = node % tp == 0 ? node / tp : 0;
        for (auto [z, off] : zeros) {
          out.push_back({tp, pp, dp, ep, z, off, 0});
          if (o.hybrid_shard && !f.probe && z >= 2 && !off && pp == 1 && ep == 1 && local > 1 &&
              dp > local && dp % local == 0)
            out.push_back({tp, pp, dp, ep, z, off, local});
        }
      }
    }
  }
  return out;
}

std::string pct(double slower, double faster) {
  return fmt::format("{:.0f}%", 100 * (slower / faster - 1));
}

// The largest cost of an estimate beyond its compute, in words.
std::string dominant_cost(const Estimate& e, const AdvisorCluster& cluster) {
  double best = e.bubble_s;
  std::string what = fmt::format("its pipeline bubble of {:.3g} s", e.bubble_s);
  if (e.offload_s > best) {
    best = e.offload_s;
    what = fmt::format("its offload (PCIe {:.3g} GB/s, the optimizer step on the CPU) of {:.3g} s",
                       cluster.pcie_GBps, e.offload_s);
  }
  for (const CommPart& c : e.comm) {
    if (c.exposed_seconds > best) {
      best = c.exposed_seconds;
      what = fmt::format("the {} {} busbw of {:.3g} GB/s at {} ({} group of {}: {:.3g} s exposed)",
                         name(c.scope), advice_name(c.collective), c.busbw_GBps,
                         size_text(c.operation_bytes), c.group, c.group_size, c.exposed_seconds);
    }
  }
  return what;
}

double peak_busbw(const AdvisorCluster& c, Collective coll, Scope scope) {
  const ResolvedCurve r = resolve_curve(c.bandwidth, coll, scope);
  double peak = 0;
  if (r.curve)
    for (const CurvePoint& p : *r.curve) peak = std::max(peak, p.busbw_GBps);
  return peak;
}

}  // namespace

Advice advise(const AdvisorModel& model, const AdvisorCluster& cluster,
              const AdvisorOptions& options) {
  Advice advice;
  const Facts f = facts_of(model);
  const size_t n = cluster.ranks;
  const size_t node = per_node(cluster);
  std::vector<size_t> skipped_dp;
  for (const Shape& s : shapes(f, model, cluster, options)) {
    if (model.global_batch % s.dp) {
      if (std::find(skipped_dp.begin(), skipped_dp.end(), s.dp) == skipped_dp.end())
        skipped_dp.push_back(s.dp);
      continue;
    }
    // The micro-batch count (every divisor of the replica's batch) and the
    // settings (recomputation, sequence parallelism with tp, the interleaved
    // schedule's chunks with pp): the fastest that fits, else the one needing
    // the least memory; on a tie the first tried (no recomputation before
    // selective before full, sequence parallelism before none, 1F1B before
    // interleaving).
    std::optional<Estimate> best;
    const size_t replica = model.global_batch / s.dp;
    std::vector<Recompute> recomputes = {Recompute::kNone};
    std::vector<bool> sps = {false};
    if (!f.probe) {
      recomputes =
          options.recompute.empty()
              ? std::vector<Recompute>{Recompute::kNone, Recompute::kSelective, Recompute::kFull}
              : options.recompute;
      // Under FlashAttention selective recomputation is what the kernel does already.
      if (model.flash_attention && recomputes.size() > 1)
        std::erase(recomputes, Recompute::kSelective);
      if (s.tp > 1)
        sps = options.sequence_parallel ? std::vector<bool>{true, false} : std::vector<bool>{false};
    }
    std::vector<size_t> chunks = {1};
    // Up to 8 chunks per rank, each of a layer at least; uneven chunks
    // allowed (the busiest rank takes the ceiling).
    if (s.pp > 1 && options.interleave && !f.probe)
      for (size_t v = 2; v <= kMaxChunks && v * s.pp <= f.layers; ++v) chunks.push_back(v);
    for (size_t m : divisors(replica)) {
      if (m > 1 && replica / m < options.min_micro_batch) continue;
      for (Recompute rc : recomputes)
        for (bool sp : sps)
          for (size_t v : chunks) {
            // Megatron-LM's interleaved schedule: micro-batches a multiple of pp.
            if (v > 1 && m % s.pp) continue;
            const Layout l{s.tp, s.pp, s.dp, s.ep, s.zero, s.offload, m, sp, rc, v, s.shard};
            Estimate e = estimate(model, cluster, options, l);
            const bool better =
                !best || (e.fits && !best->fits) ||
                (e.fits == best->fits &&
                 (e.fits ? e.step_s < best->step_s : e.memory.total() < best->memory.total()));
            if (better) best = std::move(e);
          }
    }
    if (best) advice.candidates.push_back(std::move(*best));
  }
  std::sort(skipped_dp.begin(), skipped_dp.end());
  for (size_t dp : skipped_dp)
    advice.notes.push_back(fmt::format(
        "layouts with dp {} skipped: the global batch of {} samples does not divide over {}", dp,
        model.global_batch, dp));
  std::stable_sort(advice.candidates.begin(), advice.candidates.end(),
                   [](const Estimate& a, const Estimate& b) {
                     if (a.fits != b.fits) return a.fits;
                     return a.fits ? a.step_s < b.step_s : a.memory.total() < b.memory.total();
                   });
  // Notes: every fallback curve used, once.
  for (const Estimate& e : advice.candidates)
    for (const CommPart& c : e.comm)
      if (!c.fallback.empty() &&
          std::find(advice.notes.begin(), advice.notes.end(), c.fallback) == advice.notes.end())
        advice.notes.push_back(c.fallback);

  const auto& cs = advice.candidates;
  if (!cs.empty() && cs[0].fits) {
    advice.recommended = 0;
    if (cs.size() > 1 && cs[1].fits) advice.runner_up = 1;
  }
  const size_t fitting = static_cast<size_t>(
      std::count_if(cs.begin(), cs.end(), [](const Estimate& e) { return e.fits; }));
  if (advice.recommended) {
    const Estimate& r = cs[0];
    advice.reason = fmt::format(
        "{}: the fastest of {} layouts that fit ({} of {} per rank); {:.3g} s per step = compute "
        "{:.3g} + exposed communication {:.3g} + bubble {:.3g} + offload {:.3g}",
        label(r.layout), fitting, gib(r.memory.total()),
        gib(cluster.gpu_memory_bytes * cluster.usable_memory_fraction), r.step_s, r.compute_s,
        r.exposed_comm_s, r.bubble_s, r.offload_s);
    if (advice.runner_up)
      advice.reason += fmt::format("; runner-up {} is {} slower ({:.3g} s)", label(cs[1].layout),
                                   pct(cs[1].step_s, r.step_s), cs[1].step_s);
  } else if (!cs.empty()) {
    advice.reason = fmt::format(
        "nothing fits: the smallest, {}, {}; more ranks, more GPU memory or a smaller global "
        "batch would",
        label(cs[0].layout), cs[0].why_not);
  } else {
    advice.reason = "no valid layout (see the notes)";
  }

  // The rule of thumb, as people apply it, decided on the same estimates.
  auto find = [&](Layout shape) -> std::optional<size_t> {
    for (size_t i = 0; i < cs.size(); ++i)
      if (cs[i].layout.same_shape(shape)) return i;
    return std::nullopt;
  };
  auto fits = [&](std::optional<size_t> i) { return i && cs[*i].fits; };
  const size_t nodes = (n + node - 1) / node;
  const double intra = peak_busbw(cluster, Collective::kAllReduce, Scope::kIntraNode);
  const double inter = peak_busbw(cluster, Collective::kAllReduce, Scope::kInterNode);
  const bool fast_intra = node > 1 && intra >= options.fast_intra_GBps;
  const bool slow_inter = nodes > 1 && inter <= options.slow_inter_GBps;
  std::optional<size_t> pick;
  const std::optional<size_t> ddp = find({1, 1, n, 1, 0, false});
  if (fits(ddp)) {
    advice.rule = "the model fits one GPU -> DDP";
    pick = ddp;
  } else if (fast_intra) {
    advice.rule = fmt::format(
        "does not fit one GPU, fast intra-node links (all-reduce busbw {:.3g} GB/s) -> TP inside "
        "the node",
        intra);
    for (size_t t : divisors(node)) {
      if (t == 1 || n % t) continue;
      const auto i = find({t, 1, n / t, 1, 0, false});
      if (!pick) pick = i;  // the smallest TP even when none fits
      if (fits(i)) {
        pick = i;
        break;
      }
    }
    if (!fits(pick) && nodes > 1 && n % node == 0) {
      for (size_t p : divisors(n / node)) {
        if (p == 1) continue;
        const size_t dp = n / (node * p);
        const auto i = find({node, p, dp, 1, dp > 1 ? 1 : 0, false});
        if (fits(i)) {
          advice.rule = fmt::format(
              "a very large model on {} nodes: TP inside the node does not fit -> TP x PP x DP "
              "with ZeRO-1",
              nodes);
          pick = i;
          break;
        }
      }
    }
  } else if (slow_inter && f.layers >= options.many_layers_per_node * nodes && n % nodes == 0) {
    advice.rule = fmt::format(
        "does not fit one GPU, {} layers and a slow network (inter-node all-reduce busbw {:.3g} "
        "GB/s) -> PP across nodes",
        f.layers, inter);
    pick = find({1, nodes, n / nodes, 1, 0, false});
  } else {
    advice.rule = fmt::format(
        "does not fit one GPU and no fast interconnect (intra-node all-reduce busbw {:.3g} GB/s) "
        "-> ZeRO-2 with CPU offload",
        intra);
    pick = find({1, 1, n, 1, 2, true});
  }
  advice.rule_pick = pick;
  if (!pick) {
    advice.rule_verdict = "the rule of thumb's layout is not valid here (see the notes)";
  } else if (advice.recommended && *pick == *advice.recommended) {
    advice.rule_verdict = fmt::format("the rule of thumb agrees: {}", label(cs[*pick].layout));
  } else if (!cs[*pick].fits) {
    advice.rule_verdict = fmt::format("the rule of thumb picks {}, but it does not fit: it {}",
                                      label(cs[*pick].layout), cs[*pick].why_not);
    if (advice.recommended)
      advice.rule_verdict +=
          fmt::format("; {} fits and takes {:.3g} s per step", label(cs[0].layout), cs[0].step_s);
  } else {
    const Estimate& rule = cs[*pick];
    const Estimate& best = cs[*advice.recommended];
    advice.rule_verdict = fmt::format(
        "the rule of thumb picks {} ({:.3g} s per step), but with {} {} is {} faster ({:.3g} s)",
        label(rule.layout), rule.step_s, dominant_cost(rule, cluster), label(best.layout),
        pct(rule.step_s, best.step_s), best.step_s);
  }
  return advice;
}

std::string advice_json(const Advice& advice, const AdvisorModel& model,
                        const AdvisorCluster& cluster, const AdvisorOptions& options) {
  using nlohmann::json;
  const Facts f = facts_of(model);
  auto layout_json = [](const Layout& l) {
    return json{{"label", label(l)},    {"tp", l.tp},
                {"pp", l.pp},           {"dp", l.dp},
                {"ep", l.ep},           {"zero", l.zero},
                {"offload", l.offload}, {"micro_batches", l.micro_batches}};
  };
  json candidates = json::array();
  for (const Estimate& e : advice.candidates) {
    json comm = json::array();
    for (const CommPart& c : e.comm)
      comm.push_back({{"group", c.group},
                      {"collective", std::string(advice_name(c.collective))},
                      {"scope", std::string(name(c.scope))},
                      {"group_size", c.group_size},
                      {"operation_bytes", c.operation_bytes},
                      {"operations", c.operations},
                      {"busbw_GBps", c.busbw_GBps},
                      {"seconds", c.seconds},
                      {"exposed_seconds", c.exposed_seconds},
                      {"fallback", c.fallback}});
    candidates.push_back({{"layout", layout_json(e.layout)},
                          {"memory_bytes",
                           {{"parameters", e.memory.parameters},
                            {"gradients", e.memory.gradients},
                            {"optimizer", e.memory.optimizer},
                            {"model_states", e.memory.model_states()},
                            {"working", e.memory.working},
                            {"activations", e.memory.activations},
                            {"total", e.memory.total()},
                            {"host", e.memory.host}}},
                          {"fits", e.fits},
                          {"why_not", e.why_not},
                          {"compute_s", e.compute_s},
                          {"bubble_s", e.bubble_s},
                          {"comm_s", e.comm_s},
                          {"exposed_comm_s", e.exposed_comm_s},
                          {"offload_s", e.offload_s},
                          {"step_s", e.step_s},
                          {"communication", comm}});
  }
  auto index = [](const std::optional<size_t>& i) { return i ? json(*i) : json(nullptr); };
  auto chosen = [&](const std::optional<size_t>& i) {
    return i ? layout_json(advice.candidates[*i].layout) : json(nullptr);
  };
  json doc = {{"schema", "ccscope.advice/1"},
              {"model",
               {{"kind", std::string(name(model.kind))},
                {"parameters", f.psi},
                {"expert_parameters", f.psi_expert},
                {"active_parameters", f.psi_active},
                {"layers", model.layers},
                {"hidden", model.hidden},
                {"experts", model.experts},
                {"top_k", model.top_k},
                {"sequence_length", f.probe ? 1 : model.sequence_length},
                {"global_batch", model.global_batch},
                {"precision", std::string(name(model.precision))},
                {"optimizer_words", model.optimizer_words},
                {"flops_per_sample", f.flops_per_sample}}},
              {"cluster",
               {{"ranks", cluster.ranks},
                {"ranks_per_node", per_node(cluster)},
                {"gpu_memory_bytes", cluster.gpu_memory_bytes},
                {"usable_memory_fraction", cluster.usable_memory_fraction},
                {"host_memory_bytes", cluster.host_memory_bytes},
                {"pcie_GBps", cluster.pcie_GBps},
                {"flops_per_rank", cluster.flops_per_rank},
                {"compute_seconds", cluster.compute_seconds}}},
              {"options",
               {{"overlap", options.overlap},
                {"bucket_bytes", options.bucket_bytes},
                {"tp_across_nodes", options.tp_across_nodes},
                {"min_micro_batch", options.min_micro_batch}}},
              {"recommended", chosen(advice.recommended)},
              {"recommended_index", index(advice.recommended)},
              {"runner_up", chosen(advice.runner_up)},
              {"runner_up_index", index(advice.runner_up)},
              {"reason", advice.reason},
              {"rule_of_thumb",
               {{"rule", advice.rule},
                {"pick", chosen(advice.rule_pick)},
                {"verdict", advice.rule_verdict}}},
              {"notes", advice.notes},
              {"candidates", candidates}};
  return doc.dump(2) + "\n";
}

}  // namespace ccscope::training_probe
