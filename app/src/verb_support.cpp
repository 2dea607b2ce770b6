#include "verb_support.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "ccscope/bench/benchmark.h"

namespace ccscope::app {

int usage_error(const char* verb, const std::string& what) {
  std::fprintf(stderr, "ccscope %s: error: %s (ccscope %s --help)\n", verb, what.c_str(), verb);
  return kExitUsage;
}

std::optional<int> parse_flags(CLI::App& app, const char* verb, std::vector<std::string> args) {
  std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    // Under a launcher every rank parses: rank 0 alone speaks.
    if (bench::launcher_says_rank_zero()) std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    return bench::launcher_says_rank_zero() ? usage_error(verb, e.what()) : kExitUsage;
  }
  return std::nullopt;
}

std::vector<std::string> split_commas(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  for (const auto& w : words) {
    size_t start = 0;
    for (size_t p; (p = w.find(',', start)) != std::string::npos; start = p + 1)
      if (p > start) out.push_back(w.substr(start, p - start));
    if (start < w.size()) out.push_back(w.substr(start));
  }
  return out;
}

RowFile::~RowFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RowFile::append(const std::string& text) {
  if (!reports::write_all(fd_, text))
    throw std::runtime_error("cannot write a row: " + std::string(std::strerror(errno)));
}

}  // namespace ccscope::app
