#pragma once
// One check of the bring-up checklist and its verdict. Every part of diag (the stages, the
// log analysis, the localisation, the clock and environment checks) returns these. The
// check is the diag record's own (records::DiagCheck): the record adds only the run id and
// the time, so what diag judges and what --csv/--json write are one struct.
#include <vector>

#include "ccscope/records/diag_record.h"

namespace ccscope::diag {

using Status = records::DiagStatus;
using Stage = records::DiagStage;
using Check = records::DiagCheck;
using records::stage_name;
using records::status_name;
using records::status_value;

// The worst status of `checks` (SKIP counts as PASS); PASS when empty.
Status worst_status(const std::vector<Check>& checks);

}  // namespace ccscope::diag
