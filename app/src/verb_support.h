#pragma once
// What the verbs share: running CLI11 over the words after the verb, the
// one-line usage error (exit 2), comma lists of files, CSV rows flushed as
// measured.
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/records/schema.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::app {

inline constexpr int kExitUsage = 2;

// "ccscope VERB: error: WHAT (ccscope VERB --help)" on stderr; returns 2.
int usage_error(const char* verb, const std::string& what);

// Runs CLI11 on `args`; returns the exit code when parsing ends the verb
// (help printed: 0; a bad flag: usage_error), nullopt to go on.
std::optional<int> parse_flags(CLI::App& app, const char* verb, std::vector<std::string> args);

// "a.csv,b.csv" and separate words alike: every non-empty item in order.
std::vector<std::string> split_commas(const std::vector<std::string>& words);

// Rows of a CSV of one record kind flushed as they are measured (a failed run
// keeps them). Throws std::runtime_error (with strerror) when a row cannot be written.
class RowFile {
 public:
  template <typename Kind>
  RowFile(const reports::OutputTarget& target, const Kind& kind)
      : fd_(reports::open_stream_output(target)) {
    append(records::csv_line(records::csv_columns(kind)));
  }
  ~RowFile();
  RowFile(const RowFile&) = delete;
  RowFile& operator=(const RowFile&) = delete;
  void append(const std::string& text);

 private:
  int fd_ = -1;
};

}  // namespace ccscope::app
