#include "ccscope/common/utc_time.h"

namespace ccscope {

std::string utc_iso8601(std::time_t when) {
  std::tm utc{};
  if (gmtime_r(&when, &utc) == nullptr) return "";
  char text[64];
  const size_t length = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(text, length);
}

std::string utc_now_iso8601() { return utc_iso8601(std::time(nullptr)); }

}  // namespace ccscope
