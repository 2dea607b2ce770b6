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

#include "ccscope/records/schema.h"
#include "ccscope/reports/reporter.h"
#include "ccscope/reports/user_files.h"
#include "record_json.h"

namespace ccscope::reports {
namespace {

using nlohmann::json;

// The run's fields, from the schema's table (a record's own fields are in
// each record object).
json metadata_json(const RunMetadata& m) {
  return json_object_of(records::bench_kind(), records::bench_cells(BenchRecord{}, m),
                        records::FieldScope::kRun);
}

json record_json(const BenchRecord& r, const RunMetadata& m) {
  return json_object_of(records::bench_kind(), records::bench_cells(r, m),
                        records::FieldScope::kRecord);
}

class JsonReporter : public Reporter {
 public:
  explicit JsonReporter(const std::string& path) : target_(resolve_output(path)) {
    doc_ = json{{kSchemaKey, records::bench_kind().schema_id()},
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
        throw WriteError("cannot write JSON file " + quote_name(path) + ": " +
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
    metadata_ = m;
    doc_["metadata"] = metadata_json(m);
    write();
  }

  void add(const BenchRecord& r) override {
    doc_["records"].push_back(record_json(r, metadata_));
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
      throw WriteError("cannot write JSON file " + quote_name(target_.path) + ": " +
                       std::strerror(errno ? errno : EIO));
  }

  OutputTarget target_;
  RunMetadata metadata_;
  FILE* stream_ = nullptr;
  json doc_;
  bool finished_ = false;
};

}  // namespace

std::unique_ptr<Reporter> make_json_reporter(const std::string& path) {
  return std::make_unique<JsonReporter>(path);
}

}  // namespace ccscope::reports
