// Named baselines on disk; see baseline.h.
#include "ccscope/reports/baseline.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "ccscope/common/json_text.h"
#include "ccscope/common/utc_time.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::reports {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSidecar = "baseline.json";

json to_json(const Fingerprint& f) {
  return json{{"gpu_model", f.gpu_model},
              {"driver", f.driver},
              {"nccl_version", f.nccl_version},
              {"backend", f.backend},
              {"ranks", f.ranks},
              {"nodes", f.nodes},
              {"ranks_per_node", f.ranks_per_node}};
}

// Names become directory names: a safe alphabet, and short enough that
// DIR/NAME/FILE stays within the system's limits.
constexpr size_t kMaxNameLength = 100;

void check_name(const std::string& name) {
  bool ok = !name.empty() && name[0] != '.' && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (!ok)
    throw InputError("baseline name " + quote_name(name) +
                     ": use letters, digits, '-', '_' and '.' only (not first)");
  if (name.size() > kMaxNameLength)
    throw InputError("baseline name of " + std::to_string(name.size()) +
                     " characters: use at most " + std::to_string(kMaxNameLength));
}

[[noreturn]] void fail_at(const fs::path& path, const std::string& doing, std::error_code ec) {
  throw InputError("cannot " + doing + " " + quote_name(path.string()) + ": " + ec.message() +
                   (ec == std::errc::too_many_symbolic_link_levels ? " (a loop of symbolic links)"
                    : ec == std::errc::filename_too_long           ? " (choose a shorter --dir)"
                                                                   : ""));
}

}  // namespace

Fingerprint fingerprint_of(const LoadedRun& run) {
  const RunMetadata& m = run.metadata;
  Fingerprint f;
  std::set<std::string> gpus(m.gpu_names.begin(), m.gpu_names.end());
  for (const auto& g : gpus) f.gpu_model += (f.gpu_model.empty() ? "" : ";") + g;
  f.driver = m.driver_version;
  f.nccl_version = m.nccl_version;
  f.backend = !m.backend.empty() ? m.backend : run.records.empty() ? "" : run.records[0].backend;
  f.ranks = m.ranks;
  f.nodes = m.nodes;
  f.ranks_per_node = m.ranks_per_node;
  if (!run.records.empty()) {  // OSU and old files: what the records say
    const LoadedRecord& r = run.records[0];
    if (!f.ranks && r.ranks) f.ranks = *r.ranks;
    if (!f.nodes && r.nodes) f.nodes = *r.nodes;
    if (!f.ranks_per_node && r.ranks_per_node) f.ranks_per_node = *r.ranks_per_node;
  }
  return f;
}

std::string fingerprint_difference(const Fingerprint& a, const Fingerprint& b) {
  std::string out;
  auto text = [&](const char* what, const std::string& x, const std::string& y) {
    if (!x.empty() && !y.empty() && x != y)
      out += (out.empty() ? "" : "; ") + std::string(what) + " '" + x + "' vs '" + y + "'";
  };
  auto number = [&](const char* what, int x, int y) {
    if (x && y && x != y)
      out += (out.empty() ? "" : "; ") + std::string(what) + " " + std::to_string(x) + " vs " +
             std::to_string(y);
  };
  text("gpu_model", a.gpu_model, b.gpu_model);
  text("driver", a.driver, b.driver);
  text("nccl_version", a.nccl_version, b.nccl_version);
  text("backend", a.backend, b.backend);
  number("ranks", a.ranks, b.ranks);
  number("nodes", a.nodes, b.nodes);
  number("ranks_per_node", a.ranks_per_node, b.ranks_per_node);
  return out;
}

std::string baseline_dir(const std::string& option) {
  if (!option.empty()) return option;
  const char* env = std::getenv("CCSCOPE_BASELINE_DIR");
  return env && *env ? env : "baselines";
}

Baseline save_baseline(const std::string& dir, const std::string& name,
                       const std::vector<std::string>& files) {
  check_name(name);
  if (files.empty()) throw InputError("baseline save: no results files given");
  Baseline b;
  b.name = name;
  std::set<std::string> names;
  std::vector<std::string> contents;
  for (size_t i = 0; i < files.size(); ++i) {
    // Read once: the stored copy is exactly what was checked (also for a pipe).
    contents.push_back(read_input_file(files[i]));
    LoadedRun run = parse_results(files[i], contents.back());
    if (i == 0) b.fingerprint = fingerprint_of(run);
    std::string diff = fingerprint_difference(b.fingerprint, fingerprint_of(run));
    if (!diff.empty())
      throw InputError(printable(files[i]) + ": differs from " + printable(files[0]) + " (" + diff +
                       "); save them as separate baselines");
    std::string base = fs::path(files[i]).filename().string();
    if (base.empty() || base == "." || base == ".." || base == kSidecar) base = "results";
    if (!names.insert(base).second) base = std::to_string(i) + "-" + base;
    b.files.push_back(base);
  }
  const fs::path target = fs::path(dir) / name;
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(target, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) fail_at(target, "use", ec);
  if (fs::exists(status))
    throw InputError("baseline '" + name + "' exists in " + quote_name(dir) +
                     "; choose another name or remove " + quote_name(target.string()));
  fs::create_directories(dir, ec);
  if (ec) fail_at(dir, "create the baselines directory", ec);
  if (!fs::create_directory(target, ec)) fail_at(target, "create", ec);
  // From here on a failure removes the half-made baseline.
  try {
    for (size_t i = 0; i < files.size(); ++i)
      write_whole_file(resolve_output((target / b.files[i]).string()), contents[i]);
    b.saved_utc = utc_now_iso8601();
    json doc{{"schema", "ccscope.baseline/1"},
             {"name", name},
             {"saved_utc", b.saved_utc},
             {"files", b.files},
             {"fingerprint", to_json(b.fingerprint)}};
    write_whole_file(resolve_output((target / kSidecar).string()),
                     doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  } catch (const std::exception& e) {
    fs::remove_all(target, ec);
    throw InputError(std::string(e.what()) + " (baseline '" + name + "' not saved)");
  }
  for (auto& f : b.files) f = (target / f).string();
  return b;
}

Baseline load_baseline(const std::string& dir, const std::string& name) {
  check_name(name);
  const fs::path target = fs::path(dir) / name;
  const std::string sidecar = (target / kSidecar).string();
  std::error_code ec;
  const fs::file_status status = fs::status(sidecar, ec);
  if (ec == std::errc::no_such_file_or_directory || (!ec && !fs::exists(status)))
    throw InputError("no baseline '" + name + "' in " + quote_name(dir) + " (" +
                     quote_name(sidecar) + " missing); see ccscope baseline list");
  if (ec) fail_at(sidecar, "read", ec);
  const std::string text = read_input_file(sidecar, size_t{16} << 20);
  try {
    json doc = parse_json_text(text);
    Baseline b;
    b.name = name;
    b.saved_utc = doc.value("saved_utc", "");
    for (const auto& f : doc.at("files"))
      b.files.push_back((target / f.get<std::string>()).string());
    const json& f = doc.at("fingerprint");
    b.fingerprint.gpu_model = f.value("gpu_model", "");
    b.fingerprint.driver = f.value("driver", "");
    b.fingerprint.nccl_version = f.value("nccl_version", "");
    b.fingerprint.backend = f.value("backend", "");
    b.fingerprint.ranks = f.value("ranks", 0);
    b.fingerprint.nodes = f.value("nodes", 0);
    b.fingerprint.ranks_per_node = f.value("ranks_per_node", 0);
    return b;
  } catch (const json::exception& e) {
    throw InputError(printable(sidecar) + ": " + e.what() +
                     "; restore it or save the baseline again");
  } catch (const JsonLimitError& e) {
    throw InputError(printable(sidecar) + ": " + e.what() +
                     "; restore it or save the baseline again");
  }
}

std::vector<Baseline> list_baselines(const std::string& dir) {
  std::vector<Baseline> out;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory) return out;  // nothing saved yet
  if (ec) fail_at(dir, "list", ec);
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) fail_at(dir, "list", ec);
    // Entries that are not baselines (a stray file, a broken or looping link)
    // are skipped, not fatal.
    std::error_code entry_error;
    if (!fs::is_regular_file(it->path() / kSidecar, entry_error) || entry_error) continue;
    out.push_back(load_baseline(dir, it->path().filename().string()));
  }
  std::sort(out.begin(), out.end(),
            [](const Baseline& a, const Baseline& b) { return a.name < b.name; });
  return out;
}

}  // namespace ccscope::reports
