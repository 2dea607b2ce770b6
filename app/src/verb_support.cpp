#include "verb_support.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "ccscope/bench/benchmark.h"
#include "ccscope/common/text.h"

namespace ccscope::app {

int usage_error(const char* verb, const std::string& what) {
  std::fprintf(stderr, "ccscope %s: error: %s (ccscope %s --help)\n", verb, what.c_str(), verb);
  return kExitUsage;
}

int write_error(const char* verb, const std::string& what) {
  std::fprintf(stderr, "ccscope %s: error: %s\n", verb, what.c_str());
  return kExitWriteFailed;
}

int open_outputs(job::JobContext& job, const char* verb, const std::function<void()>& open) {
  int code = kExitUsage;  // rank 0's, when it refused
  const std::string error = job.open_outputs([&] {
    try {
      open();
    } catch (const reports::WriteError&) {
      code = kExitWriteFailed;
      throw;
    }
  });
  if (error.empty()) return 0;
  // Every rank saw the refusal; they learn rank 0's code together.
  const int64_t agreed = job.world().all_reduce_sum(static_cast<int64_t>(job.leader() ? code : 0));
  if (!job.leader()) return static_cast<int>(agreed);
  return agreed == kExitWriteFailed ? write_error(verb, error) : usage_error(verb, error);
}

namespace {

std::string range_text(const NumberRange& r) {
  return fmt::format("{}{}, {}{}", r.low_open ? '(' : '[', r.low, r.high, r.high_open ? ')' : ']');
}

}  // namespace

CLI::Option* add_number_option(CLI::App& app, const std::string& name, double& value,
                               const std::string& help, NumberRange range) {
  const std::string allowed = range_text(range);
  CLI::Validator check(
      [range, allowed](std::string& text) -> std::string {
        const char* begin = text.c_str();
        char* end = nullptr;
        const double v = std::strtod(begin, &end);
        if (text.empty() || end == begin || *end != '\0')
          return fmt::format("'{}' is not a number: give one in {}", text, allowed);
        if (!std::isfinite(v))
          return fmt::format("{} is not a finite number: give one in {}", text, allowed);
        const bool above_low = range.low_open ? v > range.low : v >= range.low;
        const bool below_high = range.high_open ? v < range.high : v <= range.high;
        if (!above_low || !below_high) return fmt::format("{} is outside {}", text, allowed);
        return "";
      },
      "in " + allowed);
  return app.add_option(name, value, help)->check(check);
}

CLI::Option* add_output_option(CLI::App& app, const std::string& name, std::string& path,
                               const std::string& help) {
  CLI::Validator named(
      [](std::string& text) -> std::string {
        return text.empty() ? "an empty file name: name a file, or leave the flag out" : "";
      },
      "");  // no description: the help keeps CLI11's own "TEXT", as before the check
  return app.add_option(name, path, help)->check(named);
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
  for (const auto& w : words)
    for (std::string& item : split(w, ','))
      if (!item.empty()) out.push_back(std::move(item));
  return out;
}

RowFile::~RowFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RowFile::append(const std::string& text) {
  if (!reports::write_all(fd_, text)) reports::throw_write_error(path_, errno);
}

}  // namespace ccscope::app
