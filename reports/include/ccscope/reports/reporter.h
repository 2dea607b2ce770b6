#pragma once
// The writers of bench records: console, CSV and JSON, each a records::Reporter
// fed as records are measured.
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "ccscope/records/reporter.h"
#include "ccscope/reports/record.h"

namespace ccscope::reports {

// The sink bench writes to (records/reporter.h); the writers below implement it.
using records::Reporter;
using records::ReporterList;

// nccl-tests' table: one line per size with out-of-place and in-place columns,
// "# Avg bus bandwidth" at the end. Times in microseconds.
std::unique_ptr<Reporter> make_console_reporter(std::ostream& out);
// One row per record, written and flushed as each record arrives. Throws
// std::runtime_error (with strerror) when the file cannot be written.
std::unique_ptr<Reporter> make_csv_reporter(const std::string& path);
// A JSON document {schema, complete, metadata, records}, rewritten atomically
// (temp file + rename) after every record so that it is always valid JSON.
std::unique_ptr<Reporter> make_json_reporter(const std::string& path);

// The CSV header ccscope writes, in order (for readers and tests).
const std::vector<std::string>& csv_columns();

}  // namespace ccscope::reports
