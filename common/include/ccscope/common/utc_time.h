#pragma once
#include <ctime>
#include <string>

namespace ccscope {

// ISO 8601 UTC, e.g. "2026-12-01T13:31:10Z" (reentrant: gmtime_r).
std::string utc_iso8601(std::time_t when);
std::string utc_now_iso8601();

}  // namespace ccscope
