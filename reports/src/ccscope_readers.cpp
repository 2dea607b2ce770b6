// ccscope's own CSV and JSON records, read through the schema's table
// (records/schema.h): every field the table has is read by its type, a field
// that a file's version lacks reads as the table's default, and a file of a
// newer schema version than this ccscope's is refused.
#include <map>
#include <string>
#include <utility>

#include "ccscope/records/schema.h"
#include "ccscope/reports/user_files.h"
#include "reader_support.h"
#include "record_json.h"

namespace ccscope::reports::detail {
namespace {

using records::bench_kind;
using records::BenchField;
using records::Cell;
using records::FieldError;
using records::FieldScope;
using records::LoadedBenchRow;

void check_schema(const std::string& id, const std::string& where) {
  int version = 0;
  try {
    version = records::schema_version(id, bench_kind().schema);
  } catch (const FieldError& e) {
    fail(where, e.what());
  }
  if (version == 0)
    fail(where, "schema '" + printable(id) + "' is not " + std::string(bench_kind().schema) +
                    "/N; is this a ccscope file?");
  if (version > bench_kind().version)
    fail(where, "schema " + printable(id) + " is newer than this ccscope reads (" +
                    bench_kind().schema_id() + "); read it with a newer ccscope");
}

// `where` is "file:line" (CSV: the field is named in the message) or a JSON
// path ("file: records[3]", completed with ".field").
void set_field(const BenchField& field, LoadedBenchRow& row, const Cell& cell,
               const std::string& where, bool json_path = false) {
  try {
    field.set(row, cell);
  } catch (const FieldError& e) {
    if (json_path)
      fail(where + "." + std::string(field.name),
           std::string(e.what()) + "; is the file complete and unedited?");
    fail(where, std::string(field.name) + " " + e.what() + "; is the file complete and unedited?");
  }
}

// A field the file does not hold (older versions): the table's default.
void set_absent(const BenchField& field, LoadedBenchRow& row, const std::string& where) {
  if (!field.absent.empty())
    set_field(field, row, records::cell_from_csv(field.absent, field.type), where);
}

// What every row must hold, whatever its version.
void check_row(const LoadedRecord& r, const std::string& where, bool has_size) {
  if (r.collective.empty()) fail(where, "empty collective; is the file complete and unedited?");
  if (!has_size) fail(where, "empty size_bytes; is the file complete and unedited?");
  if (r.time_s && *r.time_s < 0) fail(where, "negative time_s; is the file unedited?");
}

}  // namespace

// ------------------------------------------------------------------ ccscope CSV

LoadedRun read_ccscope_csv(const std::string& path, const std::string& raw) {
  std::vector<records::CsvRecordLine> lines;
  try {
    lines = records::parse_csv(raw);
  } catch (const records::CsvError& e) {
    fail(at(path, e.line), std::string(e.what()) + "; is the file complete and unedited?");
  }
  LoadedRun run{path, "ccscope-csv", {}, {}, {}};
  if (lines.empty()) fail(at(path, 1), "empty file; rerun the benchmark");
  const std::vector<std::string>& header = lines.front().fields;
  std::map<std::string, size_t, std::less<>> column;
  for (size_t i = 0; i < header.size(); ++i) column.emplace(header[i], i);
  for (const char* required : {"schema", "collective", "size_bytes", "time_s"})
    if (!column.contains(required))
      fail(at(path, 1),
           std::string("the header has no '") + required + "' column; is this a ccscope CSV file?");
  const auto& fields = bench_kind().fields;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string>& cells = lines[i].fields;
    const std::string where = at(path, lines[i].line);
    if (cells.size() < header.size())
      fail(where, "fewer fields than the header has (truncated row?); remove the incomplete row");
    if (cells.size() > header.size())
      fail(where, "more fields than the header has; is the file unedited?");
    check_schema(cells[column.find("schema")->second], where);
    LoadedBenchRow row;
    bool has_size = false;
    for (const BenchField& field : fields) {
      if (!field.in_csv) continue;
      const auto it = column.find(field.name);
      if (it == column.end()) {
        set_absent(field, row, where);
        continue;
      }
      const std::string& text = cells[it->second];
      if (field.name == "size_bytes") has_size = !text.empty();
      set_field(field, row, records::cell_from_csv(text, field.type), where);
    }
    records::finish_bench_row(row);
    row.record.source = where;
    check_row(row.record, where, has_size);
    if (run.records.empty()) run.metadata = row.run;  // every row repeats it: take the first
    run.records.push_back(std::move(row.record));
  }
  if (run.records.empty())
    fail(at(path, 1), "a ccscope CSV header but no records; the run measured nothing");
  return run;
}

// ------------------------------------------------------------------ ccscope JSON

namespace {

// The field's key (null included: absent in this record), or nullptr when the
// file's version has no such key. ccscope.bench/1 named run_start_utc
// start_time_utc.
const json* json_value(const json& object, const BenchField& field) {
  for (std::string_view key :
       {field.name, std::string_view(field.name == "run_start_utc" ? "start_time_utc" : "")}) {
    if (key.empty()) continue;
    const auto it = object.find(std::string(key));
    if (it != object.end()) return &*it;
  }
  return nullptr;
}

void read_json_fields(const json& object, FieldScope scope, LoadedBenchRow& row,
                      const std::string& where, bool* has_size) {
  for (const BenchField& field : bench_kind().fields) {
    if (field.scope != scope || field.name == kSchemaKey) continue;
    const json* value = json_value(object, field);
    if (!value) {
      set_absent(field, row, where);
      continue;
    }
    Cell cell;
    try {
      cell = cell_of_json(*value, field.type);
    } catch (const FieldError& e) {
      fail(where + "." + std::string(field.name), e.what());
    }
    if (field.name == "size_bytes") *has_size = cell.present;
    set_field(field, row, cell, where, true);
  }
}

}  // namespace

LoadedRun read_ccscope_json(const std::string& path, const json& doc) {
  LoadedRun run{path, "ccscope-json", {}, {}, {}};
  check_schema(jstring(doc, kSchemaKey, jwhere(path, "")), jwhere(path, kSchemaKey));
  const json* meta = member(doc, "metadata");
  if (!meta || !meta->is_object())
    fail(jwhere(path, "metadata"), "missing; is this a ccscope JSON file?");
  LoadedBenchRow run_fields;
  bool unused = false;
  read_json_fields(*meta, FieldScope::kRun, run_fields, jwhere(path, "metadata"), &unused);
  run_fields.run.stopped_by = jstring(doc, "stopped_by", jwhere(path, ""));

  const json* records = member(doc, "records");
  if (!records || !records->is_array()) fail(jwhere(path, "records"), "missing or not an array");
  for (size_t i = 0; i < records->size(); ++i) {
    const json& object = (*records)[i];
    const std::string where = jwhere(path, "records[" + std::to_string(i) + "]");
    if (!object.is_object()) fail(where, "expected an object");
    LoadedBenchRow row;
    row.run = run_fields.run;
    bool has_size = false;
    read_json_fields(object, FieldScope::kRecord, row, where, &has_size);
    if (!row.record.time_s) fail(where + ".time_s", "missing; is the file complete and unedited?");
    records::finish_bench_row(row);
    row.record.source = where;
    check_row(row.record, where, has_size);
    if (run.records.empty()) run.metadata = row.run;
    run.records.push_back(std::move(row.record));
  }
  if (run.records.empty()) fail(jwhere(path, "records"), "empty: the run measured nothing");
  return run;
}

}  // namespace ccscope::reports::detail
