#pragma once
// The sink measuring code hands its records to, as they are measured (a run
// that dies keeps what was reported). It lives here, below the measuring
// libraries, so that they depend on the records and not on the writers: the
// console, CSV and JSON reporters are reports/' (reports/reporter.h), and the
// command layer chooses them. Several can be active at once (ReporterList).
#include <memory>
#include <vector>

#include "ccscope/records/bench_record.h"

namespace ccscope::records {

class Reporter {
 public:
  virtual ~Reporter() = default;
  virtual void begin(const RunMetadata& metadata) = 0;
  virtual void add(const BenchRecord& record) = 0;
  // `metadata` now carries end_time_utc.
  virtual void end(const RunMetadata& metadata) = 0;
};

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

}  // namespace ccscope::records
