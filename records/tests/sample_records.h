#pragma once
// A bench record and run metadata in which every field holds a value unlike
// its default, and text fields hold what CSV and JSON must quote or escape:
// commas, quotes, line breaks, tabs, non-ASCII text. Integers past 2^53 and
// 32 bits. Shared by the schema tests (records/) and the writers' and readers'
// round trips (reports/).
#include "ccscope/records/bench_record.h"

namespace ccscope::records::testing {

inline BenchRecord hostile_record() {
  BenchRecord r;
  r.collective = "broadcast";
  r.backend = "nccl";
  r.dtype = "bfloat16";
  r.op = "none";
  r.root = 5;
  r.in_place = true;
  r.size_bytes = 17179869184;
  r.count = 8589934592;
  r.ranks = 16;
  r.nodes = 2;
  r.ranks_per_node = 8;
  r.iterations = 20;
  r.warmup_iterations = 5;
  r.time_s = 1.0 / 3 * 1e-5;
  r.time_statistic = "rank0";
  r.algbw_GBps = 0.1;
  r.busbw_GBps = 2.0 / 7;
  r.rank_time_min_s = 1e-300;
  r.rank_time_avg_s = 2.5e-6;
  r.rank_time_max_s = 3.75e-6;
  r.iteration_time_p50_s = 2e-6;
  r.iteration_time_p99_s = 9.5e-6;
  r.iterations_per_sample = 7;
  r.rotated = true;
  r.aggregate_iterations = 4;
  r.graph_launches = 2;
  r.time_method = "wall clock, \"-n\" iterations\nand one sync; µs";
  r.checked = true;
  r.wrong = 9007199254740993;  // 2^53 + 1: a double would round it
  r.check_iterations = 3;
  r.failed_checks = 1;
  r.record_time_utc = "2026-12-01T13:31:10Z";
  r.repeat = 2;
  r.timing_samples = 37;
  r.ci_half_width_percent = 1.0 / 3;
  r.target_ci_percent = 2.5;
  r.converged = true;
  return r;
}

inline RunMetadata hostile_run() {
  RunMetadata m;
  m.ccscope_version = "0.1.0";
  m.git_commit = "abc123, \"dirty\"";
  m.backend = "nccl";
  m.mpi_library = "MPICH Version:\t4.0.2";
  m.nccl_version = "2.28.9";
  m.cuda_version = "13.0";
  m.driver_version = "580.65.06;575.57.08";
  m.hosts = {"node-a,1", "nœud-b", "节点"};
  m.gpu_names = {"NVIDIA H200", "NVIDIA \"H200\" SXM", "x"};
  m.environment = {{"NCCL_DEBUG", "INFO"}, {"NCCL_IB_HCA", "=mlx5_0:1,mlx5_1:1"}};
  m.command_line = "mpiexec -n 2 ccscope bench broadcast -e \"1G\"\r\nsecond line";
  m.start_time_utc = "2026-12-01T13:00:00Z";
  m.end_time_utc = "2026-12-01T13:05:00Z";
  m.backend_resources = "alloc=ncclMemAlloc, blocking=0";
  m.expected_busbw_GBps = 0.125;
  m.expected_path = "socket over eth0: 1 Gbit/s (tc shaper; line rate 10 Gbit/s), node-a,1 \"b\"";
  m.launch = "slurm";
  m.launcher = "srun (Slurm environment)";
  m.slurm_job_id = "4242";
  m.slurm_step_id = "0";
  m.slurm_nodelist = "node[0-1],gpu-a7";
  m.ranks_per_process = 4;
  m.rank_devices = {"Pid 4242 on node0 device 0 [0000:1b:00.0] NVIDIA H100 80GB HBM3",
                    "Pid 4242 on node0 device 1 [0000:2a:00.0] NVIDIA H100 80GB HBM3"};
  return m;
}

}  // namespace ccscope::records::testing
