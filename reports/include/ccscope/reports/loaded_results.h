#pragma once
// Results read back from files: ccscope's own CSV/JSON, nccl-tests' text and
// -J JSON output, OSU collective output. Every source becomes the same shape;
// a figure the source did not contain is std::nullopt (absent), never invented.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccscope/reports/record.h"

namespace ccscope::reports {

// Bad input file: the message names the file and line ("run.csv:17: ...").
// Front ends print it as one line and exit 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using records::LoadedRecord;

struct LoadedRun {
  std::string path;
  std::string format;  // "ccscope-csv", "ccscope-json", "nccl-tests-text", "nccl-tests-json", "osu"
  RunMetadata metadata;  // what the source said; empty strings/zeros when absent
  std::vector<LoadedRecord> records;
  // What the reader skipped or converted, one line each, for the user to see
  // ("12 lines of other programs skipped (NCCL INFO, launcher prefixes)").
  std::vector<std::string> notes;
};

}  // namespace ccscope::reports

namespace ccscope::reports {

// Reads one results file, detecting its format from its content. Throws
// InputError naming the file and line for anything malformed, truncated, empty
// or of an unknown format.
LoadedRun read_results(const std::string& path);
// The same for text already read; `path` names it in messages.
LoadedRun parse_results(const std::string& path, const std::string& text);

}  // namespace ccscope::reports
