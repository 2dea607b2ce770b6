#pragma once
// The checklist's verdicts in Prometheus' text exposition format, for
// node-exporter's textfile collector (write FILE.prom atomically into its
// --collector.textfile.directory): one gauge series per check.
#include <string>
#include <vector>

#include "ccscope/diag/check.h"

namespace ccscope::diag {

struct PrometheusRun {
  double finished_unix_s = 0;  // when the run ended (a gauge, for staleness alerts)
  int exit_code = 0;  // -1: still running, or the run was cut short before its end
  double seconds = 0;  // time to the verdict
};

// ccscope_diag_check_status{stage,check,host,rank,peer} 0 PASS, 1 WARN, 2 FAIL,
// -1 SKIP; ccscope_diag_check_measured / _expected{...,unit} where the check
// has a figure; ccscope_diag_stage_status{stage}; ccscope_diag_exit_code,
// ccscope_diag_duration_seconds, ccscope_diag_last_run_timestamp_seconds.
// Label values are escaped (\\, \", \n). Checks with the same labels (two
// findings of one kind on one host) become one series holding the worst status.
std::string prometheus_text(const std::vector<Check>& checks, const PrometheusRun& run);

}  // namespace ccscope::diag
