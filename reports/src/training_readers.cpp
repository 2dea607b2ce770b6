// The training probe's CSV files (ccscope.train_run/N, ccscope.train_step/N,
// ccscope.train_rank/N), read through the records' tables; errors become
// InputError("file:line: ...").
#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/reports/training_results.h"
#include "ccscope/reports/user_files.h"
#include "reader_support.h"

namespace ccscope::reports {
using namespace detail;

namespace {

// The training kinds: schema id up to the version, and the columns the reader
// requires (with `schema`, they also tell a file that holds no record).
struct TrainingKind {
  std::string_view schema;  // "ccscope.train_run/"
  std::vector<const char*> columns;
};
const TrainingKind kRun{"ccscope.train_run/", {"run_id", "strategy", "ranks", "step_median_s"}};
const TrainingKind kStep{"ccscope.train_step/", {"run_id", "step", "loss"}};
const TrainingKind kRank{"ccscope.train_rank/", {"run_id", "strategy", "rank", "stage"}};

// The kind's name without the version: "ccscope.train_run".
std::string kind_name(const TrainingKind& kind) {
  return std::string(kind.schema.substr(0, kind.schema.size() - 1));
}

// The next line of `text` from `pos` (without its line break); pos moves past it.
bool has_columns(const std::vector<std::string>& header, const std::vector<const char*>& names) {
  return std::all_of(names.begin(), names.end(), [&](const char* name) {
    return std::find(header.begin(), header.end(), name) != header.end();
  });
}

// The file's training kind, or none: from the first record's schema cell, or,
// when the header is followed by no record, from the header's columns. Schema
// ids hold no character CSV quotes, so the first record is read as is.
const TrainingKind* training_kind(std::string_view text) {
  const std::optional<CsvKindHead> head = csv_kind_head(text);
  if (!head) return nullptr;
  if (head->first_schema.empty()) {
    for (const TrainingKind* kind : {&kRank, &kRun, &kStep})
      if (has_columns(head->header_columns, kind->columns)) return kind;
    return nullptr;
  }
  for (const TrainingKind* kind : {&kRun, &kStep, &kRank})
    if (std::string_view(head->first_schema).starts_with(kind->schema)) return kind;
  return nullptr;
}

void require_columns(const std::string& path, const std::string& text, const TrainingKind& kind) {
  const std::vector<records::CsvRecordLine> head =
      records::parse_csv(text.substr(0, text.find('\n')));
  for (const char* name : kind.columns)
    if (head.empty() || std::find(head.front().fields.begin(), head.front().fields.end(), name) ==
                            head.front().fields.end())
      fail(at(path, 1), std::string("the header has no '") + name + "' column; is this a " +
                            kind_name(kind) + " file of ccscope train?");
}

}  // namespace

void TrainingResults::append(TrainingResults&& other) {
  runs.insert(runs.end(), std::make_move_iterator(other.runs.begin()),
              std::make_move_iterator(other.runs.end()));
  steps.insert(steps.end(), std::make_move_iterator(other.steps.begin()),
               std::make_move_iterator(other.steps.end()));
  ranks.insert(ranks.end(), std::make_move_iterator(other.ranks.begin()),
               std::make_move_iterator(other.ranks.end()));
}

bool is_training_csv(std::string_view text) { return training_kind(text) != nullptr; }

TrainingResults read_training_results(const std::string& path) {
  return parse_training_results(path, read_input_file(path));
}

TrainingResults parse_training_results(const std::string& path, const std::string& text) {
  const TrainingKind* kind = training_kind(text);
  if (!kind)
    fail(at(path, 1),
         "not a training file: the first record's schema is not ccscope.train_run/N, "
         "ccscope.train_step/N or ccscope.train_rank/N");
  TrainingResults results;
  try {
    require_columns(path, text, *kind);
    if (kind == &kRun)
      results.runs = records::read_train_run_csv(text);
    else if (kind == &kStep)
      results.steps = records::read_train_step_csv(text);
    else
      results.ranks = records::read_train_rank_csv(text);
  } catch (const records::CsvError& e) {
    const std::string what = e.what();
    fail(at(path, e.line),
         what.starts_with("schema:") ? what : what + "; is the file complete and unedited?");
  }
  if (results.empty())
    fail(at(path, 1), "a " + kind_name(*kind) + " CSV header but no records; did the run finish?");
  return results;
}

}  // namespace ccscope::reports
