// read_results: one entry point, five formats, all becoming LoadedRun.
//
//   ccscope CSV      header "schema,collective,...": fields parsed by fast-cpp-csv-parser
//   ccscope JSON     {"schema": "ccscope.bench/1", "metadata", "records"}
//   nccl-tests text  "# nccl-tests version ..." and the size/count/type/redop/root table
//   nccl-tests JSON  -J output: {"args", "config", "results"}
//   OSU              "# OSU MPI Allreduce Latency Test", "# Size  Avg Latency(us) ..."
//
// A figure the source does not hold stays std::nullopt. Anything malformed
// throws InputError("file:line: what is wrong; what to do").
#include "reader_support.h"

#include <string>

#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::reports {
using namespace detail;

LoadedRun read_results(const std::string& path) {
  return parse_results(path, read_input_file(path));
}

LoadedRun parse_results(const std::string& path, const std::string& raw) {
  const std::string head = trim(raw.substr(0, 4096));
  if (head.empty()) fail(at(path, 1), "empty file; rerun the benchmark");
  if (head[0] == '{') {
    json doc = parse_json(path, raw);
    if (!doc.is_object()) fail(at(path, 1), "a JSON document that is not an object");
    if (const json* schema = member(doc, "schema");
        schema && schema->is_string() && starts_with(schema->get<std::string>(), "ccscope.bench/"))
      return read_ccscope_json(path, doc);
    if (member(doc, "results") && (member(doc, "args") || member(doc, "config")))
      return read_nccl_tests_json(path, doc);
    fail(at(path, 1),
         "JSON that is neither ccscope's (schema ccscope.bench/N) nor nccl-tests' -J output");
  }
  if (starts_with(head, "schema,") || starts_with(head, "\"schema\","))
    return read_ccscope_csv(path, raw);
  if (head.find("# nccl-tests version") != std::string::npos ||
      head.find("# Collective test starting:") != std::string::npos ||
      head.find("out-of-place") != std::string::npos)
    return read_nccl_tests_text(path, raw);
  if (head.find("# OSU ") != std::string::npos) return read_osu(path, raw);
  fail(at(path, 1),
       "unknown format: expected ccscope CSV/JSON, nccl-tests text or -J JSON, or OSU output");
}

}  // namespace ccscope::reports
