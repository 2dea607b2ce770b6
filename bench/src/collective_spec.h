#pragma once
// bench's names for the collective descriptions of records/collective.h.
#include <string>

#include "ccscope/records/collective.h"

namespace ccscope::bench {

using ccscope::bus_bandwidth_factor;
using ccscope::Collective;
using ccscope::collective_choices;
using ccscope::describe;
using ccscope::Layout;
using ccscope::layout_for;
using ccscope::name;
using ccscope::parse_collective;

inline bool has_reduction(Collective collective) { return describe(collective).reduces; }
inline bool has_root(Collective collective) { return describe(collective).has_root; }
inline bool supports_in_place(Collective collective) { return describe(collective).in_place; }
inline std::string size_convention(Collective collective) {
  return std::string(describe(collective).size_convention);
}

}  // namespace ccscope::bench
