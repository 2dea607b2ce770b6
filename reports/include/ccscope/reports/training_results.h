#pragma once
// The training probe's files read back for `ccscope report`: CSVs of
// ccscope.train_run/N (one row per run), ccscope.train_step/N (one row per
// optimizer step) and ccscope.train_rank/N (one row per rank of a
// model-parallel run), see records/training_record.h. Bench files go through
// read_results; a file is a training file when its first record's schema
// column names a training kind, or, with no record, when its header has that
// kind's columns (is_training_csv).
#include <string>
#include <string_view>
#include <vector>

#include "ccscope/records/training_record.h"
#include "ccscope/reports/loaded_results.h"  // InputError

namespace ccscope::reports {

// Every training record of the files given, in file and row order.
struct TrainingResults {
  std::vector<records::TrainRunRecord> runs;
  std::vector<records::TrainStepRecord> steps;
  std::vector<records::TrainRankRecord> ranks;

  bool empty() const { return runs.empty() && steps.empty() && ranks.empty(); }
  void append(TrainingResults&& other);
};

// True when `text` is CSV with a `schema` first column whose first record says
// ccscope.train_run/N, ccscope.train_step/N or ccscope.train_rank/N (any N:
// the reader judges it), or that has no record and a header with the columns
// the training reader requires of one of them (it then says "no records").
bool is_training_csv(std::string_view text);

// Reads one training CSV. Throws InputError naming the file and line for a
// malformed cell, a truncated row, a newer schema version, a missing column,
// or no records.
TrainingResults read_training_results(const std::string& path);
// The same for text already read; `path` names it in messages.
TrainingResults parse_training_results(const std::string& path, const std::string& text);

}  // namespace ccscope::reports
