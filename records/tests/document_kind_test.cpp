// document_key_differences: what a JSON document writes against its kind's table.
#include "ccscope/records/document_kind.h"

#include <gtest/gtest.h>

#include <set>

namespace ccscope::records {
namespace {

DocumentKind small_kind() {
  return {"t.doc",
          1,
          "a test",
          {{"schema", JsonType::kString, false, ""},
           {"n", JsonType::kNumber, false, ""},
           {"i", JsonType::kInteger, true, ""},
           {"items", JsonType::kObjects, false, ""},
           {"items[].name", JsonType::kString, false, ""},
           {"items[].tags", JsonType::kStrings, false, ""},
           {"env", JsonType::kTextMap, false, ""},
           {"sources", JsonType::kObjectMap, false, ""},
           {"sources.*.read", JsonType::kBoolean, false, ""},
           {"sub", JsonType::kObject, false, ""},
           {"sub.ids", JsonType::kIntegers, false, ""}}};
}

const char* kGood = R"({"schema": "t.doc/1", "n": 2, "i": null,
  "items": [{"name": "a", "tags": ["x"]}, {"name": "b", "tags": []}],
  "env": {"NCCL_X": "1"}, "sources": {"hwloc": {"read": true}}, "sub": {"ids": [1, 2]}})";

std::vector<std::string> differences(const std::vector<std::string>& documents) {
  return document_key_differences(small_kind(), documents);
}

TEST(DocumentKind, ADocumentThatMatchesItsTableHasNoDifference) {
  EXPECT_EQ(differences({kGood}), std::vector<std::string>{});
}

TEST(DocumentKind, EachDisagreementIsOneLineNamingTheKey) {
  std::string extra = kGood;
  extra.insert(extra.rfind('}'), R"(, "new_key": 1)");
  EXPECT_EQ(differences({extra}),
            std::vector<std::string>{"new_key: written, but not in the table"});

  std::string nested = kGood;
  nested.replace(nested.find(R"("read": true)"), 12, R"("read": true, "when": 3)");
  EXPECT_EQ(differences({nested}),
            std::vector<std::string>{"sources.*.when: written, but not in the table"});

  std::string typed = kGood;
  typed.replace(typed.find(R"("name": "b")"), 11, R"("name": 7)");
  EXPECT_EQ(differences({typed}),
            std::vector<std::string>{"items[].name: written as an integer, the table says string"});

  std::string null_n = kGood;
  null_n.replace(null_n.find(R"("n": 2)"), 6, R"("n": null)");
  EXPECT_EQ(differences({null_n}),
            std::vector<std::string>{"n: null, which the table does not allow"});

  std::string list = kGood;
  list.replace(list.find("[1, 2]"), 6, R"([1, "2"])");
  EXPECT_EQ(differences({list}),
            std::vector<std::string>{"sub.ids: written as an array, the table says array of "
                                     "integers"});
}

TEST(DocumentKind, AKeyOfTheTableNoDocumentWroteIsADifference) {
  const std::string no_items = R"({"schema": "t.doc/1", "n": 2.5, "i": 1, "items": [],
    "env": {}, "sources": {}, "sub": {"ids": []}})";
  const std::set<std::string> got = [&] {
    const auto d = differences({no_items});
    return std::set<std::string>(d.begin(), d.end());
  }();
  EXPECT_EQ(got, (std::set<std::string>{"items[].name: in the table, written by no document",
                                        "items[].tags: in the table, written by no document",
                                        "sources.*.read: in the table, written by no document"}));
  // Keys are counted over every document given.
  EXPECT_EQ(differences({no_items, kGood}), std::vector<std::string>{});
}

TEST(DocumentKind, NotJsonOrAnotherSchemaIsADifference) {
  EXPECT_EQ(differences({"{"}).front().rfind("document 1: not JSON: ", 0), 0u);
  std::string other = kGood;
  other.replace(other.find("t.doc/1"), 7, "t.doc/2");
  EXPECT_EQ(differences({other}), std::vector<std::string>{"document 1: schema is not t.doc/1"});
}

// Each table's paths are unique, and a key inside an object or array has its parent there.
TEST(DocumentKind, EveryTableHasUniquePathsUnderDescribedParents) {
  for (const DocumentKind* kind : document_kinds()) {
    std::set<std::string> paths;
    for (const DocumentKey& key : kind->keys) {
      EXPECT_TRUE(paths.insert(key.path).second) << kind->schema_id() << ": " << key.path;
      EXPECT_FALSE(key.meaning.empty()) << kind->schema_id() << ": " << key.path;
      const size_t dot = key.path.rfind('.');
      if (dot == std::string::npos) continue;
      std::string parent = key.path.substr(0, dot);
      JsonType want = JsonType::kObject;
      if (parent.size() > 2 && parent.compare(parent.size() - 2, 2, "[]") == 0) {
        parent.resize(parent.size() - 2);
        want = JsonType::kObjects;
      } else if (parent.size() > 2 && parent.compare(parent.size() - 2, 2, ".*") == 0) {
        parent.resize(parent.size() - 2);
        want = JsonType::kObjectMap;
      }
      const DocumentKey* up = kind->find(parent);
      ASSERT_NE(up, nullptr) << kind->schema_id() << ": " << key.path;
      EXPECT_EQ(up->type, want) << kind->schema_id() << ": " << key.path;
    }
  }
}

}  // namespace
}  // namespace ccscope::records
