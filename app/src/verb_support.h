#pragma once
// What the verbs share: running CLI11 over the words after the verb, the
// one-line usage error (exit 2), comma lists of files.
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ccscope::app {

inline constexpr int kExitUsage = 2;

// "ccscope VERB: error: WHAT (ccscope VERB --help)" on stderr; returns 2.
int usage_error(const char* verb, const std::string& what);

// Runs CLI11 on `args`; returns the exit code when parsing ends the verb
// (help printed: 0; a bad flag: usage_error), nullopt to go on.
std::optional<int> parse_flags(CLI::App& app, const char* verb, std::vector<std::string> args);

// "a.csv,b.csv" and separate words alike: every non-empty item in order.
std::vector<std::string> split_commas(const std::vector<std::string>& words);

}  // namespace ccscope::app
