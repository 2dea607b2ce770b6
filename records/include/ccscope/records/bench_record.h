#pragma once
// Records are the only thing that crosses from measuring to reporting: one
// BenchRecord per (collective, size, in-place) plus the RunMetadata of the run,
// and, read back from any file, one LoadedRecord per row. Their fields are
// written and read through one table (schema.h), never spelled out elsewhere.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ccscope::records {

struct RunMetadata {
  std::string ccscope_version;
  std::string git_commit;
  std::string backend;       // "mpi" or "nccl"
  std::string mpi_library;   // MPI_Get_library_version, first line
  std::string nccl_version;  // "" when not used / not built
  std::string cuda_version;  // "" when not used / not built
  // NVIDIA driver version from NVML, for the NCCL backend; ranks that differ are
  // listed ";"-separated (a mixed-driver cluster). "" when unknown.
  std::string driver_version;
  std::vector<std::string> hosts;      // hostname of each rank, by rank
  std::vector<std::string> gpu_names;  // device of each rank ("cpu" for MPI)
  int ranks = 0;
  int nodes = 0;
  int ranks_per_node = 0;  // the largest number of ranks on one node
  // Every NCCL_*, UCX_*, MPIR_*, OMPI_*, CCSCOPE_* variable, sorted by name.
  std::vector<std::pair<std::string, std::string>> environment;
  std::string command_line;
  std::string start_time_utc;  // ISO 8601, e.g. 2026-11-30T03:04:05Z
  std::string end_time_utc;    // "" until the run ends
  // The signal that stopped the run early ("SIGTERM"); "" when it ran to the end.
  std::string stopped_by;
  // What the backend used, in its own words, e.g. "alloc=ncclMemAlloc,
  // alltoall=ncclAlltoAll, blocking=0"; "" when it has nothing to say (and in
  // files written before the field existed).
  std::string backend_resources;
  // The nominal per-direction bandwidth of the slowest path the run's ranks use
  // (topo's nominal-rate table), which busbw is set against; absent when no
  // source rates that path (host memory, an unknown link). And what it is.
  std::optional<double> expected_busbw_GBps;
  std::string expected_path;
  // How the job was launched: "mpi", "slurm" (srun without MPI), "torchrun"
  // (torchrun's or Kubernetes' variables) or "single", and the launcher in
  // words ("srun --mpi=pmi2"); Slurm's job id, step id and node list when
  // Slurm started it. "" in files written before the fields existed.
  std::string launch;
  std::string launcher;
  std::string slurm_job_id;
  std::string slurm_step_id;
  std::string slurm_nodelist;
  // Ranks per process, each a thread of it (-t x -g, as nccl-tests' threads
  // and GPUs per thread); 1: one rank per process (also in older files).
  int ranks_per_process = 1;
  // Each rank's process, device and bus id as nccl-tests' "# Using devices"
  // lines write them after "Rank R Group 0": "Pid 4242 on node0 device 0
  // [0000:1b:00.0] NVIDIA H100 80GB HBM3"; empty in older files.
  std::vector<std::string> rank_devices;
  // What the rows time besides the collective, in words (bench's
  // scratch_allocation_note): the console prints each as a "# " line after
  // the MPI library. Console only, not a field of the files.
  std::vector<std::string> notes;
  // NCCL_TESTS_MIN_BW (GB/s): the console's "# Avg bus bandwidth" line says OK
  // or FAILED against 90% of it, as nccl-tests; unset: nothing. Not a field of
  // the files (the exit code carries the verdict).
  std::optional<double> min_avg_busbw_GBps;
  // What nccl-tests' pre-table lines say ("# nccl-tests version",
  // "# Collective test starting", "# nThread ... unalign: 0"), so that scripts
  // parsing its header read ours: the sweep's flags as given. Console only, not
  // a field of the files (the records carry each row's own counts); unset by
  // writers other than bench (no such lines).
  struct NcclTestsParameters {
    std::string program;  // all_reduce_perf & co. (the first collective's)
    int threads = 1;      // -t
    int gpus = 1;         // -g
    size_t min_bytes = 0;
    size_t max_bytes = 0;
    size_t step_bytes = 0;
    size_t step_factor = 1;  // > 1: a factor, as nccl-tests prints "2(factor)"
    int warmup_iterations = 0;
    int iterations = 0;  // -n; 0 under adaptive sampling (a count per row)
    int aggregate_iterations = 1;
    int check_iterations = 0;  // nccl-tests' validation
    int graph_launches = 0;
  };
  std::optional<NcclTestsParameters> nccl_tests_parameters;
  // Each rank's group under NCCL_TESTS_SPLIT (nccl-tests' "Group G" in the
  // "# Using devices" lines); empty: every rank in group 0. Console only.
  std::vector<int> rank_groups;
};

struct BenchRecord {
  std::string collective;  // allreduce, allgather, reducescatter, broadcast, alltoall, sendrecv
  std::string backend;
  std::string dtype;  // nccl-tests names: float, double, half, bfloat16, int32, int8, uint8
  std::string op;     // sum, prod, min, max, avg; "none" for data movement
  int root = -1;      // -1 when the collective has no root
  bool in_place = false;
  size_t size_bytes = 0;  // nccl-tests' size convention
  size_t count = 0;       // elements, as nccl-tests prints them
  int ranks = 0;
  int nodes = 0;
  int ranks_per_node = 0;
  int iterations = 0;
  int warmup_iterations = 0;
  double time_s = 0;  // the reported time, per time_statistic
  // Which statistic over ranks time_s is: "max", "avg", "min" or "rank0"
  // (time_statistic_name); ccscope.bench/1 files held a sentence instead.
  std::string time_statistic;
  double algbw_GBps = 0;       // size_bytes / time_s / 1e9
  double busbw_GBps = 0;       // algbw x nccl-tests' factor
  double rank_time_min_s = 0;  // min/avg/max over ranks of each rank's mean
  double rank_time_avg_s = 0;
  double rank_time_max_s = 0;
  double iteration_time_p50_s = 0;  // over samples of the slowest rank's time (see below)
  double iteration_time_p99_s = 0;
  // Iterations per timing sample behind p50/p99: 1, or for operations under
  // 10 us enough consecutive iterations that a sample lasts 10 us (each sample
  // is then their mean), so that reading the clock costs well under 1%.
  size_t iterations_per_sample = 1;
  // How the timed iterations ran, as nccl-tests 2.19 runs them. Files written
  // before these fields existed read back with these defaults.
  bool rotated = false;          // buffer rotation: each timed iteration at the next
                                 // offset of the largest buffer (nccl-tests' default)
  int aggregate_iterations = 1;  // nccl-tests -m: operations per timed iteration
  int graph_launches = 0;        // nccl-tests -G: CUDA graph launches; 0 = no graph
  // How time_s was measured, e.g. "host wall clock over -n iterations + one
  // sync (nccl-tests)" or "host time to issue -n iterations (-C)"; "" = not said.
  std::string time_method;
  bool checked = false;      // correctness check ran
  int64_t wrong = 0;         // wrong elements over all ranks (0 when unchecked)
  int check_iterations = 0;  // checks that ran (nccl-tests -c N); 0 = unchecked
  int failed_checks = 0;     // of those, checks that found a wrong element on some rank
  std::string record_time_utc;
  int repeat = 0;  // which of the `bench --repeat K` sweeps (0-based): repeated samples
  // The confidence of time_s (ccscope.bench/5): timing samples behind it (timed
  // batches under --target-ci, else the stamped pass's samples), the half-width
  // of its 95% interval in % of time_s (<= 0: fewer than 2 samples, no
  // interval), the --target-ci it was measured to (0: fixed -n) and whether the
  // interval reached it before the size's time budget ran out.
  size_t timing_samples = 0;
  double ci_half_width_percent = 0;
  double target_ci_percent = 0;
  bool converged = false;
};

// A record read back from a file (ccscope's own, nccl-tests', OSU's): the
// same fields, each std::nullopt (or "") when the source did not hold it,
// never invented.
struct LoadedRecord {
  std::string source;      // "file:line" (or "file" for JSON) where the record came from
  std::string collective;  // ccscope names: allreduce, allgather, ... (nccl-tests' mapped)
  std::string backend;     // "mpi", "nccl", "ring"; "nccl" for nccl-tests, "mpi" for OSU
  std::string dtype;       // nccl-tests names (float, half, ...); "" when absent
  std::string op;          // sum, prod, ..., "none"; "" when absent
  std::optional<int> root;
  std::optional<bool> in_place;
  size_t size_bytes = 0;
  std::optional<size_t> count;
  std::optional<int> ranks;
  std::optional<int> nodes;
  std::optional<int> ranks_per_node;
  std::optional<double> time_s;
  std::optional<double> algbw_GBps;
  std::optional<double> busbw_GBps;
  std::optional<int> iterations;
  std::optional<int> warmup_iterations;
  std::optional<double> time_min_s;  // OSU min / ccscope rank_time_min_s
  std::optional<double> time_max_s;
  std::optional<double> time_avg_s;  // average over ranks of each rank's time
  // Which statistic over ranks time_s is, machine-readable: "max" (ccscope's
  // default: the slowest rank), "avg" (nccl-tests' default, OSU's "Avg
  // Latency"), "min", "rank0"; "" when the source does not say.
  std::string time_statistic;
  // Host CPU time to issue the operations (nccl-tests -C prints it in the time
  // column, -J as cpu_time): never a completion time, so never time_s.
  std::optional<double> cpu_time_s;
  std::optional<double> iteration_time_p50_s;
  std::optional<double> iteration_time_p99_s;
  std::optional<size_t> iterations_per_sample;
  std::optional<bool> checked;  // absent when the source does not say
  std::optional<int64_t> wrong;
  std::optional<int> repeat;  // sample index when a run holds repeated sweeps
  // How the timed iterations ran (BenchRecord's fields of the same names).
  // ccscope files written before these fields existed read as BenchRecord's
  // defaults (no rotation, -m 1, no graph, unchecked); other formats fill what
  // they print (nccl-tests: -m and -G) and leave the rest absent.
  std::optional<bool> rotated;
  std::optional<int> aggregate_iterations;
  std::optional<int> graph_launches;
  std::string time_method;  // "" when absent or not said
  std::optional<int> check_iterations;
  std::optional<int> failed_checks;
  std::string record_time_utc;
  // busbw_GBps / the run's expected_busbw_GBps x 100 (ccscope.bench/3).
  std::optional<double> busbw_percent_of_expected;
  // BenchRecord's confidence fields (ccscope.bench/5); absent in older files
  // and other tools' (converged and target_ci_percent also under fixed -n).
  std::optional<size_t> timing_samples;
  std::optional<double> ci_half_width_percent;
  std::optional<double> target_ci_percent;
  std::optional<bool> converged;
};

}  // namespace ccscope::records
