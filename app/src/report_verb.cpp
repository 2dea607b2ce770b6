// `ccscope report RESULTS... [-o FILE] [--markdown] [--title T] [--csv F]
// [--json F]` and `ccscope report --schema`: read the files, render HTML or
// markdown (reports' renderers), write it; or write the records read in
// ccscope's schema (the import path); or print the schema's table.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/records/schema.h"
#include "ccscope/reports/diag_results.h"
#include "ccscope/reports/html_report.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/markdown_report.h"
#include "ccscope/reports/record_export.h"
#include "ccscope/reports/training_results.h"
#include "ccscope/reports/user_files.h"
#include "verb_support.h"

namespace ccscope::app {
using namespace ccscope::reports;
namespace {

int usage_error(const std::string& message) {
  std::fprintf(stderr, "ccscope report: error: %s\n", message.c_str());
  return 2;
}

// The bench record's fields, from the schema's table, as a markdown table.
std::string schema_table() {
  const auto& kind = records::bench_kind();
  std::string out = "# " + kind.schema_id() +
                    ": one row (CSV) / record (JSON) per collective, size and in-place variant\n"
                    "# run fields repeat on every CSV row and sit once under JSON's metadata\n\n"
                    "| field | unit | type | scope | since | in CSV | meaning |\n"
                    "|---|---|---|---|---|---|---|\n";
  for (const auto& f : kind.fields)
    out += "| " + std::string(f.name) + " | " + std::string(f.unit) + " | " +
           std::string(records::name(f.type)) + " | " +
           (f.scope == records::FieldScope::kRun ? "run" : "record") + " | " +
           std::to_string(f.since) + " | " + (f.in_csv ? "yes" : "JSON only") + " | " +
           std::string(f.meaning) +
           (f.absent.empty() ? "" : " (older files: " + std::string(f.absent) + ")") + " |\n";
  return out;
}

// "-" is standard output.
int write_output(const std::string& path, const std::string& text, const OutputTarget* target) {
  if (path == "-") {
    std::cout << text << std::flush;
    return std::cout ? 0 : write_error("report", "cannot write to standard output");
  }
  try {
    write_whole_file(*target, text);
  } catch (const std::exception& e) {
    return write_error("report", e.what());
  }
  return 0;
}

}  // namespace

int report_verb(const std::vector<std::string>& args, const std::vector<std::string>&) {
  CLI::App app{
      "Render results files (ccscope CSV/JSON, nccl-tests text or -J JSON, OSU output) as one "
      "self-contained HTML page with busbw charts, or as markdown tables. ccscope train's CSVs "
      "(ccscope.train_run, ccscope.train_step, ccscope.train_rank) add a Training section; ccscope "
      "diag's CSV or JSON (ccscope.diag_check) a Findings section.",
      "ccscope report"};
  std::vector<std::string> files;
  std::string output;
  bool markdown = false;
  ReportOptions options;
  std::string csv_output, json_output;
  bool schema = false;
  app.add_option("results", files, "results files, one run each (overlaid in that order)");
  add_output_option(app, "-o,--output", output, "write to FILE (default: standard output)");
  app.add_flag("--markdown", markdown, "markdown tables instead of HTML");
  app.add_option("--title", options.title, "page title")->capture_default_str();
  add_output_option(app, "--csv", csv_output,
                    "also write every record read, from any format, as ccscope CSV (- = stdout); "
                    "alone, only that")
      ->type_name("FILE");
  add_output_option(app, "--json", json_output,
                    "the same as one ccscope JSON document (the files must be of one run)")
      ->type_name("FILE");
  app.add_flag("--schema", schema, "print the fields of ccscope's records (the schema's table)");
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 wants them reversed
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    return usage_error(std::string(e.what()) + " (ccscope report --help)");
  }

  if (schema) {
    std::cout << schema_table() << std::flush;
    return std::cout ? 0 : usage_error("cannot write to standard output");
  }
  if (files.empty()) return usage_error("give one or more results files (ccscope report --help)");
  // Exports alone (no -o, no --markdown) write only the exports.
  const bool exporting = !csv_output.empty() || !json_output.empty();
  const bool rendering = !exporting || !output.empty() || markdown;
  if (rendering && output.empty()) output = "-";
  std::vector<std::pair<std::string, std::string>> outputs;
  if (rendering) outputs.emplace_back("-o", output);
  if (!csv_output.empty()) outputs.emplace_back("--csv", csv_output);
  if (!json_output.empty()) outputs.emplace_back("--json", json_output);

  std::vector<LoadedRun> runs;
  TrainingResults training;  // ccscope train's CSVs (train_run, train_step, train_rank)
  std::string training_file;
  DiagResults diag;  // ccscope diag's CSV or JSON (diag_check)
  std::string diag_file;
  std::vector<std::optional<OutputTarget>> targets;
  try {
    if (std::count_if(outputs.begin(), outputs.end(),
                      [](const auto& u) { return u.second == "-"; }) > 1)
      return usage_error("only one output can be standard output (-)");
    // Before reading: a bad output path fails at once.
    std::vector<std::pair<std::string, std::string>> inputs;
    for (const std::string& file : files) inputs.emplace_back("results file", file);
    const std::vector<OutputTarget> resolved = resolve_outputs(outputs, inputs);
    for (size_t i = 0; i < outputs.size(); ++i)
      targets.push_back(outputs[i].second == "-" ? std::nullopt
                                                 : std::optional<OutputTarget>(resolved[i]));
    for (const std::string& file : files) {
      const std::string text = read_input_file(file);
      if (is_diag_file(text)) {
        diag.append(parse_diag_results(file, text));
        if (diag_file.empty()) diag_file = file;
        continue;
      }
      if (!is_training_csv(text)) {
        runs.push_back(parse_results(file, text));
        continue;
      }
      training.append(parse_training_results(file, text));
      if (training_file.empty()) training_file = file;
    }
  } catch (const InputError& e) {
    return usage_error(e.what());
  }
  if (exporting && !training.empty())
    return usage_error("--csv and --json write bench records; " + printable(training_file) +
                       " is a training file (render it with -o or --markdown)");
  if (exporting && !diag.empty())
    return usage_error("--csv and --json write bench records; " + printable(diag_file) +
                       " is a diag file (render it with -o or --markdown)");
  // What a reader skipped or converted: the user sees it, on stderr.
  for (const LoadedRun& run : runs)
    for (const std::string& note : run.notes)
      std::fprintf(stderr, "ccscope report: note: %s: %s\n", printable(run.path).c_str(),
                   printable(note).c_str());
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string text;
    try {
      if (outputs[i].first == "--csv")
        text = records_csv(runs);
      else if (outputs[i].first == "--json")
        text = records_json(runs);
      else
        text = markdown ? render_markdown_report(runs, training, diag, options)
                        : render_html_report(runs, training, diag, options);
    } catch (const InputError& e) {
      return usage_error(e.what());
    }
    const OutputTarget* target = targets[i] ? &*targets[i] : nullptr;
    if (const int status = write_output(outputs[i].second, text, target); status != 0)
      return status;
  }
  return 0;
}

}  // namespace ccscope::app
