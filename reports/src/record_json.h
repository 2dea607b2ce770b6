#pragma once
// Records as JSON, through the schema's table: a cell becomes the JSON value
// its field's type says (number, true/false, array, object), and back.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ccscope/records/schema.h"

namespace ccscope::reports {

// The document-level key the schema id is written under; a record does not
// repeat it.
inline constexpr const char* kSchemaKey = "schema";

nlohmann::json json_of(const records::Cell& cell, records::FieldType type);
// Throws records::FieldError when the value is not of the field's type.
records::Cell cell_of_json(const nlohmann::json& value, records::FieldType type);

// The fields of `scope` (records::FieldScope::kRecord: one record object;
// kRun: the metadata object) of a row's cells. Every field has its key: an
// absent one is "", [], {} or null by its type (null reads back as absent).
template <typename Kind>
nlohmann::json json_object_of(const Kind& kind, const std::vector<records::Cell>& cells,
                              records::FieldScope scope) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t i = 0; i < kind.fields.size() && i < cells.size(); ++i) {
    const auto& field = kind.fields[i];
    if (field.scope != scope || field.name == kSchemaKey) continue;
    out[std::string(field.name)] = json_of(cells[i], field.type);
  }
  return out;
}

}  // namespace ccscope::reports
