// document_key_differences: a document's keys against its kind's table.
#include <nlohmann/json.hpp>
#include <set>

#include "ccscope/records/document_kind.h"

namespace ccscope::records {
namespace {

using nlohmann::json;

std::string json_kind(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

bool all_of(const json& v, bool (json::*is)() const noexcept) {
  for (const json& item : v)
    if (!(item.*is)()) return false;
  return true;
}

bool fits(const json& v, JsonType type) {
  switch (type) {
    case JsonType::kString:
      return v.is_string();
    case JsonType::kInteger:
      return v.is_number_integer();
    case JsonType::kNumber:
      return v.is_number();
    case JsonType::kBoolean:
      return v.is_boolean();
    case JsonType::kStrings:
      return v.is_array() && all_of(v, &json::is_string);
    case JsonType::kIntegers:
      return v.is_array() && all_of(v, &json::is_number_integer);
    case JsonType::kObjects:
      return v.is_array() && all_of(v, &json::is_object);
    case JsonType::kObject:
      return v.is_object();
    case JsonType::kTextMap:
      return v.is_object() && all_of(v, &json::is_string);
    case JsonType::kObjectMap:
      return v.is_object() && all_of(v, &json::is_object);
  }
  return false;
}

class KeyWalk {
 public:
  explicit KeyWalk(const DocumentKind& kind) : kind_(kind) {}

  void members(const json& object, const std::string& prefix) {
    for (const auto& [key, value] : object.items()) this->value(value, prefix + key);
  }

  void value(const json& v, const std::string& path) {
    const DocumentKey* key = kind_.find(path);
    if (!key) return problem(path + ": written, but not in the table");
    seen_.insert(path);
    if (v.is_null()) {
      if (!key->nullable) problem(path + ": null, which the table does not allow");
      return;
    }
    if (!fits(v, key->type))
      return problem(path + ": written as " + json_kind(v) + ", the table says " +
                     std::string(name(key->type)));
    if (key->type == JsonType::kObjects)
      for (const json& item : v) members(item, path + "[].");
    else if (key->type == JsonType::kObject)
      members(v, path + ".");
    else if (key->type == JsonType::kObjectMap)
      for (const json& item : v) members(item, path + ".*.");
  }

  std::vector<std::string> finish() {
    for (const DocumentKey& key : kind_.keys)
      if (!seen_.count(key.path)) problem(key.path + ": in the table, written by no document");
    return problems_;
  }

  void problem(const std::string& text) {
    if (reported_.insert(text).second) problems_.push_back(text);
  }

 private:
  const DocumentKind& kind_;
  std::set<std::string> seen_, reported_;
  std::vector<std::string> problems_;
};

}  // namespace

std::string_view name(JsonType type) {
  switch (type) {
    case JsonType::kString:
      return "string";
    case JsonType::kInteger:
      return "integer";
    case JsonType::kNumber:
      return "number";
    case JsonType::kBoolean:
      return "boolean";
    case JsonType::kStrings:
      return "array of strings";
    case JsonType::kIntegers:
      return "array of integers";
    case JsonType::kObjects:
      return "array of objects";
    case JsonType::kObject:
      return "object";
    case JsonType::kTextMap:
      return "object: name -> string";
    case JsonType::kObjectMap:
      return "object: name -> object";
  }
  return "?";
}

const DocumentKey* DocumentKind::find(std::string_view path) const {
  for (const DocumentKey& key : keys)
    if (key.path == path) return &key;
  return nullptr;
}

std::vector<std::string> document_key_differences(const DocumentKind& kind,
                                                  const std::vector<std::string>& documents) {
  KeyWalk walk(kind);
  for (size_t i = 0; i < documents.size(); ++i) {
    json doc;
    try {
      doc = json::parse(documents[i]);
    } catch (const json::exception& e) {
      walk.problem("document " + std::to_string(i + 1) + ": not JSON: " + e.what());
      continue;
    }
    if (!doc.is_object()) {
      walk.problem("document " + std::to_string(i + 1) + ": not a JSON object");
      continue;
    }
    if (doc.value("schema", "") != kind.schema_id())
      walk.problem("document " + std::to_string(i + 1) + ": schema is not " + kind.schema_id());
    walk.members(doc, "");
  }
  return walk.finish();
}

}  // namespace ccscope::records
