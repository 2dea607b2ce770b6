#pragma once
// The one entry both fuzzers drive: the libFuzzer target (nccl_log_fuzz.cpp)
// and the seeded CTest form (diag/tests/nccl_log_test.cpp, NcclLogFuzz.*).
// analyze_nccl_logs must read any bytes: no exception, no crash, JSON that
// parses, counts that add up, findings with a code and a message.
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "ccscope/diag/nccl_log.h"

namespace ccscope::diag::nccl_log_fuzz {

// "" when the bytes were read sanely; else what went wrong.
inline std::string check_one_input(std::string_view bytes) {
  try {
    // Whole, and split in two files at the middle (one log per rank).
    const std::string text(bytes);
    const size_t half = text.size() / 2;
    for (const auto& inputs :
         {std::vector<NcclLogInput>{{"fuzz-input", text}},
          std::vector<NcclLogInput>{{"a", text.substr(0, half)}, {"b", text.substr(half)}}}) {
      const auto analysis = analyze_nccl_logs(inputs);
      if (analysis.inputs.size() != inputs.size()) return "an input summary missing";
      for (const auto& in : analysis.inputs)
        if (in.nccl_lines + in.other_lines + in.garbled_lines < in.lines ||
            in.nccl_lines > in.lines || in.other_lines > in.lines)
          return "line counts that do not add up";
      for (const auto& f : analysis.findings)
        if (f.code.empty() || f.message.empty()) return "a finding without code or message";
      for (const auto& c : analysis.communicators)
        for (const auto& l : c.links)
          if (l.from < 0 || l.to < 0 || l.transport.empty() || l.channels == 0)
            return "a link with a negative rank, no transport or no channel";
      const auto json = nlohmann::json::parse(nccl_log_json(analysis));
      if (json.at("schema") != "ccscope.nccl_log/1") return "JSON without its schema";
      if (json.at("findings").size() != analysis.findings.size()) return "JSON findings differ";
      (void)nccl_log_text(analysis);
      if (nccl_log_checks(analysis, Stage::kCluster).size() != analysis.findings.size())
        return "checks and findings differ";
    }
  } catch (const std::exception& e) {
    return std::string("an exception: ") + e.what();
  }
  return "";
}

}  // namespace ccscope::diag::nccl_log_fuzz
