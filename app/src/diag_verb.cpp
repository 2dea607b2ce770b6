// ccscope diag: the bring-up checklist (diag/checklist.h) as one staged run;
// `diag nccl-log` is nccl_log_verb's (nccl_log_verb.cpp).
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/bench/benchmark.h"
#include "ccscope/collectives/backends.h"
#include "ccscope/collectives/error.h"
#include "ccscope/collectives/world.h"
#include "ccscope/common/sizes.h"
#include "ccscope/common/utc_time.h"
#include "ccscope/diag/check.h"
#include "ccscope/diag/checklist.h"
#include "ccscope/diag/clock_offset.h"
#include "ccscope/diag/nccl_log.h"
#include "ccscope/diag/nccl_ras.h"
#include "ccscope/diag/prometheus.h"
#include "ccscope/job/backend_registry.h"
#include "ccscope/job/interruption.h"
#include "ccscope/job/run_job.h"
#include "ccscope/job/watchdog.h"
#include "ccscope/records/diag_record.h"
#include "ccscope/reports/diag_results.h"
#include "ccscope/reports/user_files.h"
#include "verb_support.h"

namespace ccscope::app {
namespace diag_verb_detail {

using diag::Check;
using diag::Stage;
using diag::Status;

constexpr const char* kDiagVerb = "diag";
constexpr int kExitFailed = job::kExitCheckFailed;
// The exit-code gauge while the run goes on (or after it was cut short).
constexpr int kRunning = -1;

struct DiagFlags {
  std::vector<std::string> stages;
  bool keep_going = false;
  std::string backend;
  bool isolate_ranks = false;
  double timeout_s = 60;
  std::string csv, json, prometheus;
  double warn_fraction = 0.5, fail_fraction = 0.25;
  double clock_warn_ms = 10;
  double min_efficiency = 0.7;
  size_t train_steps = 100;
  size_t train_width = 256;
  std::string bytes = "4M";
  diag::LocalizeMethod localize = diag::LocalizeMethod::kAuto;
  int test_corrupt_rank = -1;
  bool quiet = false;
};

// "1,3", "rank,cluster", "2-4": the stages in order, each once.
std::vector<Stage> parse_stages(const std::vector<std::string>& words) {
  std::vector<bool> chosen(5, false);
  for (const std::string& item : split_commas(words)) {
    auto stage_of = [&](const std::string& t) -> int {
      static const char* kNames[] = {"", "rank", "node", "cluster", "scaling"};
      for (int i = 1; i <= 4; ++i)
        if (t == std::to_string(i) || t == kNames[i]) return i;
      throw UsageError("--stages: '" + t +
                       "' is no stage; name 1-4 or rank, node, cluster, scaling (e.g. 1,2 or 2-4)");
    };
    const size_t dash = item.find('-');
    if (dash != std::string::npos && (dash == 0 || dash + 1 == item.size()))
      throw UsageError("--stages: '" + item + "': a range needs both ends, e.g. 2-4");
    if (dash != std::string::npos) {
      const int from = stage_of(item.substr(0, dash)), to = stage_of(item.substr(dash + 1));
      if (from > to)
        throw UsageError("--stages: " + item + " runs backwards; write " + std::to_string(to) +
                         "-" + std::to_string(from));
      for (int i = from; i <= to; ++i) chosen[static_cast<size_t>(i)] = true;
    } else {
      chosen[static_cast<size_t>(stage_of(item))] = true;
    }
  }
  std::vector<Stage> stages;
  for (int i = 1; i <= 4; ++i)
    if (chosen[static_cast<size_t>(i)]) stages.push_back(static_cast<Stage>(i));
  if (stages.empty()) throw UsageError("--stages names no stage; e.g. 1,2 or 2-4");
  return stages;
}

records::DiagCheckRecord to_record(const Check& c, const std::string& run_id) {
  return records::DiagCheckRecord{run_id, utc_now_iso8601(), c};
}

std::string figure_text(double value, const std::string& unit) {
  return unit.empty() ? fmt::format("{:.4g}", value) : fmt::format("{:.4g} {}", value, unit);
}

// One check as the human summary shows it.
std::string check_line(const Check& c) {
  std::string where = c.host;
  if (c.rank >= 0) where += (where.empty() ? "" : " ") + fmt::format("rank {}", c.rank);
  if (!c.peer.empty()) where += " <-> " + c.peer;
  std::string line = fmt::format("  {:<4}  {:<28} {}{}{}", diag::status_name(c.status), c.name,
                                 where, where.empty() ? "" : ": ", c.message);
  if (c.status == Status::kWarn || c.status == Status::kFail) {
    if (!std::isnan(c.measured) && !std::isnan(c.expected))
      line += fmt::format("\n        measured {}, expected {}", figure_text(c.measured, c.unit),
                          figure_text(c.expected, c.unit));
    if (!c.remedy.empty()) line += "\n        -> " + c.remedy;
  }
  return line + "\n";
}

// What rank 0 writes as checks arrive: the CSV row, the JSON document (whole,
// after each stage: a run that fails keeps what it judged) and the summary.
class DiagOutputs {
 public:
  DiagOutputs(const DiagFlags& flags, std::string run_id)
      : flags_(flags), run_id_(std::move(run_id)) {
    if (!flags.csv.empty())
      csv_ =
          std::make_unique<RowFile>(reports::resolve_output(flags.csv), records::diag_check_kind());
    if (!flags.json.empty()) json_target_ = reports::resolve_output(flags.json);
    if (!flags.prometheus.empty()) prometheus_target_ = reports::resolve_output(flags.prometheus);
  }
  void add(const Check& check) {
    records_.push_back(to_record(check, run_id_));
    if (csv_) csv_->append_row(records::diag_check_cells(records_.back()));
    if (!flags_.quiet) std::fputs(check_line(check).c_str(), stdout);
    std::fflush(stdout);
  }
  void stage_begin(Stage stage) {
    stage_started_ = std::chrono::steady_clock::now();
    if (!flags_.quiet)
      std::printf("stage %d %s\n", static_cast<int>(stage), diag::stage_name(stage));
    std::fflush(stdout);
  }
  void stage_end(Stage stage, Status status) {
    if (!flags_.quiet)
      std::printf(
          "stage %d %s: %s (%.1f s)\n\n", static_cast<int>(stage), diag::stage_name(stage),
          diag::status_name(status),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - stage_started_).count());
    write_documents(false, kRunning, 0);
  }
  void write_documents(bool complete, int exit_code, double seconds) {
    if (json_target_)
      reports::write_whole_file(*json_target_, reports::diag_checks_json(records_, complete));
    if (prometheus_target_) {
      diag::PrometheusRun run;
      run.exit_code = exit_code;
      run.seconds = seconds;
      run.finished_unix_s =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      reports::write_whole_file(*prometheus_target_, diag::prometheus_text(checks(), run));
    }
  }
  // The checks judged so far: the records' own (one list of what was judged).
  std::vector<Check> checks() const {
    std::vector<Check> checks;
    for (const records::DiagCheckRecord& r : records_) checks.push_back(r.check);
    return checks;
  }

 private:
  const DiagFlags& flags_;
  std::string run_id_;
  std::unique_ptr<RowFile> csv_;
  std::optional<reports::OutputTarget> json_target_, prometheus_target_;
  std::vector<records::DiagCheckRecord> records_;
  std::chrono::steady_clock::time_point stage_started_;
};

// NCCL's own account of the run: NCCL_DEBUG=INFO into a file per rank, read
// back after the stages by each rank and analysed on rank 0.
// NCCL RAS's answer, after a FAIL: RAS waits a second less for its peers.
constexpr std::chrono::milliseconds kRasTimeout{5000};
// Its answer inside a hang's stall report: shorter, as the job is ending (the
// other ranks wait this much longer for the report; see HangWatchdog).
constexpr std::chrono::milliseconds kRasStallTimeout{2000};

std::string nccl_debug_file(const World& world) {
  return fmt::format("/tmp/ccscope-diag-nccl-{}-rank{}.log", ::getpid(), world.rank());
}

std::vector<Check> nccl_log_checks(const World& world, const std::string& path) {
  std::string text;
  try {
    text = reports::read_input_file(path);
  } catch (const std::exception&) {
    // A rank whose NCCL wrote nothing: the analysis says it never started.
  }
  std::filesystem::remove(path);
  const std::vector<std::string> texts = world.all_gather(text);
  if (world.rank() != 0) return {};
  std::vector<diag::NcclLogInput> inputs;
  for (size_t r = 0; r < texts.size(); ++r)
    inputs.push_back({fmt::format("rank {} ({})", r, world.hostnames()[r]), texts[r]});
  return diag::nccl_log_checks(diag::analyze_nccl_logs(inputs), Stage::kNode);
}

// The checklist as the body of its job (started is when it began).
int run_diag(job::JobContext& job, const DiagFlags& flags, const std::vector<Stage>& stages,
             std::chrono::steady_clock::time_point started) {
  const World& world = job.world();
  const bool leader = job.leader();
  auto fail_usage = [&](const std::string& what) {
    return leader ? usage_error(kDiagVerb, what) : kExitUsage;
  };

  diag::ChecklistOptions options;
  options.stages = stages;
  options.keep_going = flags.keep_going;
  options.isolate_ranks = flags.isolate_ranks;
  options.timeout = std::chrono::milliseconds(static_cast<long long>(flags.timeout_s * 1000));
  options.warn_fraction = flags.warn_fraction;
  options.fail_fraction = flags.fail_fraction;
  options.clock_warn_ms = flags.clock_warn_ms;
  options.min_efficiency = flags.min_efficiency;
  options.train_steps = flags.train_steps;
  options.train_width = flags.train_width;
  options.node_bytes = options.cluster_bytes = options.pair_bytes = *parse_size(flags.bytes);
  options.localize = flags.localize;
  options.corrupt_rank = flags.test_corrupt_rank;
  if (flags.test_corrupt_rank < -1 || flags.test_corrupt_rank >= world.size())
    return fail_usage(fmt::format("--test-corrupt-rank {} is out of range for {} ranks",
                                  flags.test_corrupt_rank, world.size()));
  // Whatever one rank finds wrong, every rank returns: a rank leaving alone
  // would leave the others waiting in the next collective.
  std::string problem;
  try {
    const char* offset = std::getenv("CCSCOPE_TEST_CLOCK_OFFSET");
    options.injected_clock_offset_s =
        offset ? diag::injected_clock_offset_s(offset, world.hostname()) : 0;
  } catch (const std::exception& e) {
    problem = fmt::format("rank {} ({}): {}", world.rank(), world.hostname(), e.what());
  }
  // The backend: the job's default rule (a device backend when every rank has
  // a GPU of its own, or --isolate-ranks), else the one named.
  options.backend = flags.backend.empty() ? job::default_backend(world, flags.isolate_ranks).backend
                                          : flags.backend;
  const job::Backend* chosen = job::find_backend(options.backend);
  if (chosen && chosen->capabilities.device == job::DeviceKind::kDevice &&
      !(chosen->built() && chosen->usable()) && problem.empty())
    problem = fmt::format(
        "--backend {}: rank {} ({}) has no usable GPU or this build has no "
        "{}; use --backend mpi",
        options.backend, world.rank(), world.hostname(), chosen->library);
  if (const std::string p = job.first_problem(problem); !p.empty()) return fail_usage(p);

  // A non-blocking NCCL init (ncclCommGetAsyncError polled under a bound), so
  // that a rank stuck in communicator creation is cut short like any wait.
  if (options.backend == "nccl" && std::getenv("NCCL_COMM_BLOCKING") == nullptr)
    ::setenv("NCCL_COMM_BLOCKING", "0", 1);
  // NCCL's own log of the run, unless the user set NCCL_DEBUG on any rank
  // (agreed: the analysis gathers over every rank).
  std::string nccl_log;
  const bool user_nccl_debug =
      world.all_reduce_sum(static_cast<int64_t>(std::getenv("NCCL_DEBUG") != nullptr)) > 0;
  if (options.backend == "nccl" && !user_nccl_debug) {
    nccl_log = nccl_debug_file(world);
    ::setenv("NCCL_DEBUG", "INFO", 1);
    ::setenv("NCCL_DEBUG_FILE", nccl_log.c_str(), 1);
  }

  std::unique_ptr<DiagOutputs> outputs;
  if (const int refused = open_outputs(job, kDiagVerb, [&] {
        outputs = std::make_unique<DiagOutputs>(flags, "diag-" + utc_now_iso8601());
      }))
    return refused;
  if (leader && !flags.quiet) {
    std::string stage_list;
    for (Stage s : stages) stage_list += fmt::format(" {}", static_cast<int>(s));
    std::printf("# ccscope diag: %d ranks on %d nodes, backend %s, stages%s%s\n\n", world.size(),
                world.node_count(), options.backend.c_str(), stage_list.c_str(),
                flags.keep_going ? " (--keep-going)" : "");
  }
  if (leader) {
    options.on_check = [&](const Check& c) { outputs->add(c); };
    options.on_stage_begin = [&](Stage s) { outputs->stage_begin(s); };
    options.on_stage_end = [&](Stage s, Status st) { outputs->stage_end(s, st); };
  }

  // SIGINT/SIGTERM: the stage under way ends, the checks so far are written
  // (JSON complete: false, Prometheus exit code 128 + signal), as bench does.
  job::InterruptHandlers interrupts(leader ? "ccscope diag: stopping after the current stage "
                                             "(signal received; send it again to stop at once)\n"
                                           : "");
  options.pending_signal = &job::InterruptHandlers::pending_signal;
  // NCCL's own RAS view over NCCL (NCCL >= 2.24, unless NCCL_RAS_ENABLE=0): dead
  // or silent processes and ranks behind, from the service on this node.
  std::optional<diag::NcclRasAddress> ras;
  if (options.backend == "nccl" && diag::nccl_version_has_ras(nccl_version_string())) {
    try {
      ras = diag::nccl_ras_address_from_environment([](const char* name) {
        const char* v = std::getenv(name);
        return v ? std::optional<std::string>(v) : std::nullopt;
      });
    } catch (const std::exception& e) {
      if (leader)
        std::fprintf(stderr, "ccscope diag: NCCL_RAS_ADDR: %s (RAS not asked)\n", e.what());
    }
  }
  HangWatchdog& watchdog = job.start_watchdog(options.timeout);
  // A hang: the rank that reports it adds RAS's view to its stall report
  // before it ends the job (the checklist never returns to ask).
  if (ras)
    watchdog.set_stall_evidence(
        [address = *ras] {
          return diag::nccl_ras_stall_evidence(diag::ask_nccl_ras(address, kRasStallTimeout));
        },
        kRasStallTimeout + std::chrono::milliseconds(500));
  // A wait cut short or a failure ends the job (run_job: exit 3 or 1).
  const diag::ChecklistResult result = diag::run_checklist(world, watchdog, options);
  if (!nccl_log.empty())
    for (Check& c : nccl_log_checks(world, nccl_log))
      if (leader) outputs->add(c);
  // After a FAIL, RAS's view as checks.
  if (leader && result.worst == Status::kFail && !result.stopped_by_signal &&
      !result.stages_run.empty()) {
    if (ras)
      for (Check& c :
           diag::nccl_ras_checks(diag::ask_nccl_ras(*ras, kRasTimeout), result.stages_run.back()))
        outputs->add(c);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  int exit_code = 0;
  if (leader) {
    const Status worst = diag::worst_status(outputs->checks());
    exit_code = result.stopped_by_signal ? 128 + result.stopped_by_signal
                : worst == Status::kFail ? kExitFailed
                                         : 0;
    size_t counts[4] = {0, 0, 0, 0};
    for (const Check& c : outputs->checks()) ++counts[static_cast<size_t>(c.status)];
    try {
      outputs->write_documents(result.stopped_by_signal == 0, exit_code, seconds);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ccscope diag: error: %s\n", e.what());
      exit_code = kExitFailed;
    }
    if (!flags.quiet) {
      std::printf("# verdict: %s after %.1f s: %zu PASS, %zu WARN, %zu FAIL, %zu SKIP",
                  diag::status_name(worst), seconds, counts[0], counts[1], counts[2], counts[3]);
      if (result.stopped_by_signal)
        std::printf("; stopped by %s after stage %d",
                    job::signal_name(result.stopped_by_signal).c_str(),
                    static_cast<int>(result.stopped_after));
      else if (result.stopped_early)
        std::printf("; stopped after stage %d (--keep-going runs the rest)",
                    static_cast<int>(result.stopped_after));
      std::printf("\n");
    }
  }
  return job.leave_together(job.agree_on_exit_code(exit_code));
}

}  // namespace diag_verb_detail

int diag_verb(const std::vector<std::string>& args, const std::vector<std::string>& command_line) {
  using namespace diag_verb_detail;
  if (!args.empty() && args[0] == "nccl-log")
    return nccl_log_verb(std::vector<std::string>(args.begin() + 1, args.end()), command_line);
  DiagFlags flags;
  CLI::App app(
      "The bring-up checklist as one staged run over the job's ranks (launch with mpiexec):\n"
      "  1 rank     GEMM and memory bandwidth per rank, host<->device copies, a 1-rank collective\n"
      "  2 node     every collective checked over each node's ranks, intra-node busbw\n"
      "  3 cluster  topology homogeneity, environment, clock offsets, node-pair bandwidth with\n"
      "             slow-node localisation, error counters, inter-node busbw against topo\n"
      "  4 scaling  DDP's weak-scaling efficiency against the network, loss against one rank\n"
      "Each check: PASS / WARN / FAIL / SKIP, measured vs expected, a remedy. It stops after the\n"
      "first stage with a FAIL unless --keep-going. Exit 0 no FAIL (WARN allowed), 1 a FAIL,\n"
      "2 bad input, 3 a hang was cut short (the stuck rank and host are named).\n"
      "`ccscope diag nccl-log FILE...` reads NCCL debug logs (ccscope diag nccl-log --help).",
      "ccscope diag");
  app.add_option("--stages", flags.stages,
                 "stages to run: 1-4 or rank,node,cluster,scaling (e.g. 1,2 or 2-4; default all)");
  app.add_flag("--keep-going", flags.keep_going, "run every stage even after a FAIL");
  app.add_option("--backend", flags.backend,
                 "mpi or nccl (default: nccl when every rank has a GPU of its own)")
      ->check(CLI::IsMember({"mpi", "nccl"}));
  app.add_flag("--isolate-ranks", flags.isolate_ranks,
               "nccl: a NCCL_HOSTID per rank, so ranks sharing one GPU connect over NET/Socket");
  add_number_option(app, "--timeout", flags.timeout_s,
                    "seconds any one wait may take before the stuck rank is named (exit 3)",
                    {1, 86400});
  add_output_option(app, "--csv", flags.csv, "ccscope.diag_check/1 rows, one per check, as judged");
  add_output_option(app, "--json", flags.json,
                    "the checks as one JSON document (rewritten after each stage)");
  add_output_option(app, "--prometheus", flags.prometheus,
                    "Prometheus text file for node-exporter's textfile collector (NAME.prom)");
  add_number_option(app, "--warn-fraction", flags.warn_fraction,
                    "bandwidth below this fraction of the expected WARNs (default 0.5)", {0, 1});
  add_number_option(app, "--fail-fraction", flags.fail_fraction,
                    "bandwidth below this fraction of the expected FAILs (default 0.25)", {0, 1});
  add_number_option(app, "--clock-warn-ms", flags.clock_warn_ms,
                    "a node's clock offset surely above this WARNs (default 10)", {0, 1e6});
  add_number_option(app, "--min-efficiency", flags.min_efficiency,
                    "stage 4 WARNs when DDP's weak-scaling efficiency is below this fraction of "
                    "what the all-reduce measured over the same ranks allows (default 0.7)",
                    {0, 1});
  app.add_option("--bytes", flags.bytes,
                 "message size of the busbw all-reduces (stages 2, 3) and of the node-pair "
                 "transfers (default 4M; smaller on slow links for a quicker verdict)");
  app.add_option("--localize", flags.localize,
                 "stage 3's slow-node search: pairs (every node pair), split-half (halves "
                 "measured at once, then the pairs inside the slower one) or auto (split-half "
                 "from 5 nodes; default)")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, diag::LocalizeMethod>{
              {"auto", diag::LocalizeMethod::kAuto},
              {"pairs", diag::LocalizeMethod::kPairs},
              {"split-half", diag::LocalizeMethod::kSplitHalf}},
          CLI::ignore_case));
  app.add_option("--train-steps", flags.train_steps, "stage 4's training steps (default 100)")
      ->check(CLI::Range(size_t{2}, size_t{100000}));
  app.add_option("--train-width", flags.train_width,
                 "stage 4's model width: 4 square layers, so 16 x width^2 bytes of gradients "
                 "all-reduced per step (default 256: 1 MiB; a slow network judges a smaller one "
                 "sooner)")
      ->check(CLI::Range(size_t{8}, size_t{8192}));
  app.add_flag("-q,--quiet", flags.quiet, "no human summary (files and exit code only)");
  app.add_option("--test-corrupt-rank", flags.test_corrupt_rank,
                 "test only: this rank corrupts one element of stage 2's results")
      ->group("");
  if (auto done = parse_flags(app, kDiagVerb, args)) return *done;
  std::vector<Stage> stages;
  try {
    stages = flags.stages.empty()
                 ? std::vector<Stage>{Stage::kRank, Stage::kNode, Stage::kCluster, Stage::kScaling}
                 : parse_stages(flags.stages);
    const std::optional<size_t> bytes = parse_size(flags.bytes);
    if (!bytes || *bytes < 1024 || *bytes > (size_t{1} << 32))
      throw UsageError("--bytes " + flags.bytes + ": give a size from 1K to 4G, e.g. 4M");
    if (flags.fail_fraction > flags.warn_fraction)
      throw UsageError(fmt::format("--fail-fraction {} is above --warn-fraction {}",
                                   flags.fail_fraction, flags.warn_fraction));
    std::vector<std::pair<std::string, std::string>> outputs;
    if (!flags.csv.empty()) outputs.push_back({"--csv", flags.csv});
    if (!flags.json.empty()) outputs.push_back({"--json", flags.json});
    if (!flags.prometheus.empty()) outputs.push_back({"--prometheus", flags.prometheus});
    reports::refuse_same_file(outputs);
  } catch (const std::exception& e) {
    return bench::launcher_says_rank_zero() ? usage_error(kDiagVerb, e.what()) : kExitUsage;
  }
  const auto started = std::chrono::steady_clock::now();
  // A stage can run for minutes (stage 4's training): one that has not ended
  // 10 s after the signal is cut short, the job ending with 128 + signal
  // without the partial documents.
  return job::run_job({kDiagVerb, job::OnSignal::kBodyStops, std::chrono::seconds(10)},
                      [&](job::JobContext& job) { return run_diag(job, flags, stages, started); });
}

}  // namespace ccscope::app
