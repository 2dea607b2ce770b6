// nccl-tests' table on a stream: one line per size with the out-of-place and
// in-place results side by side, "# Out of bounds values" (failed checks, as
// nccl-tests counts them) and "# Avg bus bandwidth" at the end. Every line is flushed as soon as it
// is complete so that a run which dies keeps what it measured.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ccscope/records/collective.h"
#include "ccscope/records/schema.h"
#include "ccscope/reports/reporter.h"

namespace ccscope::reports {
namespace {

// nccl-tests' way of fitting a figure in a fixed width: two decimals when they
// fit, then fewer, then an exponent ("1771.2", "57907", "1e+06").
std::string fit_number(double value, int width) {
  if (!std::isfinite(value)) return fmt::format("{:>{}}", value, width);
  for (int decimals = 2; decimals >= 0; --decimals) {
    std::string s = fmt::format("{:.{}f}", value, decimals);
    if (static_cast<int>(s.size()) <= width) return fmt::format("{:>{}}", s, width);
  }
  return fmt::format("{:>{}.0e}", value, width);
}

// "vm (ranks 0-1), node2 (rank 2)": runs of consecutive ranks on one name.
std::string compact_by_rank(const std::vector<std::string>& names) {
  constexpr size_t kMaxRuns = 16;
  std::string out;
  size_t runs = 0;
  size_t total_runs = 0;
  for (size_t i = 0; i < names.size();) {
    size_t j = i;
    while (j + 1 < names.size() && names[j + 1] == names[i]) ++j;
    ++total_runs;
    if (runs < kMaxRuns) {
      if (!out.empty()) out += ", ";
      out += names[i].empty() ? std::string("?") : names[i];
      out += i == j ? fmt::format(" (rank {})", i) : fmt::format(" (ranks {}-{})", i, j);
      ++runs;
    }
    i = j + 1;
  }
  if (total_runs > runs) out += fmt::format(", ... ({} more)", total_runs - runs);
  return out;
}

// The nccl-tests release whose output the console follows (flags, columns,
// header and closing lines).
constexpr const char* kFollowedNcclTestsVersion = "2.19.6";

// NCCL_VERSION_CODE of a version text, as nccl-tests prints nccl-library=
// ("2.28.3" -> 22803; before 2.9, 2.8.4 -> 2804); 0 for "" (NCCL not used).
long nccl_version_code(const std::string& text) {
  int major = 0, minor = 0, patch = 0;
  if (std::sscanf(text.c_str(), "%d.%d.%d", &major, &minor, &patch) != 3) return 0;
  return major <= 2 && minor < 9 ? major * 1000L + minor * 100L + patch
                                 : major * 10000L + minor * 100L + patch;
}

// nccl-tests' three pre-table lines in its words and number formats, so that a
// script reading its header (version, program, sweep parameters) reads ours.
void nccl_tests_parameter_lines(const RunMetadata& m, const std::string& version,
                                const std::function<void(const std::string&)>& line) {
  const RunMetadata::NcclTestsParameters& p = *m.nccl_tests_parameters;
  // The headers ccscope was built against, as the NCCL backend's resources
  // say them ("nccl_header=2.28.9"); else the library's.
  const long library = nccl_version_code(m.nccl_version);
  long headers = library;
  const std::string key = "nccl_header=";
  if (const size_t at = m.backend_resources.find(key); at != std::string::npos && library > 0) {
    const size_t from = at + key.size();
    const long code = nccl_version_code(
        m.backend_resources.substr(from, m.backend_resources.find(',', from) - from));
    if (code > 0) headers = code;
  }
  line(fmt::format(
      "# nccl-tests version {} nccl-headers={} nccl-library={} (ccscope {}, following nccl-tests "
      "{})",
      kFollowedNcclTestsVersion, headers, library, version, kFollowedNcclTestsVersion));
  line(fmt::format("# Collective test starting: {}", p.program));
  line(fmt::format(
      "# nThread {} nGpus {} minBytes {} maxBytes {} step: {}({}) warmup iters: {} iters: {} agg "
      "iters: {} validation: {} graph: {} unalign: 0",
      p.threads, p.gpus, p.min_bytes, p.max_bytes, p.step_factor > 1 ? p.step_factor : p.step_bytes,
      p.step_factor > 1 ? "factor" : "bytes", p.warmup_iterations, p.iterations,
      p.aggregate_iterations, p.check_iterations, p.graph_launches));
}

class ConsoleReporter : public Reporter {
 public:
  explicit ConsoleReporter(std::ostream& out) : out_(out) {}

  void begin(const RunMetadata& m) override {
    std::string version = m.ccscope_version.empty() ? "unknown" : m.ccscope_version;
    line(m.git_commit.empty()
             ? fmt::format("# ccscope version {}", version)
             : fmt::format("# ccscope version {} commit {}", version, m.git_commit));
    if (m.nccl_tests_parameters)
      nccl_tests_parameter_lines(m, version, [this](const std::string& text) { line(text); });
    if (!m.command_line.empty()) line(fmt::format("# Command: {}", m.command_line));
    if (!m.start_time_utc.empty()) line(fmt::format("# Start: {}", m.start_time_utc));
    line(fmt::format("# Backend: {}  ranks: {}  nodes: {}  ranks per node: {}",
                     m.backend.empty() ? "?" : m.backend, m.ranks, m.nodes, m.ranks_per_node));
    if (!m.launch.empty())
      line(fmt::format(
          "# Launch: {} ({}){}", m.launch, m.launcher,
          m.slurm_job_id.empty()
              ? std::string()
              : fmt::format(", Slurm job {} step {} on {}", m.slurm_job_id,
                            m.slurm_step_id.empty() ? "-" : m.slurm_step_id, m.slurm_nodelist)));
    if (m.ranks_per_process > 1)
      line(fmt::format("# Ranks per process: {} (threads of one process: -t x -g)",
                       m.ranks_per_process));
    if (!m.hosts.empty()) line(fmt::format("# Hosts: {}", compact_by_rank(m.hosts)));
    if (!m.gpu_names.empty()) line(fmt::format("# Devices: {}", compact_by_rank(m.gpu_names)));
    if (!m.mpi_library.empty()) line(fmt::format("# MPI library: {}", m.mpi_library));
    for (const std::string& note : m.notes) line("# " + note);
    // nccl-tests' device lines, so that scripts reading its header read ours.
    if (!m.rank_devices.empty()) {
      line("# Using devices");
      for (size_t r = 0; r < m.rank_devices.size(); ++r)
        line(fmt::format("#  Rank {:2} Group {:2} {}", r,
                         r < m.rank_groups.size() ? m.rank_groups[r] : 0, m.rank_devices[r]));
    }
    if (!m.nccl_version.empty()) line(fmt::format("# NCCL version: {}", m.nccl_version));
    if (!m.cuda_version.empty()) line(fmt::format("# CUDA version: {}", m.cuda_version));
    if (!m.driver_version.empty()) line(fmt::format("# GPU driver: {}", m.driver_version));
    if (!m.backend_resources.empty())
      line(fmt::format("# Backend resources: {}", m.backend_resources));
    // busbw against the slowest path's nominal figure: two columns more (%exp)
    // only when that figure is known, so a run without it prints nccl-tests' table.
    if (m.expected_busbw_GBps && *m.expected_busbw_GBps > 0) {
      expected_GBps_ = *m.expected_busbw_GBps;
      line(fmt::format("# Expected busbw: {:.4g} GB/s, {}", expected_GBps_, m.expected_path));
    }
    line("#");
  }

  void add(const BenchRecord& r) override {
    // One table per collective, as nccl-tests prints one header for a whole
    // -d all -o all run (type, op and root are columns); a change of what the
    // time column means starts a new one.
    if (!table_ || r.collective != table_->collective ||
        r.time_statistic != table_->time_statistic || r.time_method != table_->time_method) {
      flush_pending();
      print_table_header(r);
    }
    busbw_sum_ += r.busbw_GBps;
    ++records_;
    // nccl-tests counts errors per check, not per element: a record's failed
    // checks, or 1 for a record with wrong elements but no count of checks
    // (written before failed_checks existed).
    failed_checks_ += r.failed_checks > 0 ? r.failed_checks : r.wrong > 0 ? 1 : 0;

    std::optional<BenchRecord>& slot = r.in_place ? in_place_ : out_of_place_;
    const BenchRecord* held = out_of_place_ ? &*out_of_place_ : in_place_ ? &*in_place_ : nullptr;
    if (held && (held->size_bytes != r.size_bytes || held->dtype != r.dtype || held->op != r.op ||
                 held->root != r.root || slot))
      flush_pending();
    slot = r;
    // Records come out-of-place first, then in-place: an in-place record
    // completes its line.
    if (in_place_) flush_pending();
  }

  void end(const RunMetadata& m) override {
    flush_pending();
    if (not_converged_ > 0) {
      line(
          fmt::format("# * {} time(s) did not reach the target interval within "
                      "--max-seconds-per-size (records: converged=0)",
                      not_converged_));
      line("#");
    }
    if (!m.stopped_by.empty()) {
      line(fmt::format("# Stopped by {} after {} record(s): the sweep is incomplete", m.stopped_by,
                       records_));
      line("#");
    }
    // Failed checks, as nccl-tests counts them; #wrong per row stays elements.
    line(fmt::format("# Out of bounds values : {} {}", failed_checks_,
                     failed_checks_ ? "FAILED" : "OK"));
    double avg = records_ ? busbw_sum_ / static_cast<double>(records_) : 0.0;
    // %g and the trailing space, as nccl-tests prints it.
    char avg_text[64];
    std::snprintf(avg_text, sizeof avg_text, "%g", avg);
    // NCCL_TESTS_MIN_BW: OK or FAILED against 90% of it, as nccl-tests.
    const std::string verdict = !m.min_avg_busbw_GBps               ? ""
                                : avg < 0.9 * *m.min_avg_busbw_GBps ? "FAILED"
                                                                    : "OK";
    line(fmt::format("# Avg bus bandwidth    : {} {}", avg_text, verdict));
    line("#");
    // nccl-tests' closing line (scripts wait for it), naming the program of
    // the last table's collective.
    if (table_)
      if (const auto collective = parse_collective(table_->collective)) {
        line(fmt::format("# Collective test concluded: {}",
                         describe(*collective).nccl_tests_program));
        line("#");
      }
    if (!m.end_time_utc.empty()) {
      line(fmt::format("# End: {}", m.end_time_utc));
      line("#");
    }
  }

 private:
  void line(const std::string& s) { out_ << s << '\n' << std::flush; }

  void print_table_header(const BenchRecord& r) {
    table_ = r;
    line(fmt::format("# Collective: {}", r.collective));
    // Which statistic the time column is, and how it was measured.
    line(fmt::format("# time: {}", records::describe_time_statistic(r.time_statistic)));
    if (!r.time_method.empty()) line(fmt::format("# time method: {}", r.time_method));
    line("#");
    const bool percent = expected_GBps_ > 0;
    // Adaptive sampling (--target-ci): each time's 95% interval, two columns
    // more, so that a fixed -n run prints nccl-tests' table.
    interval_ = r.target_ci_percent > 0;
    line(std::string("#                                                              out-of-place  "
                     "            "
                     "         in-place          ") +
         (percent ? "   busbw % of expected" : "") +
         (interval_ ? fmt::format("   time 95% CI (target {:g}%)", r.target_ci_percent) : ""));
    line(std::string("#       size         count      type   redop    root     time   algbw   "
                     "busbw  #wrong    "
                     " time   algbw   busbw  #wrong ") +
         (percent ? "  oop %exp  ip %exp" : "") + (interval_ ? "    oop +-     ip +-" : ""));
    line(std::string("#        (B)    (elements)                               (us)  (GB/s)  "
                     "(GB/s)            "
                     " (us)  (GB/s)  (GB/s)         ") +
         (percent ? "       (%)      (%)" : "") + (interval_ ? "       (%)       (%)" : ""));
  }

  // "±1.3%"; "±6.1%*" when the interval did not reach the target (the time
  // budget ran out); "N/A" without an interval (one sample).
  std::string interval_text(const std::optional<BenchRecord>& r) const {
    if (!r) return "N/A";
    if (!interval_) return "";
    const std::string mark = r->converged ? "" : "*";
    if (!(r->ci_half_width_percent > 0)) return "N/A" + mark;
    return fmt::format("\u00b1{:.1f}%{}", r->ci_half_width_percent, mark);
  }

  static std::string group(const std::optional<BenchRecord>& r) {
    if (!r) return fmt::format("  {:>7}  {:>6}  {:>6}  {:>6}", "N/A", "N/A", "N/A", "N/A");
    std::string wrong = r->checked ? fmt::format("{}", r->wrong) : std::string("N/A");
    return fmt::format("  {}  {}  {}  {:>6}", fit_number(r->time_s * 1e6, 7),
                       fit_number(r->algbw_GBps, 6), fit_number(r->busbw_GBps, 6), wrong);
  }

  void flush_pending() {
    if (!out_of_place_ && !in_place_) return;
    const BenchRecord& r = out_of_place_ ? *out_of_place_ : *in_place_;
    std::string percent;
    if (expected_GBps_ > 0) {
      const auto share = [this](const std::optional<BenchRecord>& v) {
        return v ? fmt::format("{:.1f}", 100.0 * v->busbw_GBps / expected_GBps_)
                 : std::string("N/A");
      };
      percent = fmt::format("  {:>8}  {:>7}", share(out_of_place_), share(in_place_));
    }
    std::string spread;
    if (interval_)
      spread =
          fmt::format("  {:>8}  {:>8}", interval_text(out_of_place_), interval_text(in_place_));
    line(fmt::format("{:>12}  {:>12}  {:>8}  {:>6}  {:>6}{}{}{}{}", r.size_bytes, r.count, r.dtype,
                     r.op, r.root, group(out_of_place_), group(in_place_), percent, spread));
    if (interval_)
      not_converged_ +=
          (out_of_place_ && !out_of_place_->converged) + (in_place_ && !in_place_->converged);
    out_of_place_.reset();
    in_place_.reset();
  }

  std::ostream& out_;
  std::optional<BenchRecord> table_;  // the record that opened the current table
  std::optional<BenchRecord> out_of_place_;
  std::optional<BenchRecord> in_place_;
  double busbw_sum_ = 0;
  double expected_GBps_ = 0;  // the run's expected busbw; 0 unknown
  bool interval_ = false;     // the current table has the interval columns
  int64_t not_converged_ = 0;
  int64_t records_ = 0;
  int64_t failed_checks_ = 0;  // "# Out of bounds values"
};

}  // namespace

std::unique_ptr<Reporter> make_console_reporter(std::ostream& out) {
  return std::make_unique<ConsoleReporter>(out);
}

}  // namespace ccscope::reports
