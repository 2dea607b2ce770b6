// The training probe's CSV files (ccscope.train_run/N, ccscope.train_step/N),
// read through the records' tables; errors become InputError("file:line: ...").
#include <algorithm>
#include <iterator>
#include <string>
#include <string_view>

#include "ccscope/reports/training_results.h"
#include "ccscope/reports/user_files.h"
#include "reader_support.h"

namespace ccscope::reports {
using namespace detail;

namespace {

constexpr std::string_view kRunSchema = "ccscope.train_run/";
constexpr std::string_view kStepSchema = "ccscope.train_step/";

// The next line of `text` from `pos` (without its line break); pos moves past it.
std::string_view next_line(std::string_view text, size_t& pos) {
  const size_t end = std::min(text.find('\n', pos), text.size());
  std::string_view line = text.substr(pos, end - pos);
  pos = end + 1;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// The first record's schema cell ("" when there is none). Header names and
// schema ids hold no character CSV quotes, so the first lines are read as is.
std::string_view first_schema(std::string_view text) {
  size_t pos = 0;
  std::string_view header;
  while (pos < text.size() && (header = next_line(text, pos)).empty()) {
  }
  if (!(header.starts_with("schema,") || header.starts_with("\"schema\","))) return {};
  std::string_view row;
  while (pos < text.size() && (row = next_line(text, pos)).empty()) {
  }
  std::string_view cell = row.substr(0, row.find(','));
  if (cell.size() >= 2 && cell.front() == '"' && cell.back() == '"')
    cell = cell.substr(1, cell.size() - 2);
  return cell;
}

void require_columns(const std::string& path, const std::string& text,
                     std::initializer_list<const char*> names, std::string_view kind) {
  const std::vector<records::CsvRecordLine> head =
      records::parse_csv(text.substr(0, text.find('\n')));
  for (const char* name : names)
    if (head.empty() || std::find(head.front().fields.begin(), head.front().fields.end(), name) ==
                            head.front().fields.end())
      fail(at(path, 1), std::string("the header has no '") + name + "' column; is this a " +
                            std::string(kind) + " file of ccscope train?");
}

}  // namespace

void TrainingResults::append(TrainingResults&& other) {
  runs.insert(runs.end(), std::make_move_iterator(other.runs.begin()),
              std::make_move_iterator(other.runs.end()));
  steps.insert(steps.end(), std::make_move_iterator(other.steps.begin()),
               std::make_move_iterator(other.steps.end()));
}

bool is_training_csv(std::string_view text) {
  const std::string_view schema = first_schema(text);
  return schema.starts_with(kRunSchema) || schema.starts_with(kStepSchema);
}

TrainingResults read_training_results(const std::string& path) {
  return parse_training_results(path, read_input_file(path));
}

TrainingResults parse_training_results(const std::string& path, const std::string& text) {
  const std::string_view schema = first_schema(text);
  const bool run_file = schema.starts_with(kRunSchema);
  if (!run_file && !schema.starts_with(kStepSchema))
    fail(at(path, 1),
         "not a training file: the first record's schema is not ccscope.train_run/N "
         "or ccscope.train_step/N");
  TrainingResults results;
  try {
    if (run_file) {
      require_columns(path, text, {"run_id", "strategy", "ranks", "step_median_s"},
                      "ccscope.train_run");
      results.runs = records::read_train_run_csv(text);
    } else {
      require_columns(path, text, {"run_id", "step", "loss"}, "ccscope.train_step");
      results.steps = records::read_train_step_csv(text);
    }
  } catch (const records::CsvError& e) {
    const std::string what = e.what();
    fail(at(path, e.line),
         what.starts_with("schema:") ? what : what + "; is the file complete and unedited?");
  }
  if (results.empty()) fail(at(path, 1), "a training CSV header but no records");
  return results;
}

}  // namespace ccscope::reports
