// ccscope diag's files (ccscope.diag_check/N as CSV, or the --json document),
// read through the record kind's table; errors become InputError("file:line:
// ...") or InputError("file: checks[3].status: ...").
#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/common/json_text.h"
#include "ccscope/reports/diag_results.h"
#include "ccscope/reports/user_files.h"
#include "reader_support.h"
#include "record_json.h"

namespace ccscope::reports {

// Named, not anonymous: reports is a unity build, and the training reader's
// helpers of the same purpose may share this translation unit.
namespace diag_reading {

using namespace detail;

constexpr std::string_view kSchemaPrefix = "ccscope.diag_check/";
// The columns the reader requires; with `schema` they also tell a CSV that
// holds no record.
const char* const kColumns[] = {"run_id", "stage", "check", "status"};

bool has_column(const std::vector<std::string>& header, const char* name) {
  return std::find(header.begin(), header.end(), name) != header.end();
}

// The first record's schema cell names the kind, or there is no record and the
// header has the kind's columns. Schema ids hold no character CSV quotes, so
// the first record is read as is.
bool is_diag_csv(std::string_view text) {
  const std::optional<CsvKindHead> head = csv_kind_head(text);
  if (!head) return false;
  if (head->first_schema.empty())
    return std::all_of(std::begin(kColumns), std::end(kColumns),
                       [&](const char* c) { return has_column(head->header_columns, c); });
  return std::string_view(head->first_schema).starts_with(kSchemaPrefix);
}

// A JSON object whose "schema" names the kind. The document is parsed only
// when the kind's name occurs in it (bench JSON files may be large).
bool is_diag_json(std::string_view text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || text[first] != '{') return false;
  if (text.find(kSchemaPrefix) == std::string_view::npos) return false;
  json doc;
  try {
    doc = parse_json_text(text);
  } catch (const JsonLimitError&) {
    return true;  // parse_json_file says why
  } catch (const json::exception&) {
    return false;
  }
  const json* schema = member(doc, kSchemaKey);
  return schema && schema->is_string() &&
         std::string_view(schema->get_ref<const std::string&>()).starts_with(kSchemaPrefix);
}

void require_columns(const std::string& path, const std::string& text) {
  const std::vector<records::CsvRecordLine> head =
      records::parse_csv(text.substr(0, text.find('\n')));
  for (const char* name : kColumns)
    if (head.empty() || !has_column(head.front().fields, name))
      fail(at(path, 1), std::string("the header has no '") + name +
                            "' column; is this a ccscope.diag_check file of ccscope diag?");
}

DiagResults parse_csv_file(const std::string& path, const std::string& text) {
  DiagResults results;
  try {
    require_columns(path, text);
    results.checks = records::read_diag_check_csv(text);
  } catch (const records::CsvError& e) {
    const std::string what = e.what();
    fail(at(path, e.line),
         what.starts_with("schema:") ? what : what + "; is the file complete and unedited?");
  }
  if (results.empty())
    fail(at(path, 1), "a ccscope.diag_check CSV header but no records; did the run finish?");
  return results;
}

DiagResults parse_json_file(const std::string& path, const std::string& text) {
  const json doc = parse_json(path, text);
  const records::DiagCheckKind& kind = records::diag_check_kind();
  if (!doc.is_object()) fail(at(path, 1), "a JSON document that is not an object");
  const json* schema = member(doc, kSchemaKey);
  if (!schema) fail(jwhere(path, kSchemaKey), "missing; is this ccscope diag --json output?");
  try {
    records::DiagCheckRecord unused;  // the schema field's setter checks the id
    kind.fields.front().set(unused, cell_of_json(*schema, kind.fields.front().type));
  } catch (const records::FieldError& e) {
    fail(jwhere(path, kSchemaKey), e.what());
  }
  bool complete = true;  // CSV files do not say either
  if (const json* c = member(doc, "complete")) {
    if (!c->is_boolean())
      fail(jwhere(path, "complete"), "expected true or false, found " + c->dump());
    complete = c->get<bool>();
  }
  const json* checks = member(doc, "checks");
  if (!checks || !checks->is_array())
    fail(jwhere(path, "checks"), "missing or not an array; is this ccscope diag --json output?");
  DiagResults results;
  for (size_t i = 0; i < checks->size(); ++i) {
    const std::string where = "checks[" + std::to_string(i) + "]";
    const json& object = (*checks)[i];
    if (!object.is_object())
      fail(jwhere(path, where), "expected an object, found " + object.dump());
    records::DiagCheckRecord record;
    for (const records::DiagCheckField& field : kind.fields) {
      if (field.name == kSchemaKey) continue;
      const json* value = member(object, std::string(field.name).c_str());
      const bool required =
          std::find(std::begin(kColumns), std::end(kColumns), field.name) != std::end(kColumns);
      if (!value && required)
        fail(jwhere(path, where + "." + std::string(field.name)),
             "missing; is this ccscope diag --json output?");
      if (!value) continue;
      try {
        field.set(record, cell_of_json(*value, field.type));
      } catch (const records::FieldError& e) {
        fail(jwhere(path, where + "." + std::string(field.name)), e.what());
      }
    }
    results.checks.push_back(std::move(record));
  }
  if (results.empty())
    fail(jwhere(path, "checks"), complete ? "no checks; was it written by ccscope diag?"
                                          : "no checks: the run stopped before its first check");
  if (!complete)
    for (const records::DiagCheckRecord& c : results.checks)
      if (std::find(results.incomplete_runs.begin(), results.incomplete_runs.end(), c.run_id) ==
          results.incomplete_runs.end())
        results.incomplete_runs.push_back(c.run_id);
  return results;
}

}  // namespace diag_reading

void DiagResults::append(DiagResults&& other) {
  checks.insert(checks.end(), std::make_move_iterator(other.checks.begin()),
                std::make_move_iterator(other.checks.end()));
  for (std::string& run : other.incomplete_runs)
    if (std::find(incomplete_runs.begin(), incomplete_runs.end(), run) == incomplete_runs.end())
      incomplete_runs.push_back(std::move(run));
}

bool is_diag_file(std::string_view text) {
  return diag_reading::is_diag_csv(text) || diag_reading::is_diag_json(text);
}

DiagResults read_diag_results(const std::string& path) {
  return parse_diag_results(path, read_input_file(path));
}

DiagResults parse_diag_results(const std::string& path, const std::string& text) {
  if (diag_reading::is_diag_csv(text)) return diag_reading::parse_csv_file(path, text);
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{')
    return diag_reading::parse_json_file(path, text);
  detail::fail(detail::at(path, 1),
               "not a diag file: the first record's schema is not ccscope.diag_check/N");
}

std::string diag_checks_json(const std::vector<records::DiagCheckRecord>& checks, bool complete) {
  const records::DiagCheckKind& kind = records::diag_check_kind();
  // ordered_json: the keys in the table's order, as the CSV columns.
  nlohmann::ordered_json doc;
  doc[kSchemaKey] = kind.schema_id();
  doc["complete"] = complete;
  doc["checks"] = nlohmann::ordered_json::array();
  for (const records::DiagCheckRecord& check : checks) {
    const std::vector<records::Cell> cells = records::diag_check_cells(check);
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (size_t i = 0; i < kind.fields.size(); ++i)
      if (kind.fields[i].name != kSchemaKey)
        object[std::string(kind.fields[i].name)] = json_of(cells[i], kind.fields[i].type);
    doc["checks"].push_back(std::move(object));
  }
  // Text from the cluster (hostnames, messages) may not be UTF-8: replaced, not thrown.
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace ccscope::reports
