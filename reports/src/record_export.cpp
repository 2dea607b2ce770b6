#include "ccscope/reports/record_export.h"

#include <nlohmann/json.hpp>

#include "ccscope/records/schema.h"
#include "record_json.h"

namespace ccscope::reports {

using records::bench_kind;
using records::LoadedBenchRow;

std::string records_csv(const std::vector<LoadedRun>& runs) {
  std::string text = records::csv_line(records::csv_columns(bench_kind()));
  for (const LoadedRun& run : runs)
    for (const LoadedRecord& record : run.records)
      text += records::csv_row(bench_kind(), records::bench_cells(LoadedBenchRow{record, run.metadata}));
  return text;
}

std::string records_json(const std::vector<LoadedRun>& runs) {
  using nlohmann::json;
  const LoadedRun* first = nullptr;
  json list = json::array();
  json metadata;
  for (const LoadedRun& run : runs) {
    const json run_fields =
        json_object_of(bench_kind(), records::bench_cells(LoadedBenchRow{{}, run.metadata}),
                       records::FieldScope::kRun);
    if (!first) {
      first = &run;
      metadata = run_fields;
    } else if (run_fields != metadata) {
      throw InputError(first->path + " and " + run.path +
                       " come from different runs, and a JSON document holds one run's "
                       "metadata: write --csv (each row carries its run's), or one file per run");
    }
    for (const LoadedRecord& record : run.records)
      list.push_back(json_object_of(bench_kind(),
                                    records::bench_cells(LoadedBenchRow{record, run.metadata}),
                                    records::FieldScope::kRecord));
  }
  json doc{{kSchemaKey, bench_kind().schema_id()},
           {"complete", true},
           {"metadata", metadata.is_null() ? json::object() : metadata},
           {"records", list}};
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace ccscope::reports
