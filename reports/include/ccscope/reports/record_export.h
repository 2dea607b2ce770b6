#pragma once
// Records read from any format, written in ccscope's own schema: the import
// path for other tools' files (`ccscope report FILE... --csv OUT`), and how a
// user sees what ccscope understood of a file.
#include <string>
#include <vector>

#include "ccscope/reports/loaded_results.h"

namespace ccscope::reports {

// Every record of every run as ccscope.bench CSV text; each row carries its
// run's fields (as `bench --csv` rows do), so runs of several files mix.
std::string records_csv(const std::vector<LoadedRun>& runs);
// One ccscope.bench JSON document. It holds one run's metadata: runs whose
// metadata differ throw InputError (write CSV instead).
std::string records_json(const std::vector<LoadedRun>& runs);

}  // namespace ccscope::reports
