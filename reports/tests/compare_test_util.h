#pragma once
// Helpers for the reader and compare tests: a scratch directory, ccscope result
// files written through the real writers, and file contents as text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ccscope/reports/record.h"
#include "ccscope/reports/reporter.h"

namespace ccscope::reports::testing {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "ccscope-compare-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void spit(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string data_file(const std::string& name) {
  return std::string(CCSCOPE_REPORTS_TEST_DATA) + "/" + name;
}

inline RunMetadata test_metadata(int ranks = 2) {
  RunMetadata m;
  m.ccscope_version = "0.1.0";
  m.git_commit = "abc123";
  m.backend = "mpi";
  m.mpi_library = "MPICH Version: 4.0.2";
  for (int r = 0; r < ranks; ++r) {
    m.hosts.push_back("node0");
    m.gpu_names.push_back("cpu");
  }
  m.ranks = ranks;
  m.nodes = 1;
  m.ranks_per_node = ranks;
  m.environment = {{"NCCL_DEBUG", "INFO"}, {"UCX_TLS", "tcp,self"}};
  m.command_line = "ccscope bench allreduce";
  m.start_time_utc = "2026-11-30T03:04:05Z";
  return m;
}

// An all-reduce sweep 1 KiB .. 64 MiB (x4), time = alpha + size / bandwidth,
// times scaled per size by `factor(size, repeat)`.
inline std::vector<BenchRecord> sweep(int ranks, int repeats,
                                      const std::function<double(size_t, int)>& factor) {
  std::vector<BenchRecord> out;
  for (int rep = 0; rep < repeats; ++rep)
    for (size_t size = 1024; size <= (64u << 20); size *= 4) {
      BenchRecord r;
      r.collective = "allreduce";
      r.backend = "mpi";
      r.dtype = "float";
      r.op = "sum";
      r.size_bytes = size;
      r.count = size / 4;
      r.ranks = ranks;
      r.nodes = 1;
      r.ranks_per_node = ranks;
      r.iterations = 20;
      r.time_s = (20e-6 + static_cast<double>(size) / 5e9) * factor(size, rep);
      r.time_statistic = "max";  // the slowest rank's mean over iterations
      r.algbw_GBps = static_cast<double>(size) / r.time_s / 1e9;
      r.busbw_GBps = r.algbw_GBps * 2.0 * (ranks - 1) / ranks;
      r.rank_time_min_s = r.rank_time_avg_s = r.rank_time_max_s = r.time_s;
      r.iteration_time_p50_s = r.iteration_time_p99_s = r.time_s;
      r.checked = true;
      r.repeat = rep;
      out.push_back(r);
    }
  return out;
}

// Writes records with ccscope's own CSV (".csv") or JSON (".json") writer.
inline void write_run(const std::string& path, const std::vector<BenchRecord>& records,
                      const RunMetadata& m) {
  auto reporter = path.ends_with(".json") ? make_json_reporter(path) : make_csv_reporter(path);
  reporter->begin(m);
  for (const auto& r : records) reporter->add(r);
  reporter->end(m);
}

// A test with a temporary directory of results files written by ccscope's writers.
class ResultFilesTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::vector<BenchRecord>& records,
                    const RunMetadata& m = test_metadata()) {
    write_run(dir_.file(name), records, m);
    return dir_.file(name);
  }
  TempDir dir_;
};

}  // namespace ccscope::reports::testing
