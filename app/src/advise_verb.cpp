// `ccscope advise`: which parallel layout to train a model with on this
// cluster. The estimates and the decision are training_probe/advisor.h's;
// this verb reads the flags and the bandwidth records, prints the table (or
// the JSON document) and sets the exit code.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/common/sizes.h"
#include "ccscope/common/small_file.h"
#include "ccscope/records/topology_record.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/user_files.h"
#include "ccscope/topo/nccl_env.h"
#include "ccscope/topo/nominal_rates.h"
#include "ccscope/topo/paths.h"
#include "ccscope/topo/probe.h"
#include "ccscope/training_probe/advisor.h"
#include "ccscope/training_probe/optimizer.h"
#include "verb_support.h"

namespace ccscope::app {
// Named, not anonymous: the verbs are one unity translation unit.
namespace advise_verb_detail {

using namespace ccscope::training_probe;
using training_probe::Scope;

constexpr const char* kAdviseVerb = "advise";
constexpr int kExitNothingFits = 1;

struct AdviseFlags {
  std::string kind = "transformer";
  bool kind_given = false;  // --kind on the command line
  std::string params, hidden, layers, heads, experts, top_k = "1", expert_params;
  std::string width, depth;  // probe
  std::string seq_len, global_batch, global_batch_tokens;
  std::string precision, optimizer;
  double momentum = 0.9;
  std::string gpu_memory, ranks, ranks_per_node, host_memory;
  double usable = 0.9;
  double pcie_GBps = 25;
  std::string host_optimizer_rate = "1e9";
  std::string flops, peak_flops;
  double mfu = 0;
  double gemm_knee = 64;
  std::string attention = "flash", recompute = "auto";
  bool no_sequence_parallel = false, no_interleave = false, no_hybrid_shard = false;
  double compute_seconds = 0;
  double intra_busbw = 0, inter_busbw = 0;
  double bucket_mb = 25;
  std::string min_micro_batch;
  bool no_overlap = false;
  bool tp_across_nodes = false;
  bool json = false;
  bool all = false;
  std::vector<std::string> files;
};

// "7e9", "7B", "1.5T", "4096", "4M": a count, decimal multiples (K 1e3, M 1e6,
// B or G 1e9, T 1e12). nullopt for anything else.
std::optional<double> parse_count(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return std::nullopt;
  double scale = 1;
  const std::string rest(end);
  if (rest == "K" || rest == "k")
    scale = 1e3;
  else if (rest == "M" || rest == "m")
    scale = 1e6;
  else if (rest == "B" || rest == "b" || rest == "G" || rest == "g")
    scale = 1e9;
  else if (rest == "T" || rest == "t")
    scale = 1e12;
  else if (!rest.empty())
    return std::nullopt;
  const double out = value * scale;
  if (!std::isfinite(out) || out < 0) return std::nullopt;
  return out;
}

// A count flag that must be a whole number in [low, high]; "" or the problem.
std::string whole(const std::string& flag, const std::string& text, size_t low, size_t high,
                  size_t& out) {
  const auto v = parse_count(text);
  if (!v || *v != std::floor(*v) || *v < static_cast<double>(low) || *v > static_cast<double>(high))
    return fmt::format("{} '{}': give a whole number from {} to {}", flag, text, low, high);
  out = static_cast<size_t>(*v);
  return "";
}

std::string memory_flag(const std::string& flag, const std::string& text, double& out) {
  const auto v = parse_size(text);
  if (!v || *v == 0)
    return fmt::format("{} '{}': give a size such as 80G (binary multiples: 80G = 80 GiB)", flag,
                       text);
  out = static_cast<double>(*v);
  return "";
}

// A record's collective, when the advisor models it.
std::optional<Collective> collective_of(const std::string& name) {
  for (Collective c : kAdvisedCollectives)
    if (ccscope::name(c) == name) return c;
  return std::nullopt;
}

// The flags into the advisor's inputs; "" or the one-line problem.
std::string inputs_from_flags(const AdviseFlags& f, AdvisorModel& m, AdvisorCluster& c,
                              AdvisorOptions& o, std::vector<std::string>& notes) {
  constexpr size_t kMax = size_t{1} << 40;
  std::string problem;
  auto check = [&](std::string p) {
    if (problem.empty()) problem = std::move(p);
  };
  // No model described: ccscope train's own (defaults run anywhere; a note
  // says what was taken).
  std::string kind = f.kind;
  if (!f.kind_given && f.params.empty() && f.layers.empty() && f.hidden.empty() &&
      f.heads.empty() && f.seq_len.empty() && f.global_batch_tokens.empty() &&
      f.expert_params.empty() && f.experts.empty()) {
    kind = "probe";
    notes.push_back(
        "no model given: ccscope train's (--kind probe, its MLP); --params, --layers and "
        "--hidden describe a transformer");
  }
  if (kind == "transformer") {
    m.kind = ModelKind::kTransformer;
  } else if (kind == "probe") {
    m.kind = ModelKind::kProbe;
  } else {
    return "--kind '" + f.kind + "': use transformer or probe";
  }
  const bool probe = m.kind == ModelKind::kProbe;
  if (probe) {
    if (!f.params.empty() || !f.hidden.empty() || !f.layers.empty() || !f.heads.empty() ||
        !f.seq_len.empty() || !f.global_batch_tokens.empty() || !f.expert_params.empty())
      return "--kind probe takes --width, --depth, --global-batch (as ccscope train), not "
             "--params, --hidden, --layers, --heads, --seq-len, --global-batch-tokens or "
             "--expert-params";
    check(whole("--width", f.width.empty() ? "512" : f.width, 1, 46340, m.hidden));
    check(whole("--depth", f.depth.empty() ? "4" : f.depth, 1, 100000, m.layers));
    m.sequence_length = 1;
    m.global_batch = 128;
  } else {
    if (!f.width.empty() || !f.depth.empty())
      return "--width and --depth are for --kind probe; a transformer takes --hidden and --layers";
    if (f.params.empty()) return "--params is required (e.g. --params 7e9)";
    if (f.layers.empty()) return "--layers is required (e.g. --layers 32)";
    if (f.hidden.empty()) return "--hidden is required (e.g. --hidden 4096)";
    const auto psi = parse_count(f.params);
    if (!psi || *psi < 1) return "--params '" + f.params + "': give a count such as 7e9 or 7B";
    m.parameters = *psi;
    check(whole("--layers", f.layers, 1, 1000000, m.layers));
    check(whole("--hidden", f.hidden, 1, kMax, m.hidden));
    if (!f.heads.empty()) check(whole("--heads", f.heads, 1, kMax, m.heads));
    if (!f.seq_len.empty()) check(whole("--seq-len", f.seq_len, 1, kMax, m.sequence_length));
    if (!f.expert_params.empty()) {
      const auto e = parse_count(f.expert_params);
      if (!e || *e < 1) return "--expert-params '" + f.expert_params + "': give a count";
      m.expert_parameters = *e;
    }
  }
  if (!f.experts.empty()) check(whole("--experts", f.experts, 0, 1000000, m.experts));
  check(whole("--top-k", f.top_k, 1, 1000000, m.top_k));
  if (!f.global_batch.empty() && !f.global_batch_tokens.empty())
    return "give --global-batch (samples) or --global-batch-tokens, not both";
  if (!f.global_batch.empty())
    check(whole("--global-batch", f.global_batch, 1, kMax, m.global_batch));
  if (!f.global_batch_tokens.empty()) {
    size_t tokens = 0;
    check(whole("--global-batch-tokens", f.global_batch_tokens, 1, kMax, tokens));
    if (problem.empty()) {
      if (tokens % m.sequence_length)
        return fmt::format("--global-batch-tokens {}: not a whole number of {}-token samples",
                           tokens, m.sequence_length);
      m.global_batch = tokens / m.sequence_length;
    }
  }
  const std::string precision = f.precision.empty() ? (probe ? "fp32" : "bf16") : f.precision;
  if (precision == "fp32" || precision == "float32")
    m.precision = Precision::kFloat32;
  else if (precision == "bf16" || precision == "bfloat16")
    m.precision = Precision::kBFloat16;
  else if (precision == "fp16" || precision == "float16")
    m.precision = Precision::kFloat16;
  else
    return "--precision '" + precision + "': use fp32, bf16 or fp16";
  OptimizerOptions opt;
  const std::string optimizer = f.optimizer.empty() ? (probe ? "sgd" : "adam") : f.optimizer;
  if (optimizer == "sgd")
    opt.kind = OptimizerKind::kSgd;
  else if (optimizer == "adam")
    opt.kind = OptimizerKind::kAdam;
  else if (optimizer == "adamw")
    opt.kind = OptimizerKind::kAdamW;
  else
    return "--optimizer '" + optimizer + "': use sgd, adam or adamw";
  opt.momentum = f.momentum;
  m.optimizer_words = state_words_per_parameter(opt);

  if (probe && f.gpu_memory.empty() && f.ranks.empty()) {
    // The probe on this host, as ccscope train's CPU path runs it here: one
    // rank per core (ci/quickstart's count), each with its share of the
    // memory available now.
    const auto available = host_available_memory();
    if (!available)
      return "--gpu-memory and --ranks are required (this host's memory is unreadable)";
    c.ranks = std::max(1u, std::thread::hardware_concurrency());
    c.gpu_memory_bytes = *available / c.ranks;
    notes.push_back(fmt::format(
        "no --gpu-memory or --ranks: this host, one rank per core ({} ranks, {} GiB of its "
        "available memory each); describe a GPU cluster with --gpu-memory and --ranks",
        c.ranks, std::round(static_cast<double>(c.gpu_memory_bytes) / 1073741824.0 * 10) / 10));
  } else {
    if (f.gpu_memory.empty()) return "--gpu-memory is required (e.g. --gpu-memory 80G)";
    if (f.ranks.empty()) return "--ranks is required (e.g. --ranks 16)";
    check(memory_flag("--gpu-memory", f.gpu_memory, c.gpu_memory_bytes));
    check(whole("--ranks", f.ranks, 1, size_t{1} << 20, c.ranks));
  }
  if (!f.ranks_per_node.empty())
    check(whole("--ranks-per-node", f.ranks_per_node, 1, 1u << 16, c.ranks_per_node));
  if (!f.host_memory.empty())
    check(memory_flag("--host-memory", f.host_memory, c.host_memory_bytes));
  if (!problem.empty()) return problem;
  c.usable_memory_fraction = f.usable;
  c.pcie_GBps = f.pcie_GBps;
  const auto rate = parse_count(f.host_optimizer_rate);
  if (!rate || !(*rate > 0))
    return "--host-optimizer-rate '" + f.host_optimizer_rate + "': give parameters per second";
  c.host_optimizer_rate = *rate;
  if (!f.flops.empty() && f.compute_seconds > 0)
    return "give --flops or --compute-seconds, not both";
  if (!f.flops.empty() && (!f.peak_flops.empty() || f.mfu > 0))
    return "give --flops (achieved) or --peak-flops/--mfu, not both";
  if (probe && (!f.peak_flops.empty() || f.mfu > 0))
    return "--peak-flops and --mfu are for transformers; the probe takes --flops or "
           "--compute-seconds";
  if (f.compute_seconds < 0 || !std::isfinite(f.compute_seconds))
    return "--compute-seconds must be positive";
  c.compute_seconds = f.compute_seconds;
  if (!f.flops.empty()) {
    const auto flops = parse_count(f.flops);
    if (!flops || !(*flops > 0)) return "--flops '" + f.flops + "': give FLOP/s such as 400e12";
    c.flops_per_rank = *flops;
  } else if (probe && !(f.compute_seconds > 0)) {
    // One CPU core's OpenBLAS SGEMM: tens of GFLOP/s.
    c.flops_per_rank = 20e9;
    notes.push_back(
        "compute: assumed 2e+10 FLOP/s per rank (one CPU core); give --flops or "
        "--compute-seconds");
  } else if (!(f.compute_seconds > 0)) {
    // Peak x the utilisation large GEMMs reach: an H100 SXM's bf16 dense peak
    // is 989 TFLOP/s (NVIDIA's H100 datasheet); published large runs report
    // 38-52% model FLOP utilisation end to end (Narayanan et al. 2021 on
    // A100: 44-52%; Llama 3 on H100: 38-43%), communication and bubbles
    // included, which the advisor adds itself: 0.45 on large GEMMs.
    double peak = 989e12;
    if (!f.peak_flops.empty()) {
      const auto v = parse_count(f.peak_flops);
      if (!v || !(*v > 0)) return "--peak-flops '" + f.peak_flops + "': give FLOP/s such as 312e12";
      peak = *v;
    }
    const double mfu = f.mfu > 0 ? f.mfu : 0.45;
    c.flops_per_rank = peak * mfu;
    if (f.peak_flops.empty() || !(f.mfu > 0))
      notes.push_back(fmt::format(
          "compute: {:.3g} FLOP/s per rank on large GEMMs = peak {:.3g}{} x utilisation "
          "{:.2g}{}; give --peak-flops and --mfu, --flops or --compute-seconds",
          c.flops_per_rank, peak, f.peak_flops.empty() ? " (H100 SXM bf16 dense, assumed)" : "",
          mfu, f.mfu > 0 ? "" : " (assumed)"));
  }
  if (!(f.gemm_knee >= 0) || !std::isfinite(f.gemm_knee)) return "--gemm-knee must be 0 or more";
  o.gemm_knee = f.gemm_knee;
  if (f.attention == "flash")
    m.flash_attention = true;
  else if (f.attention == "standard")
    m.flash_attention = false;
  else
    return "--attention '" + f.attention + "': use flash or standard";
  if (f.recompute == "none")
    o.recompute = {Recompute::kNone};
  else if (f.recompute == "selective")
    o.recompute = {Recompute::kSelective};
  else if (f.recompute == "full")
    o.recompute = {Recompute::kFull};
  else if (f.recompute != "auto")
    return "--recompute '" + f.recompute + "': use auto, none, selective or full";
  o.sequence_parallel = !f.no_sequence_parallel;
  o.interleave = !f.no_interleave;
  o.hybrid_shard = !f.no_hybrid_shard;
  if (!(f.bucket_mb > 0)) return "--bucket-mb must be positive";
  o.bucket_bytes = f.bucket_mb * 1024 * 1024;
  o.overlap = !f.no_overlap;
  o.tp_across_nodes = f.tp_across_nodes;
  // The probe's rows: a CPU GEMM of one row runs far below its rate (measured
  // here: 1024 x 8 at one row per step, some 20x the time per row of 64).
  check(whole("--min-micro-batch",
              f.min_micro_batch.empty() ? (probe ? "32" : "1") : f.min_micro_batch, 1, kMax,
              o.min_micro_batch));
  if (!problem.empty()) return problem;
  if (f.intra_busbw < 0 || f.inter_busbw < 0) return "--intra-busbw/--inter-busbw must be positive";
  return "";
}

// The bandwidth records: each file's records of the collectives the advisor
// knows, by scope (nodes == 1: intra-node, > 1: inter-node, or the file's
// intra:/inter: prefix), the largest rank count of each (collective, scope).
struct Samples {
  std::map<size_t, std::vector<CurvePoint>> by_ranks;
  std::vector<std::string> sources;
};

std::string read_bandwidth(const std::vector<std::string>& files, AdvisorCluster& c,
                           std::vector<std::string>& notes, std::vector<std::string>& summary,
                           size_t& inter_ranks_per_node) {
  std::map<std::pair<int, int>, Samples> samples;
  for (const std::string& word : files) {
    std::string path = word;
    std::optional<Scope> forced;
    for (auto [prefix, scope] :
         {std::pair{"intra:", Scope::kIntraNode}, std::pair{"inter:", Scope::kInterNode}}) {
      const std::string p = prefix;
      if (word.rfind(p, 0) == 0 && !std::filesystem::exists(word)) {
        path = word.substr(p.size());
        forced = scope;
      }
    }
    // `ccscope topo --measure --csv`: point-to-point figures per GPU pair
    // (intra-node) and node pair (inter-node), as sendrecv busbw; the slowest
    // pair of each kind, since a ring runs at its slowest link.
    std::string text;
    try {
      text = reports::read_input_file(path);
    } catch (const reports::InputError& e) {
      return e.what();
    }
    if (text.rfind("schema,kind,host_a,", 0) == 0) {
      std::vector<records::TopologyPathRecord> paths;
      try {
        paths = records::read_topology_path_csv(text);
      } catch (const std::exception& e) {
        return reports::printable(path) + ": " + e.what();
      }
      std::optional<double> slowest[2];
      size_t pairs[2] = {0, 0};
      for (const auto& p : paths) {
        if (!p.measured_GBps || !(*p.measured_GBps > 0)) continue;
        const Scope scope = forced                  ? *forced
                            : p.kind == "node_pair" ? Scope::kInterNode
                                                    : Scope::kIntraNode;
        auto& s = slowest[static_cast<size_t>(scope)];
        s = s ? std::min(*s, *p.measured_GBps) : *p.measured_GBps;
        ++pairs[static_cast<size_t>(scope)];
      }
      for (Scope scope : {Scope::kIntraNode, Scope::kInterNode}) {
        const auto& s = slowest[static_cast<size_t>(scope)];
        if (!s) continue;
        c.bandwidth.at(Collective::kSendRecv, scope) = {{1, *s, 0}};
        summary.push_back(fmt::format(
            "{} sendrecv: {:.3g} GB/s, the slowest of {} measured pair(s) ({}; no latency term)",
            name(scope), *s, pairs[static_cast<size_t>(scope)], reports::printable(path)));
      }
      if (!slowest[0] && !slowest[1])
        notes.push_back(fmt::format("{}: no measured pair (run ccscope topo --measure)",
                                    reports::printable(path)));
      continue;
    }
    reports::LoadedRun run;
    try {
      run = reports::parse_results(path, text);
    } catch (const reports::InputError& e) {
      return e.what();
    }
    size_t unknown = 0, wrong = 0, used = 0;
    for (const auto& r : run.records) {
      const auto coll = collective_of(r.collective);
      if (!coll || r.size_bytes == 0) continue;
      if (r.wrong && *r.wrong > 0) {
        ++wrong;
        continue;
      }
      const int nodes = r.nodes ? *r.nodes : run.metadata.nodes;
      std::optional<Scope> scope = forced;
      if (!scope && nodes == 1) scope = Scope::kIntraNode;
      if (!scope && nodes > 1) scope = Scope::kInterNode;
      if (!scope) {
        ++unknown;
        continue;
      }
      const int ranks = r.ranks ? *r.ranks : run.metadata.ranks;
      // busbw from the time where both are known: nccl-tests prints it with
      // two decimals (0.00 for small sizes, whose latency the curve needs).
      double busbw = r.busbw_GBps ? *r.busbw_GBps : 0;
      if (r.time_s && *r.time_s > 0 && ranks > 0)
        busbw = static_cast<double>(r.size_bytes) / *r.time_s / 1e9 *
                bus_factor(*coll, static_cast<size_t>(ranks));
      if (!(busbw > 0) || !std::isfinite(busbw)) continue;
      if (*scope == Scope::kInterNode) {
        const int per_node = r.ranks_per_node ? *r.ranks_per_node : run.metadata.ranks_per_node;
        if (per_node > 0)
          inter_ranks_per_node = std::max(inter_ranks_per_node, static_cast<size_t>(per_node));
      }
      Samples& s = samples[{static_cast<int>(*coll), static_cast<int>(*scope)}];
      s.by_ranks[static_cast<size_t>(std::max(ranks, 0))].push_back(
          {static_cast<double>(r.size_bytes), busbw, r.time_s ? *r.time_s : 0});
      if (std::find(s.sources.begin(), s.sources.end(), path) == s.sources.end())
        s.sources.push_back(path);
      ++used;
    }
    if (unknown)
      notes.push_back(fmt::format(
          "{}: {} record(s) without a node count skipped; name the file intra:{} or inter:{}",
          reports::printable(path), unknown, reports::printable(path), reports::printable(path)));
    if (wrong)
      notes.push_back(fmt::format("{}: {} record(s) with wrong results skipped",
                                  reports::printable(path), wrong));
    if (used == 0 && unknown == 0)
      notes.push_back(
          fmt::format("{}: no all_reduce/all_gather/reduce_scatter/all_to_all/sendrecv "
                      "records with a busbw",
                      reports::printable(path)));
  }
  for (auto& [key, s] : samples) {
    const auto coll = static_cast<Collective>(key.first);
    const auto scope = static_cast<Scope>(key.second);
    const auto& [ranks, points] = *s.by_ranks.rbegin();
    if (s.by_ranks.size() > 1)
      notes.push_back(fmt::format("{} {}: records at {} rank counts; the {}-rank ones used",
                                  name(scope), advice_name(coll), s.by_ranks.size(), ranks));
    c.bandwidth.at(coll, scope) = make_curve(points);
    const auto& curve = c.bandwidth.at(coll, scope);
    double peak = 0;
    for (const auto& p : curve) peak = std::max(peak, p.busbw_GBps);
    std::string from;
    for (const auto& src : s.sources) from += (from.empty() ? "" : ", ") + reports::printable(src);
    summary.push_back(fmt::format(
        "{} {}: {} sizes {}..{}, peak busbw {:.3g} GB/s, {} ranks ({})", name(scope),
        advice_name(coll), curve.size(), format_size(static_cast<size_t>(curve.front().bytes)),
        format_size(static_cast<size_t>(curve.back().bytes)), peak, ranks, from));
  }
  return "";
}

// A flat curve (one point at 1 byte: no latency) for every collective of a scope.
void flat_curves(AdvisorCluster& c, Scope scope, double busbw, std::vector<std::string>& summary) {
  for (Collective coll : kAdvisedCollectives) c.bandwidth.at(coll, scope) = {{1, busbw, 0}};
  summary.push_back(fmt::format("{}: every collective at {:.3g} GB/s busbw (flag; no latency term)",
                                name(scope), busbw));
}

// No records and no busbw flags: topo's expected figures. On a host whose
// GPUs topo sees, its slowest GPU pair's expected rate (NVLink or PCIe, from
// the nominal-rate table) inside the node and its network ports' rate shared
// by its GPUs across nodes; elsewhere (a login node, a laptop) a stated
// default: an H100/H200 SXM node (18 NVLink4 links through NVSwitch, 450 GB/s
// per direction) and one 400 Gbit/s port per GPU (NDR InfiniBand or 400G
// RoCE, 50 GB/s), as DGX H100. Nominal rates as busbw: nccl-tests measures
// some 80-90% of them on large messages; no latency term. Returns the line
// saying where the figures came from.
std::string expected_bandwidth(AdvisorCluster& c, std::vector<std::string>& summary) {
  double intra = 18 * topo::nvlink_link_GBps(4);
  double inter = topo::port_GBps(400);
  std::string intra_basis = "18 x NVLink4 through NVSwitch (H100/H200 SXM; stated default)";
  std::string inter_basis =
      "one 400 Gbit/s port per GPU (NDR InfiniBand, 400G RoCE; stated default)";
  std::string what =
      "an H100/H200 SXM node of 8 GPUs, one 400 Gbit/s port per GPU (no GPU seen "
      "on this host)";
  topo::ProbeOptions po;
  po.read_shapers = false;
  const topo::HostTopology host = topo::probe_host(po);
  if (!host.gpus.empty()) {
    const auto env = topo::nccl_environment_from_process();
    double slowest = 0;
    std::string basis;
    for (const auto& path : topo::gpu_pair_paths(host, env))
      if (path.expected_GBps > 0 && (slowest == 0 || path.expected_GBps < slowest)) {
        slowest = path.expected_GBps;
        basis = path.basis;
      }
    if (slowest > 0) {
      intra = slowest;
      intra_basis = fmt::format("{}, the slowest GPU pair of {}", basis, host.hostname);
    }
    // The ports NCCL's net transport would use: RDMA ones when there are,
    // else the physical Ethernet ones that are up.
    double rdma = 0, ethernet = 0;
    for (const auto& nic : host.nics) {
      if (nic.is_virtual || !(nic.effective_Gbps() > 0)) continue;
      if (nic.state != "up" && nic.state != "active") continue;
      if (nic.kind == topo::NicKind::kInfiniband || nic.kind == topo::NicKind::kRoce)
        rdma += nic.effective_Gbps();
      else if (nic.kind == topo::NicKind::kEthernet && nic.rdma_device.empty())
        ethernet += nic.effective_Gbps();
    }
    const double ports = rdma > 0 ? rdma : ethernet;
    if (ports > 0) {
      inter = topo::port_GBps(ports) / static_cast<double>(host.gpus.size());
      inter_basis = fmt::format("{:.4g} Gbit/s of {} ports on {} shared by its {} GPU(s)", ports,
                                rdma > 0 ? "RDMA" : "Ethernet", host.hostname, host.gpus.size());
    }
    what = fmt::format("this host's {} {} GPU(s) and network ports", host.gpus.size(),
                       host.gpus.front().name);
  }
  for (Collective coll : kAdvisedCollectives) {
    c.bandwidth.at(coll, Scope::kIntraNode) = {{1, intra, 0}};
    c.bandwidth.at(coll, Scope::kInterNode) = {{1, inter, 0}};
  }
  // Latency per ring step: NCCL's own tuning model (src/graph/tuning.cc,
  // hwLat for Ring/Simple: 3.4-5.7 us over NVLink, 6.6-9.6 us over the
  // network, by version), rounded up.
  c.intra_step_latency_s = 5e-6;
  c.inter_step_latency_s = 10e-6;
  summary.push_back(
      fmt::format("intra-node: every collective at {:.3g} GB/s busbw, {} (nominal), "
                  "5 us per algorithm step",
                  intra, intra_basis));
  summary.push_back(
      fmt::format("inter-node: every collective at {:.3g} GB/s busbw, {} (nominal), "
                  "10 us per algorithm step",
                  inter, inter_basis));
  return fmt::format(
      "topo's expected figures for {} (no records given; pass bench records or "
      "--intra-busbw/--inter-busbw to use measured ones)",
      what);
}

// 7e9 -> "7 B", 1.3e8 -> "130 M".
std::string count_text(double n) {
  if (n >= 1e12) return fmt::format("{:.4g} T", n / 1e12);
  if (n >= 1e9) return fmt::format("{:.4g} B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.4g} M", n / 1e6);
  return fmt::format("{:.0f}", n);
}

std::string gib(double bytes) { return fmt::format("{:.1f}", bytes / (1024.0 * 1024 * 1024)); }

void print_table(const Advice& a, const AdvisorModel& m, const AdvisorCluster& c,
                 const std::vector<std::string>& bandwidth, bool all) {
  const bool probe = m.kind == ModelKind::kProbe;
  const size_t per_node = std::max<size_t>(1, std::min(c.ranks_per_node, c.ranks));
  const std::string model =
      probe ? fmt::format("probe MLP {} x {} (width x depth)", m.hidden, m.layers)
            : fmt::format("transformer {} parameters, {} layers, hidden {}{}",
                          count_text(m.parameters), m.layers, m.hidden,
                          m.experts ? fmt::format(", {} experts top-{}", m.experts, m.top_k) : "");
  std::printf(
      "# ccscope advise: %s; global batch %zu samples%s; %s, %zu optimizer word(s) per "
      "parameter\n",
      model.c_str(), m.global_batch,
      probe ? "" : fmt::format(" of {} tokens", m.sequence_length).c_str(),
      std::string(name(m.precision)).c_str(), m.optimizer_words);
  std::printf(
      "# cluster: %zu rank(s), %zu per node (%zu node(s)), GPU %s GiB (%s usable), %s\n", c.ranks,
      per_node, (c.ranks + per_node - 1) / per_node, gib(c.gpu_memory_bytes).c_str(),
      gib(c.gpu_memory_bytes * c.usable_memory_fraction).c_str(),
      c.compute_seconds > 0
          ? fmt::format("compute {:.4g} s per global batch on one rank", c.compute_seconds).c_str()
          : fmt::format("compute {:.3g} FLOP/s per rank", c.flops_per_rank).c_str());
  for (const auto& line : bandwidth) std::printf("# bandwidth: %s\n", line.c_str());
  std::printf("# memory in GiB per rank; times in seconds per step (the busiest rank's)\n");
  std::printf("%-44s %5s %8s %7s %7s %4s %9s %9s %9s %9s %9s %9s\n", "layout", "micro", "memory",
              "states", "activ", "fits", "compute", "comm", "exposed", "bubble", "offload", "step");
  size_t shown = 0, hidden = 0;
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    const Estimate& e = a.candidates[i];
    if (!all && shown >= 15) {
      ++hidden;
      continue;
    }
    ++shown;
    const char* mark = a.recommended && *a.recommended == i ? "  <- recommended"
                       : a.runner_up && *a.runner_up == i   ? "  <- runner-up"
                       : a.rule_pick && *a.rule_pick == i   ? "  <- rule of thumb"
                                                            : "";
    std::printf("%-44s %5zu %8s %7s %7s %4s %9.4g %9.4g %9.4g %9.4g %9.4g %9.4g%s\n",
                label(e.layout).c_str(), e.layout.micro_batches, gib(e.memory.total()).c_str(),
                gib(e.memory.model_states()).c_str(), gib(e.memory.activations).c_str(),
                e.fits ? "yes" : "no", e.compute_s, e.comm_s, e.exposed_comm_s, e.bubble_s,
                e.offload_s, e.step_s, mark);
  }
  if (hidden) std::printf("# %zu more layout(s) not shown (--all)\n", hidden);
  if (a.rule_pick && *a.rule_pick >= shown) {
    const Estimate& e = a.candidates[*a.rule_pick];
    std::printf("# rule of thumb's: %s, %s GiB, %s, %.4g s per step\n", label(e.layout).c_str(),
                gib(e.memory.total()).c_str(), e.fits ? "fits" : "does not fit", e.step_s);
  }
  std::printf("\n%s: %s\n", a.recommended ? "recommended" : "no recommendation", a.reason.c_str());
  std::printf("rule of thumb: %s; %s\n", a.rule.c_str(), a.rule_verdict.c_str());
  for (const auto& note : a.notes) std::printf("note: %s\n", note.c_str());
}

}  // namespace advise_verb_detail

int advise_verb(const std::vector<std::string>& args, const std::vector<std::string>&) {
  using namespace advise_verb_detail;
  AdviseFlags f;
  CLI::App app{
      "ccscope advise: memory per rank and time per step of every parallel layout (DDP,\n"
      "ZeRO-1/2/3 with and without CPU offload, TP, PP, EP and their combinations) from the\n"
      "model's size, the GPUs' memory, the rank count and this cluster's measured bandwidth\n"
      "(ccscope bench CSV/JSON or nccl-tests output: records of one node are intra-node, of\n"
      "several inter-node; prefix a file intra: or inter: to say so; without any, topo's\n"
      "expected figures, and a line says so). Recommends the fastest\n"
      "that fits, the runner-up, and says where the rule of thumb would pick otherwise.\n"
      "Exit 0 a recommendation, 1 nothing fits, 2 bad input.",
      "ccscope advise"};
  app.add_option("files", f.files, "bandwidth records (intra:FILE, inter:FILE to force a scope)");
  app.add_option("--kind", f.kind,
                 "transformer (Megatron-LM's accounting) or probe (ccscope train's MLP)")
      ->capture_default_str();
  app.add_option("--params", f.params, "parameters, every expert's included: 7e9, 7B, 175B");
  app.add_option("--layers", f.layers, "transformer layers");
  app.add_option("--hidden", f.hidden, "hidden size");
  app.add_option("--heads", f.heads, "attention heads (default hidden / 128)");
  app.add_option("--experts", f.experts, "experts per MoE layer (default 0: dense)");
  app.add_option("--top-k", f.top_k, "experts per token")->capture_default_str();
  app.add_option("--expert-params", f.expert_params,
                 "of --params, those in experts (default: all but attention, params - 4 L h^2)");
  app.add_option("--width", f.width, "probe: features of every layer (default 512)");
  app.add_option("--depth", f.depth, "probe: linear layers (default 4)");
  app.add_option("--seq-len", f.seq_len, "tokens per sample (default 2048)");
  app.add_option("--global-batch", f.global_batch,
                 "samples per step (default 1024; probe 128, as ccscope train)");
  app.add_option("--global-batch-tokens", f.global_batch_tokens, "tokens per step, e.g. 4M");
  app.add_option("--precision", f.precision, "bf16 (default), fp16, fp32 (probe's default)");
  app.add_option("--optimizer", f.optimizer, "adam (default), adamw, sgd (probe's default)");
  add_number_option(app, "--momentum", f.momentum, "SGD momentum (0: no optimizer state)",
                    {0, 1, false, true})
      ->capture_default_str();
  app.add_option("--gpu-memory", f.gpu_memory, "memory per GPU, e.g. 80G (binary: GiB)");
  app.add_option("--ranks", f.ranks, "ranks (GPUs) to train on");
  app.add_option("--ranks-per-node", f.ranks_per_node,
                 "ranks per node (default: the inter-node records', else 8)");
  add_number_option(app, "--usable-memory", f.usable,
                    "the fraction of GPU (and host) memory a framework can use", {0, 1, true})
      ->capture_default_str();
  app.add_option("--host-memory", f.host_memory, "host memory per node, for offload (e.g. 1T)");
  add_number_option(app, "--pcie-GBps", f.pcie_GBps,
                    "host-device bandwidth per rank, GB/s (offload)", {0, 1e6, true})
      ->capture_default_str();
  app.add_option("--host-optimizer-rate", f.host_optimizer_rate,
                 "parameters per second one rank's CPU optimizer steps (offload)")
      ->capture_default_str();
  app.add_option("--flops", f.flops,
                 "achieved FLOP/s per rank on large GEMMs, e.g. 400e12 (default: peak x mfu)");
  app.add_option("--peak-flops", f.peak_flops,
                 "peak FLOP/s per GPU (default 989e12, H100 SXM bf16 dense; A100 312e12)");
  add_number_option(app, "--mfu", f.mfu, "utilisation large GEMMs reach of the peak (default 0.45)",
                    {0, 1, true});
  add_number_option(app, "--gemm-knee", f.gemm_knee,
                    "GEMM efficiency n / (n + knee) of a layout's smallest GEMM dimension (0 flat)",
                    {0, 1e9})
      ->capture_default_str();
  app.add_option("--attention", f.attention, "flash (no s^2 scores kept, the default) or standard")
      ->capture_default_str();
  app.add_option("--recompute", f.recompute,
                 "activation recomputation: auto (chosen per layout), none, selective, full")
      ->capture_default_str();
  app.add_flag("--no-sequence-parallel", f.no_sequence_parallel,
               "no sequence parallelism with tensor parallelism");
  app.add_flag("--no-interleave", f.no_interleave, "no interleaved pipeline schedule");
  app.add_flag("--no-hybrid-shard", f.no_hybrid_shard,
               "no hybrid sharding (ZeRO-2/3 inside a node, replicas across nodes)");
  add_number_option(app, "--compute-seconds", f.compute_seconds,
                    "measured: one rank's compute for the whole global batch, seconds", {0, 1e9});
  add_number_option(app, "--intra-busbw", f.intra_busbw,
                    "intra-node busbw, GB/s, for every collective (instead of records)", {0, 1e6});
  add_number_option(app, "--inter-busbw", f.inter_busbw,
                    "inter-node busbw, GB/s, for every collective (instead of records)", {0, 1e6});
  add_number_option(app, "--bucket-mb", f.bucket_mb, "DDP/ZeRO bucket size, MiB", {0, 1e6, true})
      ->capture_default_str();
  app.add_option("--min-micro-batch", f.min_micro_batch,
                 "samples per micro-batch at least (default 1; probe 32 rows)");
  app.add_flag("--no-overlap", f.no_overlap, "DDP/ZeRO communication not overlapped with compute");
  app.add_flag("--tp-across-nodes", f.tp_across_nodes, "let tensor-parallel groups span nodes");
  app.add_flag("--json", f.json, "the advice as JSON (ccscope.advice/1) on stdout");
  app.add_flag("--all", f.all, "every layout in the table, not the first 15");
  if (const auto code = parse_flags(app, kAdviseVerb, args)) return *code;
  f.kind_given = app.count("--kind") > 0;

  AdvisorModel model;
  AdvisorCluster cluster;
  AdvisorOptions options;
  std::vector<std::string> notes, bandwidth;
  if (std::string problem = inputs_from_flags(f, model, cluster, options, notes); !problem.empty())
    return usage_error(kAdviseVerb, problem);
  size_t inter_per_node = 0;
  if (std::string problem = read_bandwidth(f.files, cluster, notes, bandwidth, inter_per_node);
      !problem.empty())
    return usage_error(kAdviseVerb, problem);
  if (f.intra_busbw > 0) flat_curves(cluster, Scope::kIntraNode, f.intra_busbw, bandwidth);
  if (f.inter_busbw > 0) flat_curves(cluster, Scope::kInterNode, f.inter_busbw, bandwidth);
  // No records and no busbw flags: topo's expected figures (records given
  // but none usable stay an error: a default would hide it).
  if (f.files.empty() && cluster.bandwidth.empty() && cluster.ranks > 1) {
    const std::string source = expected_bandwidth(cluster, bandwidth);
    bandwidth.insert(bandwidth.begin(), source);
    if (f.json) notes.insert(notes.begin(), "bandwidth: " + source);  // the table prints it
  }
  if (f.ranks_per_node.empty()) {
    cluster.ranks_per_node = inter_per_node ? inter_per_node : 8;
    if (!inter_per_node && cluster.ranks > 8)
      notes.push_back(
          "ranks per node: assumed 8 (no inter-node records say; give --ranks-per-node)");
  }
  if (std::string problem = validate(model, cluster, options); !problem.empty())
    return usage_error(kAdviseVerb, problem);

  Advice advice = advise(model, cluster, options);
  advice.notes.insert(advice.notes.begin(), notes.begin(), notes.end());
  if (f.json)
    std::fputs(advice_json(advice, model, cluster, options).c_str(), stdout);
  else
    print_table(advice, model, cluster, bandwidth, f.all);
  return advice.recommended ? 0 : kExitNothingFits;
}

}  // namespace ccscope::app
