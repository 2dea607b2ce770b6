#pragma once
// Named baselines: copies of results files under DIR/NAME/ with a JSON sidecar
// DIR/NAME/baseline.json holding the fingerprint of the machine and run, so
// that `compare --baseline NAME` refuses to compare unlike with unlike.
#include <string>
#include <vector>

#include "ccscope/reports/loaded_results.h"

namespace ccscope::reports {

struct Fingerprint {
  std::string gpu_model;  // distinct device names, ";"-joined ("cpu" for MPI runs)
  std::string driver;     // NVIDIA driver version; "" when unknown (MPI runs, other tools)
  std::string nccl_version;
  std::string backend;
  int ranks = 0, nodes = 0, ranks_per_node = 0;  // 0 = unknown
};

Fingerprint fingerprint_of(const LoadedRun& run);
// "" when equal; else e.g. "ranks 4 vs 2; gpu_model 'NVIDIA H200' vs 'cpu'".
// A field unknown on either side does not count as a difference.
std::string fingerprint_difference(const Fingerprint& baseline, const Fingerprint& current);

// --dir, else $CCSCOPE_BASELINE_DIR, else ./baselines.
std::string baseline_dir(const std::string& option);

struct Baseline {
  std::string name;
  std::vector<std::string> files;  // paths of the stored copies
  Fingerprint fingerprint;
  std::string saved_utc;
};

// Reads every file (InputError when one is bad), copies them and writes the
// sidecar. Throws InputError for a bad name or an existing baseline.
Baseline save_baseline(const std::string& dir, const std::string& name,
                       const std::vector<std::string>& files);
Baseline load_baseline(const std::string& dir, const std::string& name);
std::vector<Baseline> list_baselines(const std::string& dir);

}  // namespace ccscope::reports
