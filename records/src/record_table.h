#pragma once
// What every record kind's table is built from and read with, once: a field
// of a struct member, the schema cell and its check, a CSV of the kind's
// columns read back, a record's cells. (The bench kind, whose rows join a
// record and the run's metadata, builds its own.)
#include <string>
#include <vector>

#include "ccscope/records/schema.h"
#include "cells.h"

namespace ccscope::records {

template <typename R, auto Member, long long MinValue = 0>
Field<R, R> member_field(std::string_view name, std::string_view unit, std::string_view meaning) {
  using M = std::remove_cvref_t<decltype(std::declval<R&>().*Member)>;
  return Field<R, R>{
      name,
      unit,
      cells::type_of<M>(),
      FieldScope::kRecord,
      1,
      "",
      true,
      meaning,
      [](const R& r) { return cells::cell_of(r.*Member); },
      [](const R& r) { return cells::cell_of(r.*Member); },
      [](R& r, const Cell& c) { cells::set_from<M, MinValue>(r.*Member, c); },
  };
}

// `field` as added by schema version `since`.
template <typename F>
F since_version(F field, int since) {
  field.since = since;
  return field;
}

inline Cell schema_cell(const std::string& id) {
  Cell c;
  c.present = true;
  c.text = id;
  return c;
}

// A row's schema cell must name the kind, at a version this ccscope reads (an
// absent cell, or no schema column, is taken as the kind's).
template <typename R>
void check_schema(const RecordKind<R, R>& kind, const Cell& c) {
  if (!c.present) return;
  const int version = schema_version(c.text, kind.schema);
  if (version == 0) throw FieldError("'" + c.text + "' is not " + std::string(kind.schema) + "/N");
  if (version > kind.version)
    throw FieldError(c.text + " is newer than this ccscope reads (" + kind.schema_id() +
                     "); read it with a newer ccscope");
}

// One CSV row per record; a row with more or fewer fields than the header is
// refused (a truncated write), columns the table does not know are ignored.
template <typename R>
std::vector<R> read_csv(const RecordKind<R, R>& kind, std::string_view text) {
  const std::vector<CsvRecordLine> lines = parse_csv(text);
  std::vector<R> records;
  if (lines.empty()) return records;
  std::vector<const Field<R, R>*> columns;
  for (const std::string& name : lines.front().fields) columns.push_back(kind.find(name));
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].fields.size() != columns.size())
      throw CsvError(lines[i].line, std::to_string(lines[i].fields.size()) +
                                        " fields, the header has " +
                                        std::to_string(columns.size()) + " (truncated row?)");
    R record;
    for (size_t c = 0; c < columns.size(); ++c) {
      if (!columns[c]) continue;
      try {
        columns[c]->set(record, cell_from_csv(lines[i].fields[c], columns[c]->type));
      } catch (const FieldError& e) {
        throw CsvError(lines[i].line, std::string(columns[c]->name) + ": " + e.what());
      }
    }
    records.push_back(std::move(record));
  }
  return records;
}

template <typename R>
std::vector<Cell> cells_of(const RecordKind<R, R>& kind, const R& record) {
  std::vector<Cell> cells;
  for (const Field<R, R>& f : kind.fields) cells.push_back(f.measured(record));
  return cells;
}

}  // namespace ccscope::records
