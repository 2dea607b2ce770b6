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

#include "ccscope/records/schema.h"
#include "ccscope/reports/reporter.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::reports {

const std::vector<std::string>& csv_columns() {
  static const std::vector<std::string> columns = records::csv_columns(records::bench_kind());
  return columns;
}

namespace {

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
    write(records::csv_row(records::bench_kind(), records::bench_cells(r, metadata_)));
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
    throw WriteError(
        fmt::format("cannot write CSV file {}: {}", quote_name(path_), std::strerror(errno)));
  }

  void write_header() {
    if (header_written_) return;
    header_written_ = true;
    write(records::csv_line(csv_columns()));
  }

  void write(const std::string& row) {
    if (!file_) {
      errno = EBADF;  // written after end()
      fail();
    }
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
