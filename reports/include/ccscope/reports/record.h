#pragma once
// The records reporters write: defined in records/ (bench_record.h), with the
// schema id of the bench kind.
#include "ccscope/records/bench_record.h"

namespace ccscope::reports {

using records::BenchRecord;
using records::RunMetadata;

}  // namespace ccscope::reports
