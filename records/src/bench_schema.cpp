// The bench record kind: every field of a bench CSV row / JSON record, once.
#include <string>

#include "ccscope/records/schema.h"
#include "cells.h"

namespace ccscope::records {
namespace {

using cells::cell_of;
using cells::set_from;

struct Text {
  std::string_view name, unit, meaning;
  int since = 1;
  std::string_view absent = "";
};

// A record field: BenchRecord's member and LoadedRecord's of the same meaning.
template <auto MeasuredMember, auto ReadMember, long long MinValue = 0>
BenchField record_field(const Text& t) {
  using Member = std::remove_cvref_t<decltype(std::declval<LoadedRecord&>().*ReadMember)>;
  return BenchField{
      t.name,
      t.unit,
      cells::type_of<Member>(),
      FieldScope::kRecord,
      t.since,
      t.absent,
      true,
      t.meaning,
      [](const BenchRow& row) { return cell_of(row.record.*MeasuredMember); },
      [](const LoadedBenchRow& row) { return cell_of(row.record.*ReadMember); },
      [](LoadedBenchRow& row, const Cell& c) {
        set_from<Member, MinValue>(row.record.*ReadMember, c);
      },
  };
}

// A field only readers hold (figures of other tools' files).
template <auto ReadMember>
BenchField read_only_field(const Text& t) {
  using Member = std::remove_cvref_t<decltype(std::declval<LoadedRecord&>().*ReadMember)>;
  return BenchField{
      t.name,
      t.unit,
      cells::type_of<Member>(),
      FieldScope::kRecord,
      t.since,
      t.absent,
      true,
      t.meaning,
      nullptr,
      [](const LoadedBenchRow& row) { return cell_of(row.record.*ReadMember); },
      [](LoadedBenchRow& row, const Cell& c) { set_from<Member, 0>(row.record.*ReadMember, c); },
  };
}

// A field of the run (RunMetadata), the same member on both sides.
template <auto RunMember>
BenchField run_field(const Text& t, bool in_csv = true) {
  using Member = std::remove_cvref_t<decltype(std::declval<RunMetadata&>().*RunMember)>;
  return BenchField{
      t.name,
      t.unit,
      cells::type_of<Member>(),
      FieldScope::kRun,
      t.since,
      t.absent,
      in_csv,
      t.meaning,
      [](const BenchRow& row) { return cell_of(row.run.*RunMember); },
      [](const LoadedBenchRow& row) { return cell_of(row.run.*RunMember); },
      [](LoadedBenchRow& row, const Cell& c) { set_from<Member, 0>(row.run.*RunMember, c); },
  };
}

Cell text_cell(std::string text) {
  Cell c;
  c.present = true;
  c.text = std::move(text);
  return c;
}

BenchKind make_bench_kind() {
  using R = BenchRecord;
  using L = LoadedRecord;
  using M = RunMetadata;
  BenchKind kind{"ccscope.bench", 5, {}};
  auto& f = kind.fields;
  // The schema id of the row; readers check it before any other field.
  f.push_back(BenchField{"schema", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
                         "record kind and version, ccscope.bench/N",
                         [](const BenchRow&) { return text_cell(bench_kind().schema_id()); },
                         [](const LoadedBenchRow&) { return text_cell(bench_kind().schema_id()); },
                         [](LoadedBenchRow&, const Cell&) {}});
  f.push_back(record_field<&R::collective, &L::collective>(
      {"collective", "", "allreduce, allgather, reducescatter, broadcast, alltoall, sendrecv"}));
  f.push_back(record_field<&R::backend, &L::backend>({"backend", "", "mpi, nccl or ring"}));
  f.push_back(record_field<&R::dtype, &L::dtype>({"dtype", "", "element type, nccl-tests' names"}));
  f.push_back(record_field<&R::op, &L::op>({"op", "", "reduction; none for data movement"}));
  // -1 in the file: the collective has no root.
  f.push_back(
      BenchField{"root", "", FieldType::kInteger, FieldScope::kRecord, 1, "", true,
                 "root rank; -1 when the collective has none",
                 [](const BenchRow& row) { return text_cell(std::to_string(row.record.root)); },
                 [](const LoadedBenchRow& row) {
                   return text_cell(std::to_string(row.record.root.value_or(-1)));
                 },
                 [](LoadedBenchRow& row, const Cell& c) {
                   std::optional<int> root;
                   set_from<std::optional<int>, -1>(root, c);
                   row.record.root = root && *root >= 0 ? root : std::nullopt;
                 }});
  f.push_back(
      record_field<&R::in_place, &L::in_place>({"in_place", "", "1 in place, 0 out of place"}));
  f.push_back(record_field<&R::size_bytes, &L::size_bytes>(
      {"size_bytes", "B", "message size, nccl-tests' convention for the collective"}));
  f.push_back(
      record_field<&R::count, &L::count>({"count", "elements", "count as nccl-tests prints it"}));
  f.push_back(record_field<&R::ranks, &L::ranks, 1>({"ranks", "", "ranks in the run"}));
  f.push_back(record_field<&R::nodes, &L::nodes, 1>({"nodes", "", "distinct hosts"}));
  f.push_back(record_field<&R::ranks_per_node, &L::ranks_per_node, 1>(
      {"ranks_per_node", "", "the most ranks on one host"}));
  f.push_back(
      record_field<&R::iterations, &L::iterations>({"iterations", "", "timed iterations (-n)"}));
  f.push_back(record_field<&R::warmup_iterations, &L::warmup_iterations>(
      {"warmup_iterations", "", "untimed iterations before (-w)"}));
  f.push_back(record_field<&R::time_s, &L::time_s>(
      {"time_s", "s", "time per operation, per time_statistic"}));
  // ccscope.bench/1 held a sentence; read as its token.
  f.push_back(
      BenchField{"time_statistic", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
                 "which statistic over ranks time_s is: max, avg, min, rank0",
                 [](const BenchRow& row) { return cell_of(row.record.time_statistic); },
                 [](const LoadedBenchRow& row) { return cell_of(row.record.time_statistic); },
                 [](LoadedBenchRow& row, const Cell& c) {
                   row.record.time_statistic = c.present ? time_statistic_name(c.text) : "";
                 }});
  f.push_back(
      record_field<&R::algbw_GBps, &L::algbw_GBps>({"algbw_GBps", "GB/s", "size_bytes / time_s"}));
  f.push_back(record_field<&R::busbw_GBps, &L::busbw_GBps>(
      {"busbw_GBps", "GB/s", "algbw x nccl-tests' bus factor"}));
  f.push_back(record_field<&R::rank_time_min_s, &L::time_min_s>(
      {"rank_time_min_s", "s", "min over ranks of each rank's mean time"}));
  f.push_back(record_field<&R::rank_time_avg_s, &L::time_avg_s>(
      {"rank_time_avg_s", "s", "average over ranks of each rank's mean time"}));
  f.push_back(record_field<&R::rank_time_max_s, &L::time_max_s>(
      {"rank_time_max_s", "s", "max over ranks of each rank's mean time"}));
  f.push_back(record_field<&R::iteration_time_p50_s, &L::iteration_time_p50_s>(
      {"iteration_time_p50_s", "s", "median sample of the slowest rank's iteration time"}));
  f.push_back(record_field<&R::iteration_time_p99_s, &L::iteration_time_p99_s>(
      {"iteration_time_p99_s", "s", "99th percentile sample of the same"}));
  f.push_back(
      record_field<&R::checked, &L::checked>({"checked", "", "1 when the results were checked"}));
  // An unchecked record has no wrong count (0 in files of version 1).
  f.push_back(BenchField{
      "wrong", "elements", FieldType::kInteger, FieldScope::kRecord, 1, "", true,
      "wrong elements over all ranks; empty when unchecked",
      [](const BenchRow& row) { return row.record.checked ? cell_of(row.record.wrong) : Cell{}; },
      [](const LoadedBenchRow& row) { return cell_of(row.record.wrong); },
      [](LoadedBenchRow& row, const Cell& c) {
        set_from<std::optional<int64_t>, 0>(row.record.wrong, c);
      }});
  f.push_back(
      run_field<&M::ccscope_version>({"ccscope_version", "", "ccscope that wrote the file"}));
  f.push_back(run_field<&M::git_commit>({"git_commit", "", "its commit"}));
  f.push_back(
      run_field<&M::mpi_library>({"mpi_library", "", "MPI_Get_library_version, first line"}));
  f.push_back(run_field<&M::nccl_version>({"nccl_version", "", "NCCL version; empty when unused"}));
  f.push_back(run_field<&M::cuda_version>({"cuda_version", "", "CUDA runtime version"}));
  f.push_back(run_field<&M::hosts>({"hosts", "", "host of each rank, by rank"}));
  f.push_back(run_field<&M::gpu_names>({"gpu_names", "", "device of each rank (cpu for MPI)"}));
  f.push_back(run_field<&M::environment>(
      {"environment", "",
       "NCCL_*, UCX_*, MPIR_*, OMPI_*, CCSCOPE_*, FI_*, I_MPI_*, MALLOC_*, CUDA_VISIBLE_DEVICES "
       "variables"}));
  f.push_back(run_field<&M::command_line>({"command_line", "", "the command as run"}));
  f.push_back(
      run_field<&M::start_time_utc>({"run_start_utc", "", "ISO 8601 UTC start of the run"}));
  f.push_back(record_field<&R::record_time_utc, &L::record_time_utc>(
      {"record_time_utc", "", "ISO 8601 UTC time the record was measured"}));
  f.push_back(
      record_field<&R::repeat, &L::repeat>({"repeat", "", "which --repeat sweep, 0-based"}));
  f.push_back(run_field<&M::driver_version>(
      {"driver_version", "", "NVIDIA driver; ';' between ranks that differ"}));
  f.push_back(record_field<&R::iterations_per_sample, &L::iterations_per_sample>(
      {"iterations_per_sample", "", "iterations per p50/p99 timing sample", 1, "1"}));
  f.push_back(record_field<&R::rotated, &L::rotated>(
      {"rotated", "", "1: buffer rotation as nccl-tests 2.19", 1, "0"}));
  f.push_back(record_field<&R::aggregate_iterations, &L::aggregate_iterations, 1>(
      {"aggregate_iterations", "", "operations per timed iteration (-m)", 1, "1"}));
  f.push_back(record_field<&R::graph_launches, &L::graph_launches>(
      {"graph_launches", "", "CUDA graph launches (-G); 0 = no graph", 1, "0"}));
  f.push_back(record_field<&R::time_method, &L::time_method>(
      {"time_method", "", "how time_s was measured"}));
  f.push_back(record_field<&R::check_iterations, &L::check_iterations>(
      {"check_iterations", "", "checks that ran (-c)", 1, "0"}));
  f.push_back(record_field<&R::failed_checks, &L::failed_checks>(
      {"failed_checks", "", "checks that found a wrong element", 1, "0"}));
  f.push_back(run_field<&M::backend_resources>(
      {"backend_resources", "", "what the backend used, its words"}));
  f.push_back(read_only_field<&L::cpu_time_s>(
      {"cpu_time_s", "s", "host CPU time to issue an operation (nccl-tests -C)", 2}));
  f.push_back(run_field<&M::expected_busbw_GBps>(
      {"expected_busbw_GBps", "GB/s",
       "nominal per-direction bandwidth of the slowest path the ranks use; empty when unknown",
       3}));
  f.push_back(run_field<&M::expected_path>(
      {"expected_path", "", "that path and what its figure is made of", 3}));
  f.push_back(BenchField{
      "busbw_percent_of_expected", "%", FieldType::kNumber, FieldScope::kRecord, 3, "", true,
      "busbw_GBps / expected_busbw_GBps x 100; empty when the expected figure is unknown",
      [](const BenchRow& row) {
        if (!row.run.expected_busbw_GBps || *row.run.expected_busbw_GBps <= 0) return Cell{};
        return cell_of(100.0 * row.record.busbw_GBps / *row.run.expected_busbw_GBps);
      },
      [](const LoadedBenchRow& row) { return cell_of(row.record.busbw_percent_of_expected); },
      [](LoadedBenchRow& row, const Cell& c) {
        set_from<std::optional<double>, 0>(row.record.busbw_percent_of_expected, c);
      }});
  f.push_back(run_field<&M::launch>({"launch", "",
                                     "how the job was launched: mpi, slurm, torchrun or single", 4,
                                     "not recorded"}));
  f.push_back(run_field<&M::launcher>(
      {"launcher", "", "the launcher in words (srun --mpi=pmi2, torchrun environment)", 4}));
  f.push_back(
      run_field<&M::slurm_job_id>({"slurm_job_id", "", "SLURM_JOB_ID; empty outside Slurm", 4}));
  f.push_back(
      run_field<&M::slurm_step_id>({"slurm_step_id", "", "SLURM_STEP_ID; empty outside Slurm", 4}));
  f.push_back(run_field<&M::slurm_nodelist>(
      {"slurm_nodelist", "", "the step's node list as Slurm writes it; empty outside Slurm", 4}));
  f.push_back(run_field<&M::ranks_per_process>(
      {"ranks_per_process", "", "ranks per process, each a thread (-t x -g); 1: a process per rank",
       4, "1"}));
  f.push_back(run_field<&M::rank_devices>(
      {"rank_devices", "",
       "each rank's pid, host, device and bus id (nccl-tests' '# Using devices')", 4}));
  f.push_back(record_field<&R::timing_samples, &L::timing_samples>(
      {"timing_samples", "",
       "timing samples behind the interval: timed batches (--target-ci), else the stamped pass's",
       5}));
  // Empty when there is no interval (fewer than 2 samples).
  f.push_back(BenchField{
      "ci_half_width_percent", "%", FieldType::kNumber, FieldScope::kRecord, 5, "", true,
      "half-width of the 95% confidence interval of time_s, % of time_s; empty: no interval",
      [](const BenchRow& row) {
        return row.record.ci_half_width_percent > 0 ? cell_of(row.record.ci_half_width_percent)
                                                    : Cell{};
      },
      [](const LoadedBenchRow& row) { return cell_of(row.record.ci_half_width_percent); },
      [](LoadedBenchRow& row, const Cell& c) {
        set_from<std::optional<double>, 0>(row.record.ci_half_width_percent, c);
      }});
  // Empty under fixed -n: no target to reach.
  f.push_back(BenchField{
      "target_ci_percent", "%", FieldType::kNumber, FieldScope::kRecord, 5, "", true,
      "--target-ci the size was sampled to; empty: fixed -n iterations",
      [](const BenchRow& row) {
        return row.record.target_ci_percent > 0 ? cell_of(row.record.target_ci_percent) : Cell{};
      },
      [](const LoadedBenchRow& row) { return cell_of(row.record.target_ci_percent); },
      [](LoadedBenchRow& row, const Cell& c) {
        set_from<std::optional<double>, 0>(row.record.target_ci_percent, c);
      }});
  f.push_back(BenchField{
      "converged", "", FieldType::kFlag, FieldScope::kRecord, 5, "", true,
      "1: the interval reached --target-ci before --max-seconds-per-size; empty: fixed -n",
      [](const BenchRow& row) {
        return row.record.target_ci_percent > 0 ? cell_of(row.record.converged) : Cell{};
      },
      [](const LoadedBenchRow& row) { return cell_of(row.record.converged); },
      [](LoadedBenchRow& row, const Cell& c) {
        set_from<std::optional<bool>, 0>(row.record.converged, c);
      }});
  f.push_back(
      run_field<&M::end_time_utc>({"end_time_utc", "", "ISO 8601 UTC end of the run"}, false));
  return kind;
}

}  // namespace

const BenchKind& bench_kind() {
  static const BenchKind kind = make_bench_kind();
  return kind;
}

void finish_bench_row(LoadedBenchRow& row) {
  if (row.record.checked == false) row.record.wrong.reset();
  RunMetadata& run = row.run;
  run.backend = row.record.backend;
  run.ranks = row.record.ranks.value_or(0);
  run.nodes = row.record.nodes.value_or(0);
  run.ranks_per_node = row.record.ranks_per_node.value_or(0);
}

std::vector<Cell> bench_cells(const BenchRecord& record, const RunMetadata& run) {
  const BenchRow row{record, run};
  std::vector<Cell> out;
  for (const auto& field : bench_kind().fields)
    out.push_back(field.measured ? field.measured(row) : Cell{});
  return out;
}

std::vector<Cell> bench_cells(const LoadedBenchRow& row) {
  std::vector<Cell> out;
  for (const auto& field : bench_kind().fields) out.push_back(field.get(row));
  return out;
}

std::string time_statistic_name(std::string_view text) {
  for (const char* token : {"max", "avg", "min", "rank0"})
    if (text == token) return token;
  if (text.starts_with("max over ranks")) return "max";
  if (text.starts_with("average over ranks")) return "avg";
  if (text.starts_with("min over ranks")) return "min";
  if (text.starts_with("rank 0")) return "rank0";
  return "";
}

std::string describe_time_statistic(std::string_view token) {
  if (token == "max") return "max over ranks of mean over iterations";
  if (token == "avg") return "average over ranks of mean over iterations";
  if (token == "min") return "min over ranks of mean over iterations";
  if (token == "rank0") return "rank 0's mean over iterations";
  return "statistic not recorded";
}

}  // namespace ccscope::records
