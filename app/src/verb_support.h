#pragma once
// What the verbs share: running CLI11 over the words after the verb, the
// one-line usage error (exit 2), validated number and output-file flags, the
// one-line write failure (exit 1), comma lists of files, CSV rows flushed as
// measured.
#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/job/run_job.h"
#include "ccscope/records/schema.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::app {

inline constexpr int kExitUsage = 2;
// An output that could not be written (a full disk): bench's code, every verb's.
inline constexpr int kExitWriteFailed = 1;

// "ccscope VERB: error: WHAT (ccscope VERB --help)" on stderr; returns 2.
int usage_error(const char* verb, const std::string& what);

// Runs CLI11 on `args`; returns the exit code when parsing ends the verb
// (help printed: 0; a bad flag: usage_error), nullopt to go on.
std::optional<int> parse_flags(CLI::App& app, const char* verb, std::vector<std::string> args);

// "ccscope VERB: error: WHAT" on stderr (an output that could not be written:
// no --help hint, the flags were right); returns kExitWriteFailed.
int write_error(const char* verb, const std::string& what);

// Rank 0 opens a verb's outputs (`open` throws to refuse, job.open_outputs); every rank
// then goes on (0) or returns one code: kExitWriteFailed when the system refused to write
// (reports::WriteError: a full disk), else kExitUsage. Rank 0 prints the one line.
int open_outputs(job::JobContext& job, const char* verb, const std::function<void()>& open);

// The values a floating-point flag accepts: a finite number from `low` to
// `high`, each bound included unless marked open.
struct NumberRange {
  double low = 0;
  double high = 0;
  bool low_open = false;
  bool high_open = false;
};

// A floating-point flag: NaN, inf and values outside `range` are refused by
// CLI11 with one line (exit 2 through parse_flags), e.g. "--lr: nan is not a
// finite number: give one in (0, 10]".
CLI::Option* add_number_option(CLI::App& app, const std::string& name, double& value,
                               const std::string& help, NumberRange range);

// An output-file flag: an empty name is refused (one line, exit 2) instead of
// being taken for "not given".
CLI::Option* add_output_option(CLI::App& app, const std::string& name, std::string& path,
                               const std::string& help);

// "a.csv,b.csv" and separate words alike: every non-empty item in order.
std::vector<std::string> split_commas(const std::vector<std::string>& words);

// Rows of a CSV of one record kind flushed as they are measured (a failed run
// keeps them). Throws reports::WriteError (the file and the system's reason)
// when a row cannot be written.
class RowFile {
 public:
  // `kind`: one of records' kind tables (they live as long as the program).
  template <typename Kind>
  RowFile(const reports::OutputTarget& target, const Kind& kind)
      : fd_(reports::open_stream_output(target)),
        path_(target.path),
        row_text_([&kind](const std::vector<records::Cell>& cells) {
          return records::csv_row(kind, cells);
        }) {
    append(records::csv_line(records::csv_columns(kind)));
  }
  ~RowFile();
  RowFile(const RowFile&) = delete;
  RowFile& operator=(const RowFile&) = delete;
  // One record, its cells in the kind's order (records' *_cells functions).
  void append_row(const std::vector<records::Cell>& cells) { append(row_text_(cells)); }

 private:
  void append(const std::string& text);

  int fd_ = -1;
  std::string path_;  // as the user named it, for the message
  std::function<std::string(const std::vector<records::Cell>&)> row_text_;
};

}  // namespace ccscope::app
