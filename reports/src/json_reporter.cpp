// A JSON document {schema, complete, metadata, records}, rewritten after
// begin(), every record and end() through a temporary file renamed over the
// target, so the file on disk is always a whole, valid document: a run that
// dies leaves "complete": false and every record reported so far.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "ccscope/reports/reporter.h"

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
      {"checked", r.checked},
      {"wrong", r.wrong},
      {"record_time_utc", r.record_time_utc},
      {"repeat", r.repeat},
  };
}

class JsonReporter : public Reporter {
 public:
  explicit JsonReporter(std::string path) : path_(std::move(path)), tmp_path_(path_ + ".tmp") {
    doc_ = json{{"schema", kBenchSchema},
                {"complete", false},
                {"metadata", metadata_json(RunMetadata{})},
                {"records", json::array()}};
    // Fail now, not after the first measurement, when the place is unwritable.
    int fd = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail_writing(path_);
    ::close(fd);
    ::unlink(tmp_path_.c_str());
  }

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
    doc_["complete"] = true;
    write();
  }

 private:
  // `what` names the file; strerror(errno) is appended.
  [[noreturn]] static void fail(const std::string& what) {
    int err = errno;
    throw std::runtime_error(fmt::format("{}: {}", what, std::strerror(err)));
  }
  [[noreturn]] void fail_writing(const std::string& file) const {
    fail(file == path_ ? fmt::format("cannot write JSON file '{}'", path_)
                       : fmt::format("cannot write JSON file '{}' (via '{}')", path_, file));
  }

  void write() {
    // Invalid UTF-8 (a hostname or an environment value) is replaced, not fatal.
    std::string text = doc_.dump(2, ' ', false, json::error_handler_t::replace);
    text += '\n';
    int fd = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail_writing(tmp_path_);
    const char* p = text.data();
    size_t left = text.size();
    while (left > 0) {
      ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(fd);
        errno = err;
        fail_writing(tmp_path_);
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    // Durable before it replaces the previous version.
    if (::fsync(fd) != 0 && errno != EINVAL && errno != EROFS) {
      int err = errno;
      ::close(fd);
      errno = err;
      fail_writing(tmp_path_);
    }
    if (::close(fd) != 0) fail_writing(tmp_path_);
    if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0)
      fail(fmt::format("cannot write JSON file '{}' (renaming '{}' over it)", path_, tmp_path_));
  }

  std::string path_;
  std::string tmp_path_;
  json doc_;
};

}  // namespace

std::unique_ptr<Reporter> make_json_reporter(const std::string& path) {
  return std::make_unique<JsonReporter>(path);
}

}  // namespace ccscope::reports
