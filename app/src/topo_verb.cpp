// `ccscope topo [--from FILE]... [--nccl-topo FILE] [--measure] [--json] [--csv FILE]`:
// the topology of every node of the job (or of saved files), the path between
// every pair of GPUs and of nodes with its expected bandwidth, findings, and
// with --measure the point-to-point bandwidth of every pair in disjoint rounds.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/bench/benchmark.h"
#include "ccscope/bench/cluster_topology.h"
#include "ccscope/bench/pair_bandwidth.h"
#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/world.h"
#include "ccscope/common/sizes.h"
#include "ccscope/job/backend_registry.h"
#include "ccscope/job/run_job.h"
#include "ccscope/job/watchdog.h"
#include "ccscope/records/topology_record.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/user_files.h"
#include "ccscope/topo/findings.h"
#include "ccscope/topo/nvidia_smi.h"
#include "ccscope/topo/readers.h"
#include "ccscope/topo/report.h"
#include "ccscope/topo/schedule.h"
#include "verb_support.h"

namespace ccscope::app {
namespace {

constexpr const char* kVerb = "topo";

struct TopoFlags {
  std::vector<std::string> from;
  std::string nccl_topo;
  bool json = false;
  std::string csv;
  bool measure = false;
  double threshold = 0.7;
  std::string bytes_text = "16M";
  size_t bytes = size_t{16} << 20;
  int iterations = 5;
  std::string backend = "auto";
  double timeout_seconds = 120;
  bool no_hwloc = false;
  bool no_nvml = false;
  std::string sysfs_root = "/sys";
};

// A saved topology: hwloc XML, NCCL's dump, ccscope's JSON (one or more
// nodes), or text with nvidia-smi topo -m (and nvlink -s), whose findings go
// to `findings` (named by the file: the text names no host).
std::vector<topo::HostTopology> load_topology_file(const std::string& path,
                                                   std::vector<topo::Finding>* findings = nullptr) {
  const std::string text = reports::read_input_file(path);
  try {
    switch (topo::detect_topology_format(text)) {
      case topo::TopologyFormat::kNvidiaSmiText: {
        const auto matrix = *topo::find_nvidia_smi_topo(text);
        const auto nvlinks = topo::find_nvidia_smi_nvlink_status(text);
        auto host = topo::topology_from_nvidia_smi(matrix, nvlinks);
        host.hostname = std::filesystem::path(path).filename().string();
        if (findings)
          for (auto f : topo::check_nvidia_smi(matrix, nvlinks)) {
            f.host = host.hostname;
            findings->push_back(std::move(f));
          }
        return {host};
      }
      case topo::TopologyFormat::kHwlocXml:
        return {topo::read_hwloc_xml(text)};
      case topo::TopologyFormat::kNcclXml:
        return {topo::read_nccl_topology_xml(text)};
      case topo::TopologyFormat::kCcscopeJson:
        return topo::read_topology_json(text);
      case topo::TopologyFormat::kUnknown:
        break;
    }
  } catch (const topo::TopologyError& e) {
    throw reports::InputError(reports::quote_name(path) + ": " + e.what());
  }
  throw reports::InputError(reports::quote_name(path) +
                            ": not a topology file (hwloc XML from lstopo --of xml, an "
                            "NCCL_TOPO_DUMP_FILE dump, ccscope topo --json output, or text "
                            "with nvidia-smi topo -m)");
}

// The path records of a report as CSV (topo::path_records builds them).
std::string path_records_csv(const topo::TopologyReport& report) {
  const auto& kind = records::topology_path_kind();
  std::string out = records::csv_line(records::csv_columns(kind));
  for (const records::TopologyPathRecord& r : topo::path_records(report))
    out += records::csv_row(kind, records::topology_path_cells(r));
  return out;
}

// Writes the outputs rank 0 owes: --csv and the text or JSON on stdout.
int write_outputs(const TopoFlags& flags, const reports::OutputTarget* csv,
                  const topo::TopologyReport& report) {
  if (csv) {
    try {
      reports::write_whole_file(*csv, path_records_csv(report));
    } catch (const std::exception& e) {
      return write_error(kVerb, e.what());
    }
  }
  std::cout << (flags.json ? topo::topology_json(report) : topo::render_topology_text(report))
            << std::flush;
  return 0;
}

void cross_check(topo::TopologyReport& report, const std::vector<topo::HostTopology>& nccl_views) {
  for (const topo::HostTopology& view : nccl_views) {
    // NCCL's dump names no host: it is of the node it was written on, the first
    // node here (rank 0's), unless only one node is shown.
    topo::HostTopology& node = report.nodes.front();
    for (topo::Finding& f : topo::cross_check_nccl(node, view))
      report.findings.push_back(std::move(f));
    const topo::SourceStatus status{
        "nccl", true,
        "NCCL topology dump (cross-checked): " + std::to_string(view.gpus.size()) + " GPUs, " +
            std::to_string(view.nics.size()) + " NICs"};
    if (topo::SourceStatus* held = node.source("nccl"))
      *held = status;
    else
      node.sources.push_back(status);
  }
}

// The rounds --measure runs: node pairs (their first ranks) first, then the GPU
// pairs inside every node at once (round r of each node together: disjoint ranks).
struct MeasurePlan {
  std::vector<bench::RankPairRound> rounds;
  std::vector<std::vector<std::pair<std::string, std::string>>> labels;  // per round, per pair
};

MeasurePlan plan_measurement(const bench::ClusterTopology& cluster, bool gpu_pairs) {
  MeasurePlan plan;
  const size_t nodes = cluster.nodes.size();
  std::vector<int> leader(nodes, -1);
  std::vector<std::vector<int>> local(nodes);
  for (size_t rank = 0; rank < cluster.rank_node.size(); ++rank) {
    const size_t node = cluster.rank_node[rank];
    if (node >= nodes) continue;
    if (leader[node] < 0) leader[node] = static_cast<int>(rank);
    local[node].push_back(static_cast<int>(rank));
  }
  for (const topo::PairRound& round : topo::disjoint_pair_rounds(nodes)) {
    bench::RankPairRound pairs;
    std::vector<std::pair<std::string, std::string>> names;
    for (const auto& [a, b] : round) {
      pairs.emplace_back(leader[a], leader[b]);
      names.emplace_back(cluster.nodes[a].hostname, cluster.nodes[b].hostname);
    }
    plan.rounds.push_back(pairs);
    plan.labels.push_back(names);
  }
  if (!gpu_pairs) return plan;
  std::vector<std::vector<topo::PairRound>> per_node(nodes);
  size_t most = 0;
  for (size_t n = 0; n < nodes; ++n) {
    per_node[n] = topo::disjoint_pair_rounds(local[n].size());
    most = std::max(most, per_node[n].size());
  }
  for (size_t r = 0; r < most; ++r) {
    bench::RankPairRound pairs;
    std::vector<std::pair<std::string, std::string>> names;
    for (size_t n = 0; n < nodes; ++n) {
      if (r >= per_node[n].size()) continue;
      for (const auto& [a, b] : per_node[n][r]) {
        const int rank_a = local[n][a], rank_b = local[n][b];
        const int gpu_a = cluster.rank_gpu[static_cast<size_t>(rank_a)];
        const int gpu_b = cluster.rank_gpu[static_cast<size_t>(rank_b)];
        if (gpu_a < 0 || gpu_b < 0 || gpu_a == gpu_b) continue;
        pairs.emplace_back(rank_a, rank_b);
        names.emplace_back(cluster.nodes[n].hostname + "/GPU" + std::to_string(gpu_a),
                           cluster.nodes[n].hostname + "/GPU" + std::to_string(gpu_b));
      }
    }
    if (pairs.empty()) continue;
    plan.rounds.push_back(pairs);
    plan.labels.push_back(names);
  }
  return plan;
}

// The live probe, as the body of its job.
int run_live(job::JobContext& job, const TopoFlags& flags,
             const std::vector<topo::HostTopology>& nccl_views) {
  const World& world = job.world();
  const bool leader = job.leader();
  std::unique_ptr<reports::OutputTarget> csv;
  if (const int refused = open_outputs(job, kVerb, [&] {
        if (!flags.csv.empty())
          csv = std::make_unique<reports::OutputTarget>(
              reports::resolve_outputs({{"--csv", flags.csv}}, {{"--nccl-topo", flags.nccl_topo}})
                  .front());
      }))
    return refused;
  // Chosen and judged before the watchdog starts: a refusal ends every rank
  // before any watch connection exists to be taken for a death.
  const std::string backend =
      flags.backend == "auto" ? job::default_backend(world, false).backend : flags.backend;
  const job::Backend* chosen = job::find_backend(backend);
  if (!chosen || !chosen->built())
    return job.refuse("--backend " + backend + ": this ccscope was built without " +
                      (chosen ? chosen->library : backend));
  const bool on_device = chosen->capabilities.device == job::DeviceKind::kDevice;
  // The watchdog names a rank whose probe or exchange hangs.
  HangWatchdog& watchdog = job.start_watchdog(
      std::chrono::milliseconds(static_cast<long long>(flags.timeout_seconds * 1000)));
  topo::ProbeOptions probe;
  probe.use_hwloc = !flags.no_hwloc;
  probe.use_nvml = !flags.no_nvml;
  probe.sysfs_root = flags.sysfs_root;
  const std::string bus = on_device ? gpu_identity_for_local_rank(world.local_rank()) : "";
  bench::ClusterTopology cluster;
  try {
    watchdog.begin_phase("topology probe and gather");
    watchdog.operation_started();
    cluster = bench::gather_cluster_topology(world, probe, bus);
    watchdog.end_phase();
  } catch (const topo::TopologyError& e) {
    if (leader)
      std::fprintf(stderr, "ccscope topo: error: a node's topology did not read back: %s\n",
                   e.what());
    return 1;
  }
  topo::TopologyReport report;
  report.nodes = cluster.nodes;
  report.env = topo::nccl_environment_from_process();
  report.sockets_only = !on_device;
  report.threshold = flags.threshold;
  if (leader)
    std::fprintf(stderr, "ccscope topo: probed %zu node(s) in %.3f s (the slowest node's probe)\n",
                 cluster.nodes.size(), cluster.probe_seconds);

  if (flags.measure && world.size() > 1) {
    const MeasurePlan plan = plan_measurement(cluster, on_device);
    if (plan.rounds.empty() && leader)
      std::fprintf(stderr,
                   "ccscope topo: note: --measure: one node and no GPU pairs on the %s backend: "
                   "nothing to measure (launch ranks on several nodes)\n",
                   backend.c_str());
    std::vector<bench::PairBandwidth> figures;
    try {
      bench::PairBandwidthOptions options;
      options.bytes = flags.bytes;
      options.repetitions = flags.iterations;
      options.timeout =
          std::chrono::milliseconds(static_cast<long long>(flags.timeout_seconds * 1000));
      watchdog.begin_phase("topo --measure: pair bandwidth rounds");
      watchdog.operation_started();
      if (on_device) {
        std::unique_ptr<Communicator> comm = job::make_backend(backend, world, {});
        figures = bench::measure_pair_rounds(*comm, world, plan.rounds, options);
      } else {
        std::unique_ptr<PointToPoint> p2p = job::make_point_to_point(world);
        figures = bench::measure_pair_rounds_one_way(*p2p, world, plan.rounds, options);
      }
      watchdog.end_phase();
    } catch (const std::exception& e) {
      job.end_job(job::kExitCheckFailed, std::string("--measure failed: ") + e.what());
    }
    // figures come round by round, pair by pair, in the plan's order.
    size_t next = 0;
    for (size_t r = 0; r < plan.rounds.size(); ++r)
      for (size_t p = 0; p < plan.rounds[r].size() && next < figures.size(); ++p, ++next) {
        topo::MeasuredPair m;
        m.endpoint_a = plan.labels[r][p].first;
        m.endpoint_b = plan.labels[r][p].second;
        m.round = r;
        m.measured_GBps = figures[next].GBps;
        report.measured.push_back(m);
      }
  } else if (flags.measure && leader) {
    std::fprintf(stderr,
                 "ccscope topo: note: --measure needs two or more ranks (mpiexec -n N); "
                 "nothing measured\n");
  }
  int rc = 0;
  if (leader) {
    topo::complete_report(report);
    cross_check(report, nccl_views);
    rc = write_outputs(flags, csv.get(), report);
  }
  return job.leave_together(rc);
}

}  // namespace

int topo_verb(const std::vector<std::string>& args, const std::vector<std::string>& command_line) {
  (void)command_line;
  TopoFlags flags;
  CLI::App app{
      "The topology of every node of the job: GPUs, NICs, the path between every pair of GPUs "
      "(nvidia-smi topo -m's names) and of nodes (IB, RoCE, socket) with its expected bandwidth "
      "from the nominal-rate table, findings (nodes that differ, links below their maximum), "
      "and with --measure the bandwidth of every pair. Launch with mpiexec for a cluster view.",
      "ccscope topo"};
  app.add_option(
      "--from", flags.from,
      "read saved topologies instead of probing: hwloc XML (lstopo --of xml), an "
      "NCCL_TOPO_DUMP_FILE dump, ccscope topo --json output, or text with nvidia-smi topo -m "
      "(and nvlink -s) as pasted in bug reports (repeatable: one node each)");
  app.add_option("--nccl-topo", flags.nccl_topo,
                 "NCCL's own view (an NCCL_TOPO_DUMP_FILE dump of this node) to cross-check with");
  app.add_flag("--json", flags.json,
               "print the JSON document (docs/topo.md: Topology JSON) instead of text");
  add_output_option(app, "--csv", flags.csv,
                    "write the path records (ccscope.topo_path/1) to FILE");
  app.add_flag("--measure", flags.measure,
               "measure point-to-point bandwidth between every pair of nodes (and of GPUs inside a "
               "node on the NCCL backend), in rounds of disjoint pairs");
  add_number_option(app, "--threshold", flags.threshold,
                    "flag measured pairs below this share of expected", {0, 1});
  app.add_option("-b,--bytes", flags.bytes_text, "bytes per direction per exchange (16M)");
  app.add_option("-n,--iters", flags.iterations, "timed exchanges per pair (median taken)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--backend", flags.backend, "mpi, nccl or auto (nccl when a GPU is usable)")
      ->check(CLI::IsMember({"auto", "mpi", "nccl"}));
  add_number_option(app, "--timeout", flags.timeout_seconds,
                    "seconds before a stuck exchange is reported", {1, 86400});
  app.add_flag("--no-hwloc", flags.no_hwloc, "do not read hwloc (the PCI tree)");
  app.add_flag("--no-nvml", flags.no_nvml, "do not load NVML");
  app.add_option("--sysfs", flags.sysfs_root, "sysfs root to read NICs from (tests)");
  if (const std::optional<int> done = parse_flags(app, kVerb, args)) return *done;
  // Before MPI is up every process of a launch reads the same flags and files:
  // one of them (the launcher's rank 0) speaks and writes for all.
  const bool speaks = job::launcher_says_rank_zero();
  auto refuse = [&](const std::string& what) {
    return speaks ? usage_error(kVerb, what) : kExitUsage;
  };
  const std::optional<size_t> bytes = parse_size(flags.bytes_text);
  if (!bytes || *bytes == 0)
    return refuse("-b/--bytes '" + flags.bytes_text +
                  "' is not a size of at least 1 byte (e.g. 16M, 1G, 4096)");
  flags.bytes = *bytes;
  if (!flags.from.empty() && flags.measure)
    return refuse("--measure runs on the live job; it cannot measure a --from file");
  std::vector<topo::HostTopology> nccl_views;
  try {
    if (!flags.nccl_topo.empty()) nccl_views = load_topology_file(flags.nccl_topo);
  } catch (const reports::InputError& e) {
    return refuse(e.what());
  }
  if (flags.from.empty())
    return job::run_job({kVerb},
                        [&](job::JobContext& job) { return run_live(job, flags, nccl_views); });
  try {
    topo::TopologyReport report;
    std::vector<topo::Finding> text_findings;
    for (const std::string& path : flags.from)
      for (topo::HostTopology& node : load_topology_file(path, &text_findings))
        report.nodes.push_back(std::move(node));
    report.env = topo::nccl_environment_from_process();
    report.threshold = flags.threshold;
    std::unique_ptr<reports::OutputTarget> csv;
    if (!flags.csv.empty() && speaks) {
      std::vector<std::pair<std::string, std::string>> inputs = {{"--nccl-topo", flags.nccl_topo}};
      for (const std::string& path : flags.from) inputs.emplace_back("--from", path);
      csv = std::make_unique<reports::OutputTarget>(
          reports::resolve_outputs({{"--csv", flags.csv}}, inputs).front());
    }
    topo::complete_report(report);
    for (topo::Finding& f : text_findings) report.findings.push_back(std::move(f));
    cross_check(report, nccl_views);
    return speaks ? write_outputs(flags, csv.get(), report) : 0;
  } catch (const reports::InputError& e) {
    return refuse(e.what());
  }
}

}  // namespace ccscope::app
