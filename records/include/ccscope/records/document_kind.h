#pragma once
// The JSON documents ccscope writes whole rather than record by record: the topology
// (`topo --json`, "ccscope.topo/1"), the NCCL log analysis (`diag nccl-log --json`,
// "ccscope.nccl_log/1") and the advice (`advise --json`, "ccscope.advice/1"). Each kind is one
// table of its keys, as paths from the document's root ("nodes[].gpus[].index": `[]` is an
// array's elements, `*` a key that is data, such as a source's name). docs/records.md is
// printed from the tables, and a test beside each writer checks with
// document_key_differences that what it writes is exactly what its table says.
#include <string>
#include <string_view>
#include <vector>

namespace ccscope::records {

enum class JsonType {
  kString,
  kInteger,
  kNumber,  // an integer is a number too
  kBoolean,
  kStrings,    // an array of strings
  kIntegers,   // an array of integers
  kObjects,    // an array of objects: their keys are PATH[].KEY
  kObject,     // its keys are PATH.KEY
  kTextMap,    // an object whose keys are data (names), each value a string
  kObjectMap,  // an object whose keys are data, each value an object: keys PATH.*.KEY
};
std::string_view name(JsonType type);

struct DocumentKey {
  std::string path;
  JsonType type;
  bool nullable;  // null where the figure or text is unknown
  std::string meaning;
};

struct DocumentKind {
  std::string_view schema;  // "ccscope.topo"
  int version;
  std::string_view written_by;
  std::vector<DocumentKey> keys;

  std::string schema_id() const { return std::string(schema) + "/" + std::to_string(version); }
  const DocumentKey* find(std::string_view path) const;
};

const DocumentKind& topology_document_kind();
const DocumentKind& nccl_log_document_kind();
const DocumentKind& advice_document_kind();
// Every document kind, in the order docs/records.md shows them.
std::vector<const DocumentKind*> document_kinds();

// What `documents` (JSON texts of one kind) hold against the kind's table, one line each:
// a key written that the table lacks, a value of a type the table does not give its key
// (or null where it allows none), and a key of the table that none of them wrote. Empty
// when they agree. A text that is not JSON is a difference too.
std::vector<std::string> document_key_differences(const DocumentKind& kind,
                                                  const std::vector<std::string>& documents);

}  // namespace ccscope::records
