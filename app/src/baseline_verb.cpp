// `ccscope baseline save NAME FILES... | list`: the baseline store (reports'
// baseline.h) from the command line.
#include <cstdio>

#include "ccscope/app/verbs.h"
#include "ccscope/reports/baseline.h"
#include "ccscope/reports/loaded_results.h"
#include "verb_support.h"

namespace ccscope::app {
using namespace ccscope::reports;

int baseline_verb(const std::vector<std::string>& args, const std::vector<std::string>&) {
  CLI::App app{
      "Keeps named baselines: copies of results files with the fingerprint of their setup.",
      "ccscope baseline"};
  app.require_subcommand(1);
  std::string dir, name;
  std::vector<std::string> files;
  CLI::App* save = app.add_subcommand("save", "save NAME FILES...: store results as baseline NAME");
  save->add_option("name", name, "baseline name")->required();
  save->add_option("files", files, "results files")->required();
  save->add_option("--dir", dir,
                   "baselines directory (default $CCSCOPE_BASELINE_DIR or ./baselines)");
  CLI::App* list = app.add_subcommand("list", "list the saved baselines");
  list->add_option("--dir", dir,
                   "baselines directory (default $CCSCOPE_BASELINE_DIR or ./baselines)");
  if (auto code = parse_flags(app, "baseline", args)) return *code;
  try {
    if (save->parsed()) {
      Baseline b = save_baseline(baseline_dir(dir), name, split_commas(files));
      std::printf("saved baseline '%s' (%zu files) in %s\n", b.name.c_str(), b.files.size(),
                  baseline_dir(dir).c_str());
      return 0;
    }
    for (const auto& b : list_baselines(baseline_dir(dir))) {
      const Fingerprint& f = b.fingerprint;
      std::printf("%-20s %s  %zu file(s)  %s, %s, NCCL %s, %d ranks, %d nodes, %d per node\n",
                  b.name.c_str(), b.saved_utc.c_str(), b.files.size(), f.backend.c_str(),
                  f.gpu_model.empty() ? "?" : f.gpu_model.c_str(),
                  f.nccl_version.empty() ? "-" : f.nccl_version.c_str(), f.ranks, f.nodes,
                  f.ranks_per_node);
    }
    return 0;
  } catch (const InputError& e) {
    return usage_error("baseline", e.what());
  }
}

}  // namespace ccscope::app
