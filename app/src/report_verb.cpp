// `ccscope report RESULTS... [-o FILE] [--markdown] [--title T]`: read the
// files, render HTML or markdown (reports' renderers), write it.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/reports/html_report.h"
#include "ccscope/reports/loaded_results.h"
#include "ccscope/reports/markdown_report.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::app {
using namespace ccscope::reports;
namespace {

int usage_error(const std::string& message) {
  std::fprintf(stderr, "ccscope report: error: %s\n", message.c_str());
  return 2;
}

}  // namespace

int report_verb(const std::vector<std::string>& args, const std::vector<std::string>&) {
  CLI::App app{
      "Render results files (ccscope CSV/JSON, nccl-tests text or -J JSON, OSU output) as one "
      "self-contained HTML page with busbw charts, or as markdown tables.",
      "ccscope report"};
  std::vector<std::string> files;
  std::string output;
  bool markdown = false;
  ReportOptions options;
  app.add_option("results", files, "results files, one run each (overlaid in that order)")
      ->required();
  app.add_option("-o,--output", output, "write to FILE (default: standard output)");
  app.add_flag("--markdown", markdown, "markdown tables instead of HTML");
  app.add_option("--title", options.title, "page title")->capture_default_str();
  // (Export flags, e.g. --csv/--json of the loaded records, go here: they
  // write `runs` below through reports' writers.)
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 wants them reversed
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    return usage_error(std::string(e.what()) + " (ccscope report --help)");
  }

  std::vector<LoadedRun> runs;
  std::optional<OutputTarget> target;
  try {
    if (!output.empty()) {
      std::vector<std::pair<std::string, std::string>> uses{{"-o", output}};
      for (const std::string& file : files) uses.emplace_back("results file", file);
      refuse_same_file(uses);
      target = resolve_output(output);  // before reading: a bad -o fails at once
    }
    for (const std::string& file : files) runs.push_back(read_results(file));
  } catch (const InputError& e) {
    return usage_error(e.what());
  }
  const std::string text =
      markdown ? render_markdown_report(runs, options) : render_html_report(runs, options);
  if (!target) {
    std::cout << text << std::flush;
    return std::cout ? 0 : usage_error("cannot write to standard output");
  }
  try {
    write_whole_file(*target, text);
  } catch (const std::exception& e) {
    return usage_error(std::string(e.what()) + "; check the directory and permissions");
  }
  return 0;
}

}  // namespace ccscope::app
