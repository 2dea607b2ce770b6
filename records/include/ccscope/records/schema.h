#pragma once
// The record schema: each record kind is one table of fields (name, unit,
// type, meaning, version that added it). The CSV and JSON writers, the
// readers and the tests iterate the table; no other code lists the fields.
//
// A field's value travels as a Cell: its text form (the CSV cell), or its
// items (a list, a map). JSON writes the same value typed by the field's type.
//
// Versions (the `schema` column / key, "ccscope.bench/N"):
//   - a reader takes every version up to its own; a field that a file's version
//     lacks reads as the field's `absent` text (a default the table states, or
//     absent when that is "");
//   - a file of a newer version is refused (upgrade ccscope to read it);
//   - columns the table does not know are ignored (they can only come from a
//     newer minor change or a user's own column).
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ccscope/records/bench_record.h"

namespace ccscope::records {

enum class FieldType {
  kText,     // a string, written as is
  kInteger,  // a whole number (CSV text, JSON number)
  kNumber,   // a finite double, written in its shortest exact form
  kFlag,     // CSV 1/0, JSON true/false
  kList,     // strings: CSV joined by ';', JSON array
  kMap,      // NAME=value pairs: CSV joined by ';', JSON object
};
std::string_view name(FieldType type);

// Per record, or the run's (CSV repeats the run's fields on every row so that
// rows stand alone; JSON holds them once, under "metadata").
enum class FieldScope { kRecord, kRun };

struct Cell {
  bool present = false;  // false: the record does not hold this figure
  std::string text;      // kText, kInteger, kNumber, kFlag
  std::vector<std::string> items;                            // kList
  std::vector<std::pair<std::string, std::string>> entries;  // kMap
};

// A value that does not fit its field ("'abc' is not a number"); readers add
// where it was.
class FieldError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `Measured` is what a producer writes (every figure known); `Read` is what a
// reader fills (every figure optional). A kind whose producer and readers
// share one struct uses it for both.
template <typename Measured, typename Read>
struct Field {
  std::string_view name;
  std::string_view unit;  // "s", "B", "GB/s", "" for none
  FieldType type;
  FieldScope scope;
  int since;                // the schema version that added the field
  std::string_view absent;  // text a file without the field reads as; "" = absent
  bool in_csv;              // false: JSON only (known only when the run ends)
  std::string_view meaning;
  Cell (*measured)(const Measured&);  // nullptr: producers never hold it
  Cell (*get)(const Read&);
  void (*set)(Read&, const Cell&);  // throws FieldError
};

template <typename Measured, typename Read>
struct RecordKind {
  std::string_view schema;  // "ccscope.bench"
  int version;
  std::vector<Field<Measured, Read>> fields;

  std::string schema_id() const { return std::string(schema) + "/" + std::to_string(version); }
  const Field<Measured, Read>* find(std::string_view field_name) const {
    for (const auto& f : fields)
      if (f.name == field_name) return &f;
    return nullptr;
  }
};

// The version a schema id names ("ccscope.bench/2" -> 2), or 0 when `id` is
// not of `schema`. Throws FieldError for a number that is not a version.
int schema_version(std::string_view id, std::string_view schema);

// ------------------------------------------------------------------ bench

// What one CSV row / JSON record of a bench file holds: the record and the
// run's metadata. ranks/nodes/ranks_per_node of the run are the records'.
struct BenchRow {
  const BenchRecord& record;
  const RunMetadata& run;
};
struct LoadedBenchRow {
  LoadedRecord record;
  RunMetadata run;
  // JSON's document-level "complete"/"stopped_by" and end time are run
  // fields too; CSV files do not hold them.
};

using BenchField = Field<BenchRow, LoadedBenchRow>;
using BenchKind = RecordKind<BenchRow, LoadedBenchRow>;
const BenchKind& bench_kind();

// After every field of a row was set: what one field implies for another
// (an unchecked record has no wrong count; a root of -1 means no root).
void finish_bench_row(LoadedBenchRow& row);

// Cells of a row in table order, from a measured record or one read back.
std::vector<Cell> bench_cells(const BenchRecord& record, const RunMetadata& run);
std::vector<Cell> bench_cells(const LoadedBenchRow& row);

// The statistic over ranks a time is: "max", "avg", "min", "rank0".
// time_statistic_name accepts those tokens and ccscope.bench/1's sentences
// ("max over ranks of mean over iterations"); "" when it names none.
std::string time_statistic_name(std::string_view text);
// "max over ranks of mean over iterations" for "max", ...
std::string describe_time_statistic(std::string_view token);

// The shortest text that reads back to the same double ("1e-06", "0.5").
std::string number_text(double value);

// ------------------------------------------------------------------ CSV text

// One CSV line (RFC 4180 quoting where a field holds , " CR or LF; LF ends it).
std::string csv_line(const std::vector<std::string>& fields);
// The CSV text of a cell (lists and maps joined by ';').
std::string csv_text(const Cell& cell, FieldType type);
// The cell a CSV text is, for a field of `type` ("" = absent).
Cell cell_from_csv(std::string_view text, FieldType type);

// The CSV header of a kind and one row of its cells (fields in table order;
// JSON-only fields left out).
template <typename Kind>
std::vector<std::string> csv_columns(const Kind& kind) {
  std::vector<std::string> names;
  for (const auto& field : kind.fields)
    if (field.in_csv) names.emplace_back(field.name);
  return names;
}
template <typename Kind>
std::string csv_row(const Kind& kind, const std::vector<Cell>& cells) {
  std::vector<std::string> texts;
  for (size_t i = 0; i < kind.fields.size() && i < cells.size(); ++i)
    if (kind.fields[i].in_csv) texts.push_back(csv_text(cells[i], kind.fields[i].type));
  return csv_line(texts);
}

struct CsvRecordLine {
  size_t line = 0;  // the file line the row starts on (1-based)
  std::vector<std::string> fields;
};
class CsvError : public FieldError {
 public:
  CsvError(size_t line_number, const std::string& what) : FieldError(what), line(line_number) {}
  size_t line;
};
// RFC 4180: quoted fields may hold commas, quotes ("") and line breaks; CRLF
// or LF ends a row; blank lines are skipped. Throws CsvError (with the line
// the quote opened on) for a quoted field that is not closed.
std::vector<CsvRecordLine> parse_csv(std::string_view text);

}  // namespace ccscope::records
