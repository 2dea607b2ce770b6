// RFC 4180 CSV: a header, then one row per record, each flushed as soon as it
// is written. Every row repeats the run's metadata so that it stands alone
// (rows of several runs can be concatenated and compared).
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccscope/reports/reporter.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::reports {

const std::vector<std::string>& csv_columns() {
  static const std::vector<std::string> columns = {
      "schema",
      "collective",
      "backend",
      "dtype",
      "op",
      "root",
      "in_place",
      "size_bytes",
      "count",
      "ranks",
      "nodes",
      "ranks_per_node",
      "iterations",
      "warmup_iterations",
      "time_s",
      "time_statistic",
      "algbw_GBps",
      "busbw_GBps",
      "rank_time_min_s",
      "rank_time_avg_s",
      "rank_time_max_s",
      "iteration_time_p50_s",
      "iteration_time_p99_s",
      "checked",
      "wrong",
      "ccscope_version",
      "git_commit",
      "mpi_library",
      "nccl_version",
      "cuda_version",
      "hosts",
      "gpu_names",
      "environment",
      "command_line",
      "run_start_utc",
      "record_time_utc",
      "repeat",
      "driver_version",
      "iterations_per_sample",
      // Since nccl-tests 2.19 semantics; absent in older files (read as the
      // defaults of BenchRecord / RunMetadata).
      "rotated",
      "aggregate_iterations",
      "graph_launches",
      "time_method",
      "check_iterations",
      "failed_checks",
      "backend_resources",
  };
  return columns;
}

namespace {

std::string quote(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string join(const std::vector<std::string>& parts, char sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

// Shortest representation that reads back to the same double.
std::string number(double v) { return fmt::format("{}", v); }

class CsvReporter : public Reporter {
 public:
  explicit CsvReporter(const std::string& path) : path_(path) {
    const int fd = open_stream_output(resolve_output(path));
    file_ = ::fdopen(fd, "w");
    if (!file_) {
      ::close(fd);
      fail();
    }
  }
  ~CsvReporter() override {
    if (file_) std::fclose(file_);
  }
  CsvReporter(const CsvReporter&) = delete;
  CsvReporter& operator=(const CsvReporter&) = delete;

  void begin(const RunMetadata& m) override {
    metadata_ = m;
    write_header();
  }

  void add(const BenchRecord& r) override {
    write_header();
    const RunMetadata& m = metadata_;
    std::vector<std::string> env;
    env.reserve(m.environment.size());
    for (const auto& [name, value] : m.environment) env.push_back(name + "=" + value);
    std::vector<std::string> fields = {
        kBenchSchema,
        r.collective,
        r.backend,
        r.dtype,
        r.op,
        std::to_string(r.root),
        r.in_place ? "1" : "0",
        std::to_string(r.size_bytes),
        std::to_string(r.count),
        std::to_string(r.ranks),
        std::to_string(r.nodes),
        std::to_string(r.ranks_per_node),
        std::to_string(r.iterations),
        std::to_string(r.warmup_iterations),
        number(r.time_s),
        r.time_statistic,
        number(r.algbw_GBps),
        number(r.busbw_GBps),
        number(r.rank_time_min_s),
        number(r.rank_time_avg_s),
        number(r.rank_time_max_s),
        number(r.iteration_time_p50_s),
        number(r.iteration_time_p99_s),
        r.checked ? "1" : "0",
        std::to_string(r.wrong),
        m.ccscope_version,
        m.git_commit,
        m.mpi_library,
        m.nccl_version,
        m.cuda_version,
        join(m.hosts, ';'),
        join(m.gpu_names, ';'),
        join(env, ';'),
        m.command_line,
        m.start_time_utc,
        r.record_time_utc,
        std::to_string(r.repeat),
        m.driver_version,
        std::to_string(r.iterations_per_sample),
        r.rotated ? "1" : "0",
        std::to_string(r.aggregate_iterations),
        std::to_string(r.graph_launches),
        r.time_method,
        std::to_string(r.check_iterations),
        std::to_string(r.failed_checks),
        m.backend_resources,
    };
    write_row(fields);
  }

  void end(const RunMetadata&) override {
    write_header();  // an empty run still leaves a readable file
    if (file_) {
      FILE* f = file_;
      file_ = nullptr;
      if (std::fclose(f) != 0) fail();
    }
  }

 private:
  [[noreturn]] void fail() const {
    throw std::runtime_error(
        fmt::format("cannot write CSV file {}: {}", quote_name(path_), std::strerror(errno)));
  }

  void write_header() {
    if (header_written_) return;
    header_written_ = true;
    write_row(csv_columns());
  }

  void write_row(const std::vector<std::string>& fields) {
    if (!file_) {
      errno = EBADF;  // written after end()
      fail();
    }
    std::string row;
    for (size_t i = 0; i < fields.size(); ++i) {
      if (i) row += ',';
      row += quote(fields[i]);
    }
    // LF, not RFC 4180's CRLF: the files are read on Unix with awk/cut/pandas,
    // and every CSV reader accepts it. CR and LF inside a field are quoted.
    row += '\n';
    errno = 0;
    if (std::fwrite(row.data(), 1, row.size(), file_) != row.size() || std::fflush(file_) != 0) {
      if (errno == 0) errno = EIO;
      fail();
    }
  }

  std::string path_;
  FILE* file_ = nullptr;
  RunMetadata metadata_;
  bool header_written_ = false;
};

}  // namespace

std::unique_ptr<Reporter> make_csv_reporter(const std::string& path) {
  return std::make_unique<CsvReporter>(path);
}

}  // namespace ccscope::reports
