#pragma once
// ccscope diag's files read back for `ccscope report`, and its JSON document
// written: ccscope.diag_check/N records (records/diag_record.h), one per check
// of the bring-up checklist, as
//   CSV   `ccscope diag --csv FILE`: a row per check, header of the kind's columns;
//   JSON  `ccscope diag --json FILE`:
//         {"schema": "ccscope.diag_check/1", "complete": true, "checks": [{...}, ...]}
//         each check an object of the kind's fields but schema (an absent figure
//         is null); "complete" is false when the run stopped before its end.
// A file is a diag file when its first CSV record's schema column, or the JSON
// document's "schema", names ccscope.diag_check (any version: the reader judges
// it), or when a CSV has no record and a header with the columns the reader
// requires (it then says "no records").
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/records/diag_record.h"
#include "ccscope/reports/loaded_results.h"  // InputError

namespace ccscope::reports {

// Every diag check of the files given, in file and row order.
struct DiagResults {
  std::vector<records::DiagCheckRecord> checks;
  // The run_ids of JSON documents that say "complete": false, once each.
  std::vector<std::string> incomplete_runs;

  bool empty() const { return checks.empty(); }
  void append(DiagResults&& other);
};

bool is_diag_file(std::string_view text);

// Reads one diag CSV or JSON file. Throws InputError naming the file and line
// (JSON: the key, "checks[3].status") for a malformed value, a status other
// than PASS/WARN/FAIL/SKIP, a truncated row, a newer schema version, a missing
// column, or no checks.
DiagResults read_diag_results(const std::string& path);
// The same for text already read; `path` names it in messages.
DiagResults parse_diag_results(const std::string& path, const std::string& text);

// The JSON document of `ccscope diag --json` (keys in the table's order, two
// spaces of indent, a final line break); parse_diag_results reads it back.
std::string diag_checks_json(const std::vector<records::DiagCheckRecord>& checks, bool complete);

}  // namespace ccscope::reports
