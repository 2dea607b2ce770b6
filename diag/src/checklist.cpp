#include "ccscope/diag/checklist.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ccscope/bench/cluster_topology.h"
#include "ccscope/bench/pair_bandwidth.h"
#include "ccscope/bench/sweep.h"
#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/group_point_to_point.h"
#include "ccscope/common/environment.h"
#include "ccscope/common/json_text.h"
#include "ccscope/common/sizes.h"
#include "ccscope/common/small_file.h"
#include "ccscope/common/statistics.h"
#include "ccscope/diag/clock_offset.h"
#include "ccscope/diag/counters.h"
#include "ccscope/diag/environment_check.h"
#include "ccscope/diag/localize.h"
#include "ccscope/job/backend_registry.h"
#include "ccscope/records/collective.h"
#include "ccscope/records/reporter.h"
#include "ccscope/topo/findings.h"
#include "ccscope/topo/nccl_env.h"
#include "ccscope/topo/schedule.h"
#include "ccscope/training_probe/equivalence.h"
#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/summary.h"
#include "ccscope/training_probe/trainer.h"
#include "ccscope/version.h"
#include "local_figures.h"

extern char** environ;

namespace ccscope::diag {
namespace {

using json = nlohmann::json;

// A wait by design is timed by the watchdog against its bound; the barrier
// behind it gives up this much later, so that the watchdog's report (its
// questions to every rank, 2 s, and NCCL RAS's evidence) comes first.
constexpr std::chrono::seconds kWaitReportMargin{10};

std::vector<int> all_ranks(const World& world) {
  std::vector<int> ranks(static_cast<size_t>(world.size()));
  for (size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int>(r);
  return ranks;
}

// Stage 2's collectives over each node, in the order of its report: the
// all-reduce family nodes run in training; rooted and per-peer variants
// (reduce, gather, scatter, all-to-all-v) add time but no other link.
constexpr Collective kNodeCollectives[] = {Collective::kAllReduce,     Collective::kAllGather,
                                           Collective::kReduceScatter, Collective::kBroadcast,
                                           Collective::kAllToAll,      Collective::kSendRecv};

// Keeps the records a sweep hands its reporter (rank 0 of the sweep's group).
class CollectingReporter : public records::Reporter {
 public:
  void begin(const records::RunMetadata&) override {}
  void add(const records::BenchRecord& record) override { records.push_back(record); }
  void end(const records::RunMetadata&) override {}
  std::vector<records::BenchRecord> records;
};

// The watchdog's phases: a stage's outer phase stays on between the inner
// phases a sweep opens and closes, so that a rank stopped between two sweeps
// (while the others wait in a gather) is still named. Gathers mark progress.
class PhaseMonitor : public bench::SweepMonitor {
 public:
  explicit PhaseMonitor(HangWatchdog& watchdog) : watchdog_(watchdog) {}
  ~PhaseMonitor() override {
    if (!outer_.empty()) watchdog_.end_phase();
  }
  void stage(const std::string& description) {
    outer_ = description;
    watchdog_.begin_phase(outer_);
  }
  void end_stage() {
    outer_.clear();
    watchdog_.end_phase();
  }
  // This rank waits for `awaited` by design (stage 3's node leaders measure,
  // stage 2's nodes take turns): timed as a whole against `limit`, and never
  // called behind in a stall report. Ends with end_wait() or the next stage().
  void wait_for(const std::string& description, const std::vector<int>& awaited,
                std::chrono::milliseconds limit) {
    watchdog_.begin_wait(description, awaited, limit);
  }
  // Back to the stage's phase after a wait.
  void end_wait() {
    if (outer_.empty())
      watchdog_.end_phase();
    else
      watchdog_.begin_phase(outer_);
  }
  void begin_phase(const std::string& description) override {
    watchdog_.begin_phase(outer_.empty() ? description : outer_ + ": " + description);
  }
  void operation_started() override { watchdog_.operation_started(); }
  void end_phase() override {
    if (outer_.empty())
      watchdog_.end_phase();
    else
      watchdog_.begin_phase(outer_);
  }

 private:
  HangWatchdog& watchdog_;
  std::string outer_;
};

// Every rank's text, by rank; a gather is progress for the watchdog.
std::vector<std::string> gather(const World& world, PhaseMonitor& monitor,
                                const std::string& text) {
  monitor.operation_started();
  return world.all_gather(text);
}

// What a stage has judged so far, on rank 0; every rank learns the worst.
class StageVerdicts {
 public:
  StageVerdicts(const World& world, const ChecklistOptions& options, ChecklistResult& result)
      : world_(world), options_(options), result_(result) {}
  void add(Check check) {
    if (world_.rank() != 0) return;
    if (options_.on_check) options_.on_check(check);
    stage_checks_.push_back(check);
    result_.checks.push_back(std::move(check));
  }
  void add(std::vector<Check> checks) {
    for (Check& c : checks) add(std::move(c));
  }
  // Collective: the stage's worst status, agreed over the ranks.
  Status finish() {
    double value = world_.rank() == 0 ? status_value(worst_status(stage_checks_)) : 0;
    world_.all_reduce_max({&value, 1});
    stage_checks_.clear();
    return value >= 2 ? Status::kFail : value >= 1 ? Status::kWarn : Status::kPass;
  }

 private:
  const World& world_;
  const ChecklistOptions& options_;
  ChecklistResult& result_;
  std::vector<Check> stage_checks_;
};

Check make_check(Stage stage, std::string name, Status status, std::string host, int rank,
                 std::string message, std::string remedy = "") {
  Check c;
  c.stage = stage;
  c.name = std::move(name);
  c.status = status;
  c.host = std::move(host);
  c.rank = rank;
  c.message = std::move(message);
  c.remedy = status == Status::kPass ? "" : std::move(remedy);
  return c;
}

// The job's backend as registered (the verb refuses a name that is not).
const job::Backend& job_backend(const ChecklistOptions& options) {
  const job::Backend* backend = job::find_backend(options.backend);
  if (!backend) throw std::invalid_argument("no backend named '" + options.backend + "'");
  return *backend;
}

bool on_device(const ChecklistOptions& options) {
  return job_backend(options).capabilities.device == job::DeviceKind::kDevice;
}

// A backend that makes no group communicators spans the world only (NCCL's here).
bool spans_world_only(const ChecklistOptions& options) {
  return !job_backend(options).capabilities.groups;
}

bench::BenchOptions sweep_options(const ChecklistOptions& options, Collective collective,
                                  size_t min_bytes, size_t max_bytes, int iterations) {
  bench::BenchOptions b;
  b.collectives = {collective};
  b.collective = collective;
  b.min_bytes = min_bytes;
  b.max_bytes = max_bytes;
  b.step_factor = 8;
  b.iterations = iterations;
  b.warmup_iterations = 2;
  b.check_iterations = 1;
  b.backend = options.backend;
  b.yielding_waits = !on_device(options);  // host backends: keep the cores for other ranks
  b.progress = false;
  // Twice the watchdog's: it names the stuck rank before a wait gives up.
  b.timeout_seconds = 2 * std::chrono::duration<double>(options.timeout).count();
  return b;
}

int no_signal() { return 0; }

std::unique_ptr<Communicator> world_communicator(const World& world,
                                                 const ChecklistOptions& options) {
  job::BackendOptions backend_options;
  backend_options.isolate_ranks = options.isolate_ranks;
  return job::make_backend(options.backend, world, backend_options);
}

// Over the ranks that pass `color`: the job's backend when it makes groups, else the first
// host backend that does.
std::unique_ptr<Communicator> host_group_communicator(const World& world,
                                                      const ChecklistOptions& options, int color,
                                                      bool yielding_waits) {
  const job::Backend* backend = &job::group_backend(options.backend, world.channel_name() == "mpi");
  job::BackendOptions backend_options;
  backend_options.isolate_ranks = options.isolate_ranks;  // NCCL's groups: ranks sharing a GPU
  backend_options.color = color;
  backend_options.yielding_waits = yielding_waits;
  return job::make_backend(backend->name, world, backend_options);
}

// Over the ranks that pass `color`, on the job's backend. One that spans the world only
// serves a group that is the world (one node, or stage 4's every rank): the callers ask it
// for no other.
std::unique_ptr<Communicator> group_communicator(const World& world,
                                                 const ChecklistOptions& options, int color) {
  if (spans_world_only(options)) return world_communicator(world, options);
  return host_group_communicator(world, options, color, true);
}

std::vector<int> ranks_of_host(const World& world, const std::string& host) {
  std::vector<int> members;
  for (size_t r = 0; r < world.hostnames().size(); ++r)
    if (world.hostnames()[r] == host) members.push_back(static_cast<int>(r));
  return members;
}

// The first rank of each node, by node index.
std::vector<int> node_leaders(const World& world) {
  std::vector<int> leaders;
  std::set<std::string> seen;
  for (size_t r = 0; r < world.hostnames().size(); ++r)
    if (seen.insert(world.hostnames()[r]).second) leaders.push_back(static_cast<int>(r));
  return leaders;
}

// ---- stage 1: each rank alone ----------------------------------------------

// This rank's machine: its kernel's boot id, or its hostname where that is unreadable.
std::string machine_identity(const World& world) {
  const std::string boot_id = trim_blanks(read_small_file("/proc/sys/kernel/random/boot_id", 256));
  return boot_id.empty() ? "host " + world.hostname() : "boot " + boot_id;
}

// The ranks whose `mine` (NaN: none) is a low outlier among every rank's
// (low_outliers), the same list on every rank. A figure below the others may be
// a burst of other load on a shared or virtual machine, so suspects measure
// again, alone, and keep the better figure; a slow part stays slow. With turns
// alone, rank.memory_bandwidth read 29% below the median in 1 healthy run of
// about 8 on the virtual cluster (a VM with 8% steal), node.busbw 39% below in one.
std::vector<int> low_outlier_ranks(const World& world, PhaseMonitor& monitor, double mine) {
  const std::vector<std::string> all = gather(world, monitor, fmt::format("{:.17g}", mine));
  std::vector<double> figures;
  std::vector<int> ranks;
  for (size_t r = 0; r < all.size(); ++r) {
    const double value = std::strtod(all[r].c_str(), nullptr);
    if (!std::isfinite(value)) continue;
    figures.push_back(value);
    ranks.push_back(static_cast<int>(r));
  }
  std::vector<int> outliers;
  for (size_t i : low_outliers(figures)) outliers.push_back(ranks[i]);
  return outliers;
}

struct Turns {
  int mine = 0;
  int count = 1;
  std::vector<int> of_rank;  // every world rank's turn
};
// Stage 1's schedule over ranks (per_node false) or stage 2's over nodes, in node order:
// those on one machine take turns (measurement_turns).
Turns machine_turns(const World& world, bool per_node) {
  const std::vector<std::string> machine_of_rank = world.all_gather(machine_identity(world));
  std::vector<std::string> subjects = machine_of_rank;
  size_t mine = static_cast<size_t>(world.rank());
  std::vector<size_t> subject_of_rank(machine_of_rank.size());
  for (size_t r = 0; r < subject_of_rank.size(); ++r) subject_of_rank[r] = r;
  if (per_node) {
    subjects.clear();
    std::vector<std::string> hosts;  // in order of their first rank
    for (size_t r = 0; r < machine_of_rank.size(); ++r) {
      const std::string& host = world.hostnames()[r];
      const auto known = std::find(hosts.begin(), hosts.end(), host);
      subject_of_rank[r] = static_cast<size_t>(known - hosts.begin());
      if (known != hosts.end()) continue;
      if (host == world.hostname()) mine = hosts.size();
      hosts.push_back(host);
      subjects.push_back(machine_of_rank[r]);
    }
  }
  const std::vector<int> turns = measurement_turns(subjects);
  Turns out{turns[mine], *std::max_element(turns.begin(), turns.end()) + 1, {}};
  for (size_t subject : subject_of_rank) out.of_rank.push_back(turns[subject]);
  return out;
}

void rank_stage(const World& world, PhaseMonitor& monitor, PointToPoint& p2p,
                const ChecklistOptions& options, StageVerdicts& verdicts) {
  // One rank of each machine at a time: a rank's cores and memory as it has
  // them alone, comparable across ranks and nodes. All of a node's ranks at
  // once would measure how the scheduler shares the node, which is noise when
  // ranks outnumber cores. A machine is a kernel (its boot id), not a hostname:
  // "nodes" that are containers or network namespaces of one machine share it.
  monitor.begin_phase("diag stage 1: GEMM and memory bandwidth");
  const Turns turns = machine_turns(world, false);
  GemmFigure gemm;
  MemoryFigure memory;
  // Keeps the better figure of each measurement (re-tests below), and every wrong element.
  auto measure = [&] {
    const GemmFigure gemm_now = measure_gemm(256, 5);
    const MemoryFigure memory_now = measure_memory_bandwidth(size_t{2} << 20, 5);
    gemm.GFLOPs = std::max(gemm.GFLOPs, gemm_now.GFLOPs);
    gemm.wrong += gemm_now.wrong;
    memory.GBps = std::max(memory.GBps, memory_now.GBps);
    memory.wrong += memory_now.wrong;
  };
  for (int turn = 0; turn < turns.count; ++turn) {
    if (turn == turns.mine) measure();
    monitor.operation_started();
    world.sleeping_barrier(options.timeout);
  }
  // Ranks whose figure is below the others' measure again, alone, keeping the better figure.
  std::vector<int> suspects = low_outlier_ranks(world, monitor, gemm.GFLOPs);
  for (int rank : low_outlier_ranks(world, monitor, memory.GBps))
    if (std::find(suspects.begin(), suspects.end(), rank) == suspects.end())
      suspects.push_back(rank);
  std::sort(suspects.begin(), suspects.end());
  for (int suspect : suspects) {
    if (suspect == world.rank()) measure();
    monitor.operation_started();
    world.sleeping_barrier(options.timeout);
  }
  monitor.end_phase();

  // A 1-rank all-reduce, every element checked (bench's sweep over a group of one).
  auto self_p2p = make_group_point_to_point(p2p, {world.rank()});
  auto self_control = point_to_point_control(*self_p2p);
  std::unique_ptr<Communicator> self_comm;
  if (spans_world_only(options) && world.size() == 1)
    self_comm = world_communicator(world, options);
  else
    self_comm = host_group_communicator(world, options, world.rank(), false);
  CollectingReporter collected;
  bench::BenchOptions sweep =
      sweep_options(options, Collective::kAllReduce, size_t{1} << 20, size_t{1} << 20, 5);
  sweep.backend = self_comm->backend_name();
  const bench::SweepOutcome outcome =
      bench::run_sweep(sweep, *self_control, {1, 1, world.hostname()}, *self_comm, monitor,
                       &collected, 0, no_signal);

  // Device copies: only a device communicator has device memory (on several
  // ranks, the world's NCCL communicator: its buffers are this rank's GPU's).
  double h2d_GBps = 0, d2h_GBps = 0;
  std::unique_ptr<Communicator> device_comm;
  if (on_device(options) && self_comm->memory_kind() != MemoryKind::kDevice)
    device_comm = world_communicator(world, options);
  Communicator& copier = device_comm ? *device_comm : *self_comm;
  if (copier.memory_kind() == MemoryKind::kDevice) {
    const size_t bytes = size_t{256} << 20;
    std::vector<char> host(bytes, 1);
    auto device = copier.allocate(bytes);
    auto time_copy = [&](bool to_device) {
      double best = std::numeric_limits<double>::infinity();
      for (int i = 0; i < 3; ++i) {
        const auto start = std::chrono::steady_clock::now();
        if (to_device)
          copier.copy_from_host(*device, 0, host.data(), bytes);
        else
          copier.copy_to_host(host.data(), *device, 0, bytes);
        best = std::min(
            best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      return static_cast<double>(bytes) / best / 1e9;
    };
    h2d_GBps = time_copy(true);
    d2h_GBps = time_copy(false);
  }

  json mine = {{"gemm", gemm.GFLOPs},
               {"gemm_wrong", gemm.wrong},
               {"memory", memory.GBps},
               {"memory_wrong", memory.wrong},
               {"wrong", outcome.wrong_elements},
               {"records", outcome.records},
               {"h2d", h2d_GBps},
               {"d2h", d2h_GBps},
               {"device", self_comm->device_name()}};
  const std::vector<std::string> all = gather(world, monitor, mine.dump());
  if (world.rank() != 0) return;

  std::vector<Subject> gemm_subjects, memory_subjects, h2d_subjects;
  for (size_t r = 0; r < all.size(); ++r) {
    const json f = parse_json_text(all[r]);
    const std::string& host = world.hostnames()[r];
    const int rank = static_cast<int>(r);
    if (f["gemm_wrong"].get<size_t>() > 0)
      verdicts.add(make_check(
          Stage::kRank, "rank.gemm_correct", Status::kFail, host, rank,
          fmt::format("{} of 256 x 256 GEMM outputs wrong", f["gemm_wrong"].get<size_t>()),
          "the BLAS library or the CPU computes wrong results: check the "
          "OpenBLAS build and the machine's memory (memtest, EDAC counters)"));
    if (f["memory_wrong"].get<size_t>() > 0)
      verdicts.add(make_check(Stage::kRank, "rank.memory_correct", Status::kFail, host, rank,
                              "the memory triad read back wrong values",
                              "run a memory test on this node (memtest86+, EDAC counters)"));
    const int64_t wrong = f["wrong"].get<int64_t>();
    Check coll = make_check(
        Stage::kRank, "rank.collective",
        wrong > 0 || f["records"].get<size_t>() == 0 ? Status::kFail : Status::kPass, host, rank,
        wrong > 0 ? fmt::format("1-rank all-reduce of 1 MiB on {}: {} wrong elements",
                                f["device"].get<std::string>(), wrong)
                  : fmt::format("1-rank all-reduce of 1 MiB on {}: every element correct",
                                f["device"].get<std::string>()),
        "the backend's own copy is wrong on one rank: check the device (nvidia-smi -q, ECC "
        "errors) or the MPI library");
    coll.measured = static_cast<double>(wrong);
    coll.expected = 0;
    verdicts.add(coll);
    gemm_subjects.push_back({host, rank, f["gemm"].get<double>()});
    memory_subjects.push_back({host, rank, f["memory"].get<double>()});
    if (f["h2d"].get<double>() > 0)
      h2d_subjects.push_back(
          {host, rank, std::min(f["h2d"].get<double>(), f["d2h"].get<double>())});
  }
  verdicts.add(judge_homogeneous_figures(
      Stage::kRank, "rank.gemm", "GFLOP/s", gemm_subjects,
      "this rank computes slower than the others: check CPU frequency and throttling, other "
      "processes on its cores (top), and its NUMA/core binding"));
  verdicts.add(judge_homogeneous_figures(
      Stage::kRank, "rank.memory_bandwidth", "GB/s", memory_subjects,
      "this rank's memory is slower than the others': check DIMM population and speed "
      "(dmidecode), NUMA binding, and other processes"));
  if (h2d_subjects.empty())
    verdicts.add(make_check(Stage::kRank, "rank.host_device_copy", Status::kSkip, "", -1,
                            "host memory only (no GPU communicator): no host<->device copy"));
  else
    verdicts.add(judge_homogeneous_figures(
        Stage::kRank, "rank.host_device_copy", "GB/s", h2d_subjects,
        "this GPU copies slower than the others: check its PCIe link (nvidia-smi -q: Link "
        "Width/Generation) and its CPU/NUMA affinity"));
}

// ---- stage 2: each node's ranks together --------------------------------------

void node_stage(const World& world, PhaseMonitor& monitor, PointToPoint& p2p,
                const topo::RankSetPath& node_expected, const ChecklistOptions& options,
                StageVerdicts& verdicts) {
  const std::vector<int> members = ranks_of_host(world, world.hostname());
  auto node_p2p = make_group_point_to_point(p2p, members);
  auto node_control = point_to_point_control(*node_p2p);
  const bool no_node_groups = spans_world_only(options) && world.node_count() > 1;
  std::unique_ptr<Communicator> comm;
  if (!no_node_groups) comm = group_communicator(world, options, world.node_index());

  json mine = json::object();
  if (comm && node_p2p->rank() == 0) {
    mine["leader"] = true;
    mine["backend"] = comm->backend_name();
  }
  const bench::JobShape shape{1, static_cast<int>(members.size()), world.hostname()};
  // Nodes that are one machine (containers, network namespaces) take turns, as
  // stage 1's ranks do: at once they would measure how it shares its cores
  // (node0 at half the others' busbw in 1 stage-2 run of about 18 on the virtual cluster).
  // The busbw is the best of kBusbwRounds all-reduces at node_bytes, rounds apart
  // in time, so that a burst of other load during one does not make a slow node
  // (with turns alone, node2 still measured 74% below the others once in 4 runs).
  constexpr int kBusbwRounds = 3;
  // One collective over the node: the whole sweep (first round), or the
  // all-reduce at node_bytes alone (later rounds, re-tests) for its busbw.
  auto run_collective = [&](const CollectiveDescription& d, bool busbw_only) {
    const bool all_reduce = d.id == Collective::kAllReduce;
    CollectingReporter collected;
    // Sizes x8 apart: all-reduce from node_bytes / 8^4 up to node_bytes
    // itself (its busbw), the others 1 KiB to 256 KiB (their correctness).
    bench::BenchOptions sweep = sweep_options(
        options, d.id,
        all_reduce ? busbw_only ? options.node_bytes : std::max<size_t>(options.node_bytes >> 12, 8)
                   : size_t{1} << 10,
        all_reduce ? options.node_bytes : size_t{256} << 10, 5);
    // Test only: the named world rank corrupts one element of its results.
    if (options.corrupt_rank == world.rank()) sweep.corrupt_rank = node_p2p->rank();
    const bench::SweepOutcome outcome =
        bench::run_sweep(sweep, *node_control, shape, *comm, monitor,
                         node_p2p->rank() == 0 ? &collected : nullptr, 0, no_signal);
    if (node_p2p->rank() != 0) return;
    double busbw = 0;
    size_t from = 0, to = 0;
    for (const records::BenchRecord& r : collected.records) {
      if (!r.in_place) busbw = r.busbw_GBps;  // the sweep's last size, node_bytes
      from = from == 0 ? r.size_bytes : std::min(from, r.size_bytes);
      to = std::max(to, r.size_bytes);
    }
    json& figures = mine["collectives"][std::string(name(d.id))];
    if (!busbw_only) {
      figures = {{"wrong", outcome.wrong_elements},
                 {"records", outcome.records},
                 {"busbw", busbw},
                 {"from", from},
                 {"to", to},
                 {"wrong_by_rank", json::object()}};
    } else {
      figures["wrong"] =
          figures["wrong"].get<int64_t>() + static_cast<int64_t>(outcome.wrong_elements);
      figures["records"] = figures["records"].get<size_t>() + outcome.records;
      figures["busbw"] = std::max(figures["busbw"].get<double>(), busbw);
    }
    // The node's rank i is world rank members[i] (bench counts within the node).
    json& by_rank = figures["wrong_by_rank"];
    for (size_t i = 0; i < outcome.wrong_elements_per_rank.size() && i < members.size(); ++i) {
      if (outcome.wrong_elements_per_rank[i] == 0) continue;
      const std::string world_rank = std::to_string(members[i]);
      by_rank[world_rank] =
          by_rank.value(world_rank, int64_t{0}) + outcome.wrong_elements_per_rank[i];
    }
  };
  const CollectiveDescription& all_reduce_description = describe(Collective::kAllReduce);
  const Turns turns = machine_turns(world, true);
  // While some nodes measure, the others wait for them by design (not behind
  // them in a stall report), each turn within twice the timeout.
  auto wait_for_ranks = [&](const std::vector<int>& ranks, const std::string& what) {
    monitor.operation_started();
    monitor.wait_for("diag stage 2 (node): waiting for " + what, ranks, 2 * options.timeout);
    world.sleeping_barrier(2 * options.timeout + kWaitReportMargin);
    monitor.end_wait();
  };
  auto ranks_of_turn = [&](int turn) {
    std::vector<int> ranks;
    for (size_t r = 0; r < turns.of_rank.size(); ++r)
      if (turns.of_rank[r] == turn) ranks.push_back(static_cast<int>(r));
    return ranks;
  };
  int last_turn = -1;  // the turn that measured last
  for (int round = 0; round < kBusbwRounds; ++round) {
    for (int turn = 0; turn < turns.count; ++turn) {
      if (turns.count > 1) {
        if (last_turn >= 0)
          wait_for_ranks(ranks_of_turn(last_turn), fmt::format("the nodes of turn {}", last_turn));
        else
          world.sleeping_barrier(2 * options.timeout);
        last_turn = turn;
      }
      if (turn != turns.mine || !comm) continue;
      if (round > 0) {
        run_collective(all_reduce_description, true);
        continue;
      }
      for (Collective c : kNodeCollectives)
        if (c != Collective::kSendRecv || members.size() >= 2) run_collective(describe(c), false);
    }
  }
  if (last_turn >= 0)
    wait_for_ranks(ranks_of_turn(last_turn), fmt::format("the nodes of turn {}", last_turn));
  // Nodes whose busbw is below the others' measure it again, alone.
  const bool busbw_leader = comm && node_p2p->rank() == 0 && members.size() >= 2;
  const double my_busbw = busbw_leader ? mine["collectives"]["allreduce"]["busbw"].get<double>()
                                       : std::numeric_limits<double>::quiet_NaN();
  for (int suspect : low_outlier_ranks(world, monitor, my_busbw)) {
    const std::string& host = world.hostnames()[static_cast<size_t>(suspect)];
    if (comm && host == world.hostname()) run_collective(all_reduce_description, true);
    wait_for_ranks(ranks_of_host(world, host), host + "'s re-test");
  }
  const std::vector<std::string> all = gather(world, monitor, mine.dump());
  if (world.rank() != 0) return;

  std::vector<Subject> busbw_subjects;
  for (size_t r = 0; r < all.size(); ++r) {
    const json f = parse_json_text(all[r]);
    if (!f.contains("leader")) continue;
    const std::string& host = world.hostnames()[r];
    const std::vector<int> node_ranks = ranks_of_host(world, host);
    const size_t local = node_ranks.size();
    // The world ranks and the library: on several nodes bench's WRONG RESULT
    // line counts ranks within the node (its rank i is the i-th world rank here).
    const std::string over =
        fmt::format("over the node's {} ranks (world rank{} {}; {})", local, local == 1 ? "" : "s",
                    fmt::join(node_ranks, ","), f.value("backend", std::string("?")));
    for (const auto& [collective, figures] : f["collectives"].items()) {
      const int64_t wrong = figures["wrong"].get<int64_t>();
      const size_t records = figures["records"].get<size_t>();
      // The world ranks whose results were wrong, with their hosts.
      const json by_rank = figures.value("wrong_by_rank", json::object());
      std::vector<std::pair<int, int64_t>> wrong_counts;
      for (const auto& [rank_text, count] : by_rank.items())
        wrong_counts.push_back({std::stoi(rank_text), count.get<int64_t>()});
      std::sort(wrong_counts.begin(), wrong_counts.end());  // "10" sorts before "2" as keys
      std::vector<int> wrong_ranks;
      std::vector<std::string> wrong_on;
      for (const auto& [r, count] : wrong_counts) {
        wrong_ranks.push_back(r);
        wrong_on.push_back(fmt::format("world rank {} ({}): {}", r,
                                       world.hostnames()[static_cast<size_t>(r)], count));
      }
      Check c = make_check(
          Stage::kNode, "node." + collective,
          wrong > 0 || records == 0 ? Status::kFail : Status::kPass, host,
          wrong > 0 && wrong_ranks.size() == 1 ? wrong_ranks.front()
          : wrong > 0 && local == 1            ? node_ranks.front()
                                               : -1,
          wrong > 0
              ? fmt::format("{} {}: {} wrong elements{}", collective, over, wrong,
                            wrong_on.empty()
                                ? std::string()
                                : "; wrong on " + fmt::format("{}", fmt::join(wrong_on, ", ")))
          : records == 0 ? fmt::format("{} {}: nothing measured", collective, over)
                         : fmt::format("{} {}, {} to {} ({} records): every element correct",
                                       collective, over, format_size(figures["from"].get<size_t>()),
                                       format_size(figures["to"].get<size_t>()), records),
          "results are wrong between this node's ranks: look at the world rank named here (and "
          "in the WRONG RESULT line above), its GPU (ECC errors) or the intra-node transport "
          "(NCCL_P2P_DISABLE=1 "
          "/ NCCL_SHM_DISABLE=1 to isolate)");
      c.measured = static_cast<double>(wrong);
      c.expected = 0;
      verdicts.add(c);
    }
    if (local < 2) {
      verdicts.add(make_check(Stage::kNode, "node.busbw", Status::kSkip, host, -1,
                              "one rank on this node: no intra-node traffic to measure"));
      continue;
    }
    const double busbw = f["collectives"]["allreduce"]["busbw"].get<double>();
    busbw_subjects.push_back({host, -1, busbw});
  }
  if (no_node_groups)
    verdicts.add(make_check(Stage::kNode, "node.collectives", Status::kSkip, "", -1,
                            "NCCL communicators of one node's ranks are not built (ccscope's "
                            "NCCL communicator spans the world): stage 3 checks the whole job"));
  if (busbw_subjects.empty()) return;
  if (node_expected.expected_GBps > 0) {
    for (const Subject& s : busbw_subjects) {
      Check c = make_check(
          Stage::kNode, "node.busbw",
          judge_against_expected(s.value, node_expected.expected_GBps, options.warn_fraction,
                                 options.fail_fraction),
          s.host, -1,
          fmt::format("all-reduce busbw {:.3g} GB/s at {} over the node's ranks; expected "
                      "{:.3g} GB/s ({})",
                      s.value, format_size(options.node_bytes), node_expected.expected_GBps,
                      node_expected.description),
          "intra-node bandwidth is below what the topology allows: run `ccscope topo` on this "
          "node (GPU links, PCIe width/generation, NCCL_P2P_LEVEL) and `ccscope diag nccl-log` "
          "on an NCCL_DEBUG=INFO run");
      c.measured = s.value;
      c.expected = node_expected.expected_GBps;
      c.unit = "GB/s";
      verdicts.add(c);
    }
  } else {
    verdicts.add(judge_homogeneous_figures(
        Stage::kNode, "node.busbw", "GB/s", busbw_subjects,
        "this node's ranks exchange data slower than the other nodes' do: check its "
        "topology (ccscope topo), CPU load and binding, and its transport (NCCL_DEBUG=INFO)"));
  }
}

// ---- stage 3: across nodes ----------------------------------------------------

// Node leaders read their node's counters (IB ports, or TCP); all snapshots by
// node index, on every rank.
std::vector<CounterSnapshot> gather_counters(const World& world, PhaseMonitor& monitor, bool leader,
                                             bool tcp) {
  const std::string text =
      leader ? serialize(tcp ? read_tcp_counters() : read_ib_error_counters()) : std::string();
  const std::vector<std::string> all = gather(world, monitor, text);
  std::vector<CounterSnapshot> by_node;
  for (int leader_rank : node_leaders(world))
    by_node.push_back(deserialize(all[static_cast<size_t>(leader_rank)]));
  return by_node;
}

struct PairMeasurements {
  std::vector<PairFigure> figures;
  std::vector<PairRetransmissions> retransmissions;
};

// Each pair's bandwidth, and the TCP segments both ends sent and
// retransmitted during it (pairs run one at a time: the deltas are the pair's).
PairMeasurements measure_node_pairs(const World& world, PhaseMonitor& monitor, PointToPoint& p2p,
                                    const std::vector<std::pair<int, int>>& rank_pairs,
                                    const ChecklistOptions& options, const std::string& what) {
  bench::PairBandwidthOptions pair_options;
  pair_options.bytes = options.pair_bytes;
  pair_options.repetitions = options.pair_repetitions;
  pair_options.timeout = 2 * options.timeout;
  const std::vector<int> leaders = node_leaders(world);
  const bool leader = std::find(leaders.begin(), leaders.end(), world.rank()) != leaders.end();
  auto node_of = [&](int rank) {
    return static_cast<size_t>(std::find(leaders.begin(), leaders.end(), rank) - leaders.begin());
  };
  // One pair at a time: pairs at once would share the bridge's CPU here and on
  // a real cluster may share a switch uplink. Each pair is an operation for
  // the watchdog (a slow link's pair may take a while, but it progresses).
  monitor.begin_phase(what);
  PairMeasurements out;
  for (const auto& pair : rank_pairs) {
    monitor.operation_started();
    const std::vector<CounterSnapshot> before = gather_counters(world, monitor, leader, true);
    for (const bench::PairBandwidth& m :
         bench::measure_pair_rounds_one_way(p2p, world, {{pair}}, pair_options))
      out.figures.push_back({world.hostnames()[static_cast<size_t>(m.rank_a)],
                             world.hostnames()[static_cast<size_t>(m.rank_b)], m.GBps});
    const std::vector<CounterSnapshot> after = gather_counters(world, monitor, leader, true);
    PairRetransmissions r;
    r.a = world.hostnames()[static_cast<size_t>(pair.first)];
    r.b = world.hostnames()[static_cast<size_t>(pair.second)];
    const size_t a = node_of(pair.first), b = node_of(pair.second);
    tcp_segment_deltas(before[a], after[a], r.sent_a, r.retransmitted_a);
    tcp_segment_deltas(before[b], after[b], r.sent_b, r.retransmitted_b);
    out.retransmissions.push_back(r);
  }
  monitor.end_phase();
  return out;
}

// Split-half's round: the two halves' node leaders each run an all-reduce at
// once (ccscope's ring over MPI point-to-point, one rank per node, as
// cluster.busbw: a half runs at its slowest link's rate). Every rank gets both
// halves' busbw. Ranks outside the halves wait asleep outside the watchdog's
// phase, as for cluster.busbw; the halves' watchdogs watch their sweeps.
std::pair<double, double> measure_halves(const World& world, PhaseMonitor& monitor,
                                         PointToPoint& p2p,
                                         const std::map<std::string, int>& leader_of_host,
                                         const std::vector<std::string>& half_a,
                                         const std::vector<std::string>& half_b,
                                         const ChecklistOptions& options, size_t round) {
  auto ranks_of = [&](const std::vector<std::string>& hosts) {
    std::vector<int> ranks;
    for (const std::string& host : hosts) ranks.push_back(leader_of_host.at(host));
    return ranks;
  };
  const std::vector<int> a = ranks_of(half_a), b = ranks_of(half_b);
  const auto in = [&](const std::vector<int>& ranks) {
    return std::find(ranks.begin(), ranks.end(), world.rank()) != ranks.end();
  };
  constexpr int kIterations = 3;
  std::string busbw;
  if (in(a) || in(b)) {
    const std::vector<int>& mine = in(a) ? a : b;
    const std::unique_ptr<PointToPoint> half_p2p = make_group_point_to_point(p2p, mine);
    const std::unique_ptr<ControlPlane> half_control = point_to_point_control(*half_p2p);
    const std::unique_ptr<Communicator> comm = make_ring_communicator(*half_p2p);
    CollectingReporter collected;
    const bench::JobShape shape{static_cast<int>(mine.size()), 1, world.hostname()};
    bench::run_sweep(sweep_options(options, Collective::kAllReduce, options.cluster_bytes,
                                   options.cluster_bytes, kIterations),
                     *half_control, shape, *comm, monitor,
                     half_p2p->rank() == 0 ? &collected : nullptr, 0, no_signal);
    for (const records::BenchRecord& r : collected.records)
      if (!r.in_place) busbw = fmt::format("{}", r.busbw_GBps);
  }
  // Bounded as the cluster.busbw wait below: each operation within twice the timeout.
  const auto bound = 2 * options.timeout * (2 * (kIterations + 2 + 1));
  std::vector<int> measuring = a;
  measuring.insert(measuring.end(), b.begin(), b.end());
  monitor.wait_for(fmt::format("diag stage 3 (cluster): waiting for split-half round {}", round),
                   measuring, bound);
  world.sleeping_barrier(bound + kWaitReportMargin);
  monitor.stage(fmt::format("diag stage 3 (cluster): after split-half round {}", round));
  const std::vector<std::string> all = gather(world, monitor, busbw);
  auto figure_of = [&](int rank) {
    const std::string& text = all[static_cast<size_t>(rank)];
    return text.empty() ? std::numeric_limits<double>::quiet_NaN() : std::stod(text);
  };
  return {figure_of(a.front()), figure_of(b.front())};
}

std::vector<Check> topology_checks(const bench::ClusterTopology& cluster) {
  std::vector<topo::Finding> findings = topo::check_homogeneity(cluster.nodes);
  for (const topo::HostTopology& node : cluster.nodes)
    for (topo::Finding& f : topo::check_node(node)) findings.push_back(std::move(f));
  std::vector<Check> checks;
  for (const topo::Finding& f : findings) {
    if (f.severity == topo::Finding::Severity::kInfo) continue;
    Check c =
        make_check(Stage::kCluster, "topo." + f.check,
                   f.severity == topo::Finding::Severity::kFail ? Status::kFail : Status::kWarn,
                   f.host, -1, f.message, f.remedy);
    checks.push_back(std::move(c));
  }
  if (checks.empty())
    checks.push_back(make_check(Stage::kCluster, "topo.homogeneity", Status::kPass, "", -1,
                                fmt::format("{} nodes alike (GPUs, NICs, link rates, driver, "
                                            "CUDA, NCCL)",
                                            cluster.nodes.size())));
  return checks;
}

// What this rank sees of its environment, as text to gather (the node's NICs
// and GPUs come from the gathered topology, on rank 0).
std::string my_environment(const World& world, const ChecklistOptions& options) {
  json e;
  e["variables"] = recorded_environment(environ);
  e["gpu_in_use"] = on_device(options) ? gpu_identity_for_local_rank(world.local_rank()) : "";
  e["nccl_version"] = nccl_version_string();
  e["mpi_library"] = MpiSession::library_version();
  e["ccscope_version"] = kVersion;
  return e.dump();
}

std::vector<RankEnvironment> environments(const World& world, const bench::ClusterTopology& cluster,
                                          const std::vector<std::string>& texts) {
  std::vector<RankEnvironment> ranks;
  for (size_t r = 0; r < texts.size(); ++r) {
    const json e = parse_json_text(texts[r]);
    RankEnvironment env;
    env.rank = static_cast<int>(r);
    env.host = world.hostnames()[r];
    env.local_rank = 0;
    for (size_t q = 0; q < r; ++q) env.local_rank += world.hostnames()[q] == env.host;
    env.variables = e["variables"].get<std::vector<std::pair<std::string, std::string>>>();
    const topo::HostTopology& node = cluster.nodes.at(cluster.rank_node.at(r));
    env.nics = node.nics;
    for (const topo::Gpu& gpu : node.gpus) env.gpu_uuids.push_back(gpu.uuid);
    env.gpu_in_use = e["gpu_in_use"].get<std::string>();
    env.nccl_version = e["nccl_version"].get<std::string>();
    env.mpi_library = e["mpi_library"].get<std::string>();
    env.ccscope_version = e["ccscope_version"].get<std::string>();
    ranks.push_back(std::move(env));
  }
  return ranks;
}

void cluster_stage(const World& world, PhaseMonitor& monitor, PointToPoint& p2p,
                   const bench::ClusterTopology& cluster, const ChecklistOptions& options,
                   StageVerdicts& verdicts) {
  const std::vector<int> leaders = node_leaders(world);
  const bool leader = std::find(leaders.begin(), leaders.end(), world.rank()) != leaders.end();
  if (world.rank() == 0) verdicts.add(topology_checks(cluster));

  // Environment: every rank's view, judged together.
  {
    const std::vector<std::string> all = gather(world, monitor, my_environment(world, options));
    if (world.rank() == 0) verdicts.add(check_environment(environments(world, cluster, all)));
  }
  if (world.node_count() < 2) {
    verdicts.add(make_check(Stage::kCluster, "cluster.nodes", Status::kSkip, "", -1,
                            "one node: nothing between nodes to measure"));
    return;
  }

  // Clock offsets against rank 0's node, one node leader at a time.
  {
    std::vector<int> remotes(leaders.begin() + 1, leaders.end());
    ClockOptions clock;
    clock.injected_offset_s = options.injected_clock_offset_s;
    monitor.begin_phase("diag stage 3: clock offsets");
    const std::vector<ClockEstimate> estimates = measure_clock_offsets(p2p, 0, remotes, clock);
    monitor.end_phase();
    if (world.rank() == 0) {
      std::vector<std::string> hosts;
      for (int r : remotes) hosts.push_back(world.hostnames()[static_cast<size_t>(r)]);
      verdicts.add(
          judge_clock_offsets(hosts, estimates, world.hostname(), options.clock_warn_ms / 1000));
    }
  }

  const std::vector<CounterSnapshot> before = gather_counters(world, monitor, leader, false);
  const topo::RankSetPath expected = bench::expected_path_of_run(
      cluster, topo::nccl_environment_from_process(), !on_device(options));

  std::map<std::string, int> leader_of_host;
  std::vector<std::string> node_hosts;
  for (int r : leaders) {
    leader_of_host[world.hostnames()[static_cast<size_t>(r)]] = r;
    node_hosts.push_back(world.hostnames()[static_cast<size_t>(r)]);
  }
  // Which nodes' pairs to measure: every node, or with split-half the group its
  // halves narrowed the slow node to (none when no half was slower).
  std::vector<int> pair_leaders = leaders;
  if (use_split_half(options.localize, leaders.size())) {
    size_t round = 0;
    const SplitHalfResult halves = localize_split_half(
        node_hosts, [&](const std::vector<std::string>& a, const std::vector<std::string>& b) {
          return measure_halves(world, monitor, p2p, leader_of_host, a, b, options, ++round);
        });
    const std::vector<std::string> pair_nodes = pair_nodes_after_split_half(node_hosts, halves);
    pair_leaders.clear();
    for (const std::string& host : pair_nodes) pair_leaders.push_back(leader_of_host.at(host));
    if (world.rank() == 0) verdicts.add(judge_split_half(halves, pair_nodes));
  }

  // Every pair of those nodes (their first ranks), then each suspect against a good node.
  std::vector<std::pair<int, int>> pairs;
  for (const topo::PairRound& round : topo::disjoint_pair_rounds(pair_leaders.size()))
    for (const auto& [a, b] : round) pairs.push_back({pair_leaders[a], pair_leaders[b]});
  const PairMeasurements measured =
      measure_node_pairs(world, monitor, p2p, pairs, options, "diag stage 3: node pairs");
  const Localization localization = localize(measured.figures, expected.expected_GBps);
  std::vector<std::pair<int, int>> retest_pairs;
  for (const auto& [suspect, partner] : localization.retests)
    retest_pairs.push_back({leader_of_host.at(suspect), leader_of_host.at(partner)});
  const PairMeasurements retests =
      measure_node_pairs(world, monitor, p2p, retest_pairs, options, "diag stage 3: re-tests");
  if (world.rank() == 0 && !pairs.empty()) {
    verdicts.add(judge_localization(localization, retests.figures, expected.expected_GBps));
    verdicts.add(judge_pair_retransmissions(measured.retransmissions));
  }

  // The network's all-reduce: one rank per node (the node leaders), against
  // the slowest path topo expects. With every rank in it, the algorithm's
  // intra-node steps and local ranks sharing the link would be measured too;
  // over MPI it is ccscope's ring (over MPI point-to-point), whose busbw is the
  // link's rate by construction, where MPI's own choice for 3 ranks (a fold to
  // a power of two) moves the whole buffer twice more over one link.
  {
    std::unique_ptr<Communicator> comm;
    std::unique_ptr<PointToPoint> leaders_p2p;
    std::unique_ptr<ControlPlane> leaders_control;
    if (on_device(options)) {
      comm = world_communicator(world, options);
    } else if (leader) {
      leaders_p2p = make_group_point_to_point(p2p, leaders);
      leaders_control = point_to_point_control(*leaders_p2p);
      comm = make_ring_communicator(*leaders_p2p);
    }
    const ControlPlane& control =
        leaders_control ? *leaders_control : static_cast<const ControlPlane&>(world);
    CollectingReporter collected;
    bench::SweepOutcome outcome;
    if (comm) {
      const bench::JobShape shape{world.node_count(),
                                  on_device(options) ? world.max_ranks_per_node() : 1,
                                  world.hostname()};
      outcome = bench::run_sweep(sweep_options(options, Collective::kAllReduce,
                                               options.cluster_bytes, options.cluster_bytes, 5),
                                 control, shape, *comm, monitor,
                                 world.rank() == 0 ? &collected : nullptr, 0, no_signal);
    }
    // The other ranks wait asleep for the leaders, by design (the leaders'
    // watchdogs watch the sweep; a hang names the leader, not the waiting
    // ranks). Bounded by what the leaders' sweep may take: each of its
    // operations (5 timed, 2 warm-up and 1 checked iteration, out-of-place and
    // in-place) within its own bound, twice the timeout.
    const auto bound = 2 * options.timeout * (2 * (5 + 2 + 1));
    monitor.wait_for(on_device(options)
                         ? "diag stage 3 (cluster): waiting for the all-reduce's ranks"
                         : "diag stage 3 (cluster): waiting for the node leaders' all-reduce",
                     on_device(options) ? all_ranks(world) : leaders, bound);
    world.sleeping_barrier(bound + kWaitReportMargin);
    monitor.stage("diag stage 3 (cluster): after the network's all-reduce");
    if (world.rank() == 0) {
      double busbw = 0;
      for (const records::BenchRecord& r : collected.records)
        if (!r.in_place) busbw = r.busbw_GBps;
      Status status = outcome.wrong_elements > 0
                          ? Status::kFail
                          : judge_against_expected(busbw, expected.expected_GBps,
                                                   options.warn_fraction, options.fail_fraction);
      Check c = make_check(
          Stage::kCluster, "cluster.busbw", status, "", -1,
          outcome.wrong_elements > 0
              ? fmt::format("all-reduce over {} nodes: {} wrong elements", world.node_count(),
                            outcome.wrong_elements)
              : fmt::format("all-reduce busbw {:.3g} GB/s at {} over {} nodes ({}); expected {}",
                            busbw, format_size(options.cluster_bytes), world.node_count(),
                            on_device(options) ? job_backend(options).library + ", every rank"
                                               : "ring over MPI, one rank per node",
                            expected.expected_GBps > 0
                                ? fmt::format("{:.3g} GB/s ({})", expected.expected_GBps,
                                              expected.description)
                                : std::string("unknown (topo knows no rate for the path)")),
          "the job's collective runs below its slowest link: see the slow-node and link "
          "checks above; run `ccscope diag nccl-log` on an NCCL_DEBUG=INFO run to see the "
          "transport NCCL chose");
      c.measured = busbw;
      c.expected = expected.expected_GBps > 0 ? expected.expected_GBps
                                              : std::numeric_limits<double>::quiet_NaN();
      c.unit = "GB/s";
      verdicts.add(c);
    }
  }

  const std::vector<CounterSnapshot> after = gather_counters(world, monitor, leader, false);
  if (world.rank() == 0) {
    std::vector<std::string> hosts;
    for (int r : leaders) hosts.push_back(world.hostnames()[static_cast<size_t>(r)]);
    // IB ports over the whole stage; TCP is judged per pair above (it locates
    // loss towards a node, which its own counters do not show).
    for (Check& c : judge_counter_deltas(hosts, before, after))
      if (c.name != "cluster.tcp_retransmissions") verdicts.add(std::move(c));
  }
}

// ---- stage 4: scaling and loss ---------------------------------------------

void scaling_stage(const World& world, PhaseMonitor& monitor, const ChecklistOptions& options,
                   StageVerdicts& verdicts) {
  using namespace training_probe;
  const size_t ranks = static_cast<size_t>(world.size());
  TrainOptions train_options;
  train_options.strategy = Strategy::kDdp;
  train_options.shape = {options.train_width, options.train_depth, Activation::kTanh};
  train_options.global_batch = options.train_batch_per_rank * ranks;
  train_options.steps = options.train_steps;
  train_options.overlap = false;
  train_options.timeout = 2 * options.timeout;
  const size_t warmup = std::min<size_t>(train_options.steps > 1 ? train_options.steps - 1 : 0, 5);

  if (ranks < 2) {
    if (world.rank() == 0)
      for (const char* name : {"scaling.loss_equivalence", "scaling.efficiency"})
        verdicts.add(make_check(Stage::kScaling, name, Status::kSkip, "", -1,
                                "one rank: no data-parallel run to compare with one rank's"));
    return;
  }
  // Each step's slowest rank, the statistic both T(1) and T(N) use.
  auto slowest_steps = [&](const TrainResult& result) {
    std::vector<StepFigures> steps = result.steps;
    std::vector<double> times;
    for (const StepFigures& s : steps) times.push_back(s.step_seconds);
    world.all_reduce_max(times);
    for (size_t i = 0; i < steps.size(); ++i) steps[i].step_seconds = times[i];
    return steps;
  };
  auto tick = [&](const StepFigures&) { monitor.operation_started(); };

  // One rank's step with its own share of the batch, every rank at once (each
  // device alone, as a GPU per rank would be): the weak-scaling T(1), over as
  // many steps and warm-up as DDP's T(N).
  // T(1), T(N) and the loss are judged over the first 100 steps at most (the
  // bring-up question: the same loss as one GPU over the first 100 steps); a
  // longer --train-steps only runs DDP longer.
  const size_t judged_steps = std::min<size_t>(train_options.steps, 100);
  TrainOptions alone = train_options;
  alone.strategy = Strategy::kSingle;
  alone.global_batch = options.train_batch_per_rank;
  alone.steps = judged_steps;
  monitor.begin_phase("diag stage 4: one rank's steps");
  const TrainResult alone_result = train_single(alone, tick);
  monitor.end_phase();
  const double single_step =
      summarize(slowest_steps(alone_result), warmup, alone.global_batch).step_median_s;

  auto comm = group_communicator(world, options, 0);
  // The busbw of the gradients' all-reduce over these ranks (bench's sweep at
  // the gradients' size): what the network lets DDP have.
  const double gradient_bytes =
      static_cast<double>(Model(train_options.shape, train_options.precision).parameter_count()) *
      4;
  double gradient_busbw_GBps = 0;
  {
    CollectingReporter collected;
    const size_t bytes = static_cast<size_t>(gradient_bytes);
    const bench::SweepOutcome outcome =
        bench::run_sweep(sweep_options(options, Collective::kAllReduce, bytes, bytes, 10), world,
                         bench::job_shape(world), *comm, monitor,
                         world.rank() == 0 ? &collected : nullptr, 0, no_signal);
    (void)outcome;
    for (const records::BenchRecord& r : collected.records)
      if (!r.in_place) gradient_busbw_GBps = r.busbw_GBps;
    world.all_reduce_max({&gradient_busbw_GBps, 1});
  }
  monitor.begin_phase("diag stage 4: DDP steps");
  const TrainResult ddp = train(*comm, train_options, tick);
  monitor.end_phase();
  std::vector<StepFigures> ddp_steps = slowest_steps(ddp);
  ddp_steps.resize(std::min(ddp_steps.size(), judged_steps));
  const RunSummary summary = summarize(ddp_steps, warmup, train_options.global_batch);

  // The loss against one rank training the whole batch. Every rank trains it
  // (it is deterministic), inside a watched phase: no rank waits unwatched.
  TrainOptions reference = train_options;
  reference.strategy = Strategy::kSingle;
  reference.steps = judged_steps;
  monitor.begin_phase("diag stage 4: one rank, the whole batch");
  const TrainResult single = train_single(reference, tick);
  monitor.end_phase();
  if (world.rank() != 0) return;
  const EquivalenceResult equivalence = compare_losses(
      losses(ddp), losses(single), loss_tolerance(train_options.precision), judged_steps);

  Check loss = make_check(
      Stage::kScaling, "scaling.loss_equivalence",
      equivalence.equivalent ? Status::kPass : Status::kFail, "", -1,
      fmt::format("DDP over {} ranks against one rank, {} steps: {}", ranks,
                  equivalence.steps_compared, equivalence.summary()),
      "the ranks do not train the same model as one rank would: a wrong gradient average "
      "(reduce op, scaling), a rank reading other data, or wrong collective results (stage 2)");
  loss.measured = equivalence.max_relative_difference;
  loss.expected = equivalence.tolerance;
  verdicts.add(loss);

  const double efficiency = summary.step_median_s > 0 ? single_step / summary.step_median_s : 0;
  const double allowed =
      allowed_efficiency(single_step, gradient_bytes, ranks, gradient_busbw_GBps);
  const bool one_node = world.node_count() == 1;
  const Status status = summary.measured_steps < 10                      ? Status::kSkip
                        : efficiency >= options.min_efficiency * allowed ? Status::kPass
                                                                         : Status::kWarn;
  Check eff = make_check(
      Stage::kScaling, "scaling.efficiency", status, "", -1,
      fmt::format(
          "DDP weak-scaling efficiency {:.2f}{} over {} ranks (median step of the "
          "slowest rank, {} steps after {} warm-up: {:.3g} ms; one rank alone {:.3g} "
          "ms; communication {:.0f}% of the step); the gradients' all-reduce ({}) at "
          "the busbw measured over these ranks, {:.3g} GB/s, allows {:.2f}{}{}",
          efficiency, efficiency > 1.05 ? " (above 1: timing noise)" : "", ranks,
          summary.measured_steps, warmup, summary.step_median_s * 1e3, single_step * 1e3,
          summary.comm_share * 100, format_size(static_cast<size_t>(gradient_bytes)),
          gradient_busbw_GBps, allowed,
          allowed < 0.5 ? (one_node ? ": the node's interconnect caps this model's speed-up"
                                    : ": the network, not the ranks, caps this model's "
                                      "speed-up")
                        : "",
          status == Status::kSkip ? "; too few steps to judge (--train-steps 20 or more)" : ""),
      "the step scales worse than the measured network explains: a straggler rank (stage 1), "
      "communication not overlapped or badly bucketed (ccscope train --strategy ddp --csv), or "
      "contention the all-reduce alone does not see");
  eff.measured = efficiency;
  eff.expected = allowed;
  verdicts.add(eff);
}

}  // namespace

Status judge_against_expected(double measured, double expected, double warn_fraction,
                              double fail_fraction) {
  if (!(expected > 0)) return Status::kSkip;
  if (measured >= warn_fraction * expected) return Status::kPass;
  if (measured >= fail_fraction * expected) return Status::kWarn;
  return Status::kFail;
}

double allowed_efficiency(double single_step_s, double gradient_bytes, size_t ranks,
                          double busbw_GBps) {
  if (ranks < 2) return 1;
  if (!(busbw_GBps > 0) || !(single_step_s > 0)) return 0;
  const double n = static_cast<double>(ranks);
  const double all_reduce_s = gradient_bytes * 2 * (n - 1) / n / (busbw_GBps * 1e9);
  return single_step_s / (single_step_s + all_reduce_s);
}

std::vector<int> measurement_turns(const std::vector<std::string>& machine_of_rank) {
  std::map<std::string, int> taken;  // turns given out per machine so far
  std::vector<int> turns;
  turns.reserve(machine_of_rank.size());
  for (const std::string& machine : machine_of_rank) turns.push_back(taken[machine]++);
  return turns;
}

ChecklistResult run_checklist(const World& world, HangWatchdog& watchdog,
                              const ChecklistOptions& options) {
  ChecklistResult result;
  StageVerdicts verdicts(world, options, result);
  PhaseMonitor monitor(watchdog);
  // One compute thread per rank, as one device per rank: ranks that share a
  // node would otherwise oversubscribe its cores with OpenBLAS threads.
  training_probe::set_compute_threads(1);
  auto p2p = job::make_point_to_point(world);
  bench::ClusterTopology cluster;
  topo::ProbeOptions probe;
  probe.use_hwloc = false;
  cluster = bench::gather_cluster_topology(
      world, probe, on_device(options) ? gpu_identity_for_local_rank(world.local_rank()) : "");
  for (Stage stage : options.stages) {
    if (world.rank() == 0 && options.on_stage_begin) options.on_stage_begin(stage);
    monitor.stage(fmt::format("diag stage {} ({})", static_cast<int>(stage), stage_name(stage)));
    switch (stage) {
      case Stage::kRank:
        rank_stage(world, monitor, *p2p, options, verdicts);
        break;
      case Stage::kNode: {
        // The slowest path between a node's ranks (topo), when it knows one.
        bench::ClusterTopology one_node = cluster;
        topo::RankSetPath path;
        const std::vector<int> members = ranks_of_host(world, world.hostname());
        if (members.size() > 1) {
          std::vector<size_t> rank_hosts;
          std::vector<int> rank_gpus;
          for (int r : members) {
            rank_hosts.push_back(cluster.rank_node[static_cast<size_t>(r)]);
            rank_gpus.push_back(cluster.rank_gpu[static_cast<size_t>(r)]);
          }
          path =
              topo::slowest_rank_path(cluster.nodes, rank_hosts, rank_gpus,
                                      topo::nccl_environment_from_process(), !on_device(options));
        }
        node_stage(world, monitor, *p2p, path, options, verdicts);
        break;
      }
      case Stage::kCluster:
        cluster_stage(world, monitor, *p2p, cluster, options, verdicts);
        break;
      case Stage::kScaling:
        scaling_stage(world, monitor, options, verdicts);
        break;
    }
    const Status status = verdicts.finish();
    // A signal on any rank stops every rank here (the first rank's that has one).
    int signal = 0;
    if (options.pending_signal)
      for (const std::string& s : world.all_gather(std::to_string(options.pending_signal())))
        if (signal == 0) signal = std::atoi(s.c_str());
    monitor.end_stage();
    result.stages_run.push_back(stage);
    if (status == Status::kFail)
      result.worst = Status::kFail;
    else if (status == Status::kWarn && result.worst == Status::kPass)
      result.worst = Status::kWarn;
    if (world.rank() == 0 && options.on_stage_end) options.on_stage_end(stage, status);
    if (signal != 0) {
      result.stopped_by_signal = signal;
      result.stopped_early = stage != options.stages.back();
      result.stopped_after = stage;
      break;
    }
    if (status == Status::kFail && !options.keep_going) {
      result.stopped_early = stage != options.stages.back();
      result.stopped_after = stage;
      break;
    }
  }
  return result;
}

}  // namespace ccscope::diag
