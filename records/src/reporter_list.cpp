#include <stdexcept>
#include <string>

#include "ccscope/records/reporter.h"

namespace ccscope::records {

template <typename Call>
void ReporterList::for_each(const Call& call) {
  std::string errors;
  for (auto& reporter : reporters_) {
    try {
      call(*reporter);
    } catch (const std::exception& error) {
      errors += (errors.empty() ? "" : "; ") + std::string(error.what());
    }
  }
  if (!errors.empty()) throw std::runtime_error(errors);
}

void ReporterList::begin(const RunMetadata& m) {
  for_each([&](Reporter& r) { r.begin(m); });
}
void ReporterList::add(const BenchRecord& rec) {
  for_each([&](Reporter& r) { r.add(rec); });
}
void ReporterList::end(const RunMetadata& m) {
  for_each([&](Reporter& r) { r.end(m); });
}

}  // namespace ccscope::records
