#pragma once
// Reporters are fed records as they are measured (a run that dies keeps what
// was reported). Several can be active at once (console + CSV + JSON).
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "ccscope/reports/record.h"

namespace ccscope::reports {

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void begin(const RunMetadata& metadata) = 0;
  virtual void add(const BenchRecord& record) = 0;
  // `metadata` now carries end_time_utc.
  virtual void end(const RunMetadata& metadata) = 0;
};

// nccl-tests' table: one line per size with out-of-place and in-place columns,
// "# Avg bus bandwidth" at the end. Times in microseconds.
std::unique_ptr<Reporter> make_console_reporter(std::ostream& out);
// One row per record, written and flushed as each record arrives. Throws
// std::runtime_error (with strerror) when the file cannot be written.
std::unique_ptr<Reporter> make_csv_reporter(const std::string& path);
// A JSON document {schema, complete, metadata, records}, rewritten atomically
// (temp file + rename) after every record so that it is always valid JSON.
std::unique_ptr<Reporter> make_json_reporter(const std::string& path);

// Forwards to several reporters. Every reporter is fed even when another one
// throws (a full disk under the CSV must not cost the JSON its record); the
// errors are then rethrown together as one std::runtime_error.
class ReporterList : public Reporter {
 public:
  void append(std::unique_ptr<Reporter> reporter) { reporters_.push_back(std::move(reporter)); }
  void begin(const RunMetadata& m) override;
  void add(const BenchRecord& rec) override;
  void end(const RunMetadata& m) override;

 private:
  template <typename Call>
  void for_each(const Call& call);
  std::vector<std::unique_ptr<Reporter>> reporters_;
};

// The CSV header ccscope writes, in order (for readers and tests).
const std::vector<std::string>& csv_columns();

}  // namespace ccscope::reports
