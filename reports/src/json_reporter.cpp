// A JSON document {schema, complete, metadata, records}, rewritten after
// begin(), every record and end() through a temporary file renamed over the
// target (write_whole_file), so the file on disk is always a whole, valid
// document: a run that dies leaves "complete": false and every record reported
// so far. A device or FIFO target gets the document once, at the end.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "ccscope/reports/reporter.h"
#include "ccscope/reports/user_files.h"

namespace ccscope::reports {
namespace {

using nlohmann::json;

json metadata_json(const RunMetadata& m) {
  json env = json::object();
  for (const auto& [name, value] : m.environment) env[name] = value;
  return json{
      {"ccscope_version", m.ccscope_version},
      {"git_commit", m.git_commit},
      {"backend", m.backend},
      {"mpi_library", m.mpi_library},
      {"nccl_version", m.nccl_version},
      {"cuda_version", m.cuda_version},
      {"driver_version", m.driver_version},
      {"hosts", m.hosts},
      {"gpu_names", m.gpu_names},
      {"ranks", m.ranks},
      {"nodes", m.nodes},
      {"ranks_per_node", m.ranks_per_node},
      {"environment", env},
      {"command_line", m.command_line},
      {"start_time_utc", m.start_time_utc},
      {"end_time_utc", m.end_time_utc},
      {"backend_resources", m.backend_resources},
  };
}

// The record's own fields, named as the CSV columns.
json record_json(const BenchRecord& r) {
  return json{
      {"collective", r.collective},
      {"backend", r.backend},
      {"dtype", r.dtype},
      {"op", r.op},
      {"root", r.root},
      {"in_place", r.in_place},
      {"size_bytes", r.size_bytes},
      {"count", r.count},
      {"ranks", r.ranks},
      {"nodes", r.nodes},
      {"ranks_per_node", r.ranks_per_node},
      {"iterations", r.iterations},
      {"warmup_iterations", r.warmup_iterations},
      {"time_s", r.time_s},
      {"time_statistic", r.time_statistic},
      {"algbw_GBps", r.algbw_GBps},
      {"busbw_GBps", r.busbw_GBps},
      {"rank_time_min_s", r.rank_time_min_s},
      {"rank_time_avg_s", r.rank_time_avg_s},
      {"rank_time_max_s", r.rank_time_max_s},
      {"iteration_time_p50_s", r.iteration_time_p50_s},
      {"iteration_time_p99_s", r.iteration_time_p99_s},
      {"iterations_per_sample", r.iterations_per_sample},
      {"rotated", r.rotated},
      {"aggregate_iterations", r.aggregate_iterations},
      {"graph_launches", r.graph_launches},
      {"time_method", r.time_method},
      {"checked", r.checked},
      {"wrong", r.wrong},
      {"check_iterations", r.check_iterations},
      {"failed_checks", r.failed_checks},
      {"record_time_utc", r.record_time_utc},
      {"repeat", r.repeat},
  };
}

class JsonReporter : public Reporter {
 public:
  explicit JsonReporter(const std::string& path) : target_(resolve_output(path)) {
    doc_ = json{{"schema", kBenchSchema},
                {"complete", false},
                {"metadata", metadata_json(RunMetadata{})},
                {"records", json::array()}};
    // A device or FIFO is opened now (a FIFO without a reader fails before
    // anything is measured) and written once, at the end.
    if (target_.method == WriteMethod::kInPlace) {
      const int fd = open_stream_output(target_);
      stream_ = ::fdopen(fd, "w");
      if (!stream_) {
        ::close(fd);
        throw std::runtime_error("cannot write JSON file " + quote_name(path) + ": " +
                                 std::strerror(errno));
      }
    }
  }
  ~JsonReporter() override {
    if (stream_) std::fclose(stream_);
  }
  JsonReporter(const JsonReporter&) = delete;
  JsonReporter& operator=(const JsonReporter&) = delete;

  void begin(const RunMetadata& m) override {
    doc_["metadata"] = metadata_json(m);
    write();
  }

  void add(const BenchRecord& r) override {
    doc_["records"].push_back(record_json(r));
    write();
  }

  void end(const RunMetadata& m) override {
    doc_["metadata"] = metadata_json(m);
    // A run stopped by a signal keeps "complete": false and says why.
    doc_["complete"] = m.stopped_by.empty();
    if (!m.stopped_by.empty()) doc_["stopped_by"] = m.stopped_by;
    finished_ = true;
    write();
  }

 private:
  void write() {
    if (stream_ && !finished_) return;  // a device or FIFO cannot be rewritten
    // Invalid UTF-8 (a hostname or an environment value) is replaced, not fatal.
    std::string text = doc_.dump(2, ' ', false, json::error_handler_t::replace);
    text += '\n';
    if (!stream_) {
      write_whole_file(target_, text);
      return;
    }
    FILE* stream = stream_;
    stream_ = nullptr;
    errno = 0;
    const bool written = std::fwrite(text.data(), 1, text.size(), stream) == text.size();
    if (std::fclose(stream) != 0 || !written)
      throw std::runtime_error("cannot write JSON file " + quote_name(target_.path) + ": " +
                               std::strerror(errno ? errno : EIO));
  }

  OutputTarget target_;
  FILE* stream_ = nullptr;
  json doc_;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<Reporter> make_json_reporter(const std::string& path) {
  return std::make_unique<JsonReporter>(path);
}

}  // namespace ccscope::reports
