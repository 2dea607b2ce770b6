// `ccscope diag nccl-log FILE... [--json] [--json-file FILE]`: what NCCL's
// debug output says (ranks, versions, network, transports per rank pair,
// findings). The analysis is diag's; this reads the files and prints.
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ccscope/app/verbs.h"
#include "ccscope/diag/nccl_log.h"
#include "ccscope/diag/nccl_ras.h"
#include "ccscope/reports/user_files.h"
#include "verb_support.h"

namespace ccscope::app {
namespace nccl_log_verb_detail {

constexpr const char* kVerb = "diag nccl-log";
// Larger than any debug log worth reading whole; a bigger one is refused, not swapped in.
constexpr size_t kMaxLogBytes = size_t{4} << 30;

// The whole file, binary data included (the analysis reports it); "" and
// `problem` set when it cannot be read.
std::string read_log(const std::string& path, std::string* problem) {
  if (path == "-") {
    std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    return text;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    *problem = reports::quote_name(path) + ": cannot open: " +
               (errno == ENOENT ? std::string("no such file; check the path")
                                : std::string(std::strerror(errno)));
    return {};
  }
  if (S_ISDIR(st.st_mode)) {
    *problem = reports::quote_name(path) + " is a directory: name the log files (dir/*.log)";
    return {};
  }
  if (S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) > kMaxLogBytes) {
    *problem = reports::quote_name(path) + ": larger than 4 GiB: split it (one file per rank)";
    return {};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *problem = reports::quote_name(path) + ": cannot open: " + std::strerror(errno);
    return {};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace nccl_log_verb_detail

int nccl_log_verb(const std::vector<std::string>& args, const std::vector<std::string>&) {
  namespace detail = nccl_log_verb_detail;
  const char* const verb = detail::kVerb;
  std::vector<std::string> files;
  bool json = false;
  std::string json_file;
  CLI::App app{
      "ccscope diag nccl-log: reads NCCL_DEBUG=INFO (or WARN) output of any number of ranks\n"
      "(one file with all ranks interleaved, or one per rank; launcher prefixes and other\n"
      "output may be mixed in) and reports per rank its host, device, NCCL version and how far\n"
      "init got; the network and transport of every rank pair; and findings: sockets where\n"
      "IB exists, GPUDirect RDMA off, plugins not loaded, asymmetric transports, versions or\n"
      "NCCL_* differing between ranks, virtual interfaces, WARN lines, ranks that never\n"
      "completed init, errors with their likely cause and whether the root cause is in this\n"
      "log or on another node. Exit 0 no finding above info, 1 a warn or fail finding, 2 bad\n"
      "arguments or no file readable.",
      "ccscope diag nccl-log"};
  bool ras_flag = false;
  std::string ras;
  double ras_timeout_s = 10;
  app.add_option("files", files, "NCCL debug logs ('-' for stdin)");
  app.add_flag("--ras", ras_flag,
               "also ask NCCL's RAS service (NCCL >= 2.24) of a running or hung job for its "
               "view: dead or silent processes, ranks behind (at NCCL_RAS_ADDR, else "
               "localhost:28028)");
  app.add_option("--ras-addr", ras, "the RAS service's HOST:PORT (implies --ras)");
  add_number_option(app, "--ras-timeout", ras_timeout_s,
                    "seconds the RAS query may take in all (default 10)", {1, 600});
  app.add_flag("--json", json, "the analysis as JSON (ccscope.nccl_log/1) on stdout");
  add_output_option(app, "--json-file", json_file, "also write the JSON to this file");
  if (const auto done = parse_flags(app, verb, args)) return *done;
  const bool ask_ras = ras_flag || !ras.empty();
  if (files.empty() && !ask_ras)
    return usage_error(verb, "the NCCL debug logs are required (or --ras to ask a running job's RAS service)");
  diag::NcclRasAddress ras_address;
  if (ask_ras) {
    try {
      if (!ras.empty()) {
        ras_address = diag::parse_nccl_ras_address(ras);
      } else if (const auto from_env = diag::nccl_ras_address_from_environment(
                     [](const char* name) -> std::optional<std::string> {
                       const char* v = std::getenv(name);
                       return v ? std::optional<std::string>(v) : std::nullopt;
                     })) {
        ras_address = *from_env;
      }
    } catch (const std::exception& e) {
      return usage_error(verb, std::string("--ras-addr: ") + e.what());
    }
  }

  std::vector<diag::NcclLogInput> inputs;
  for (const auto& path : files) {
    std::string problem;
    std::string text = detail::read_log(path, &problem);
    if (!problem.empty()) return usage_error(verb, problem);
    inputs.push_back({path == "-" ? std::string("<stdin>") : path, std::move(text)});
  }
  reports::OutputTarget json_target;
  if (!json_file.empty()) {
    std::vector<std::pair<std::string, std::string>> logs;
    for (const auto& path : files) logs.emplace_back("log file", path);
    try {
      json_target = reports::resolve_outputs({{"--json-file", json_file}}, logs).front();
    } catch (const std::exception& e) {
      return usage_error(verb, e.what());
    }
  }
  auto analysis = diag::analyze_nccl_logs(inputs);
  if (ask_ras) {
    for (auto& f : diag::ask_nccl_ras(
             ras_address, std::chrono::milliseconds(static_cast<long long>(ras_timeout_s * 1000))))
      analysis.findings.push_back(std::move(f));
    // Findings are listed fail first, then warn, then info.
    std::stable_sort(analysis.findings.begin(), analysis.findings.end(),
                     [](const diag::NcclLogFinding& a, const diag::NcclLogFinding& b) {
                       return static_cast<int>(a.severity) > static_cast<int>(b.severity);
                     });
  }
  const std::string json_text = json || !json_file.empty() ? diag::nccl_log_json(analysis) : "";
  if (json)
    std::fputs(json_text.c_str(), stdout);
  else
    std::fputs(diag::nccl_log_text(analysis).c_str(), stdout);
  if (!json_file.empty()) {
    try {
      reports::write_whole_file(json_target, json_text);
    } catch (const std::exception& e) {
      return write_error(verb, e.what());
    }
  }
  return diag::worst_severity(analysis) == diag::NcclSeverity::kInfo ? 0 : 1;
}

}  // namespace ccscope::app
