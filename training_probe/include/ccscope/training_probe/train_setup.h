#pragma once
// What `ccscope train` was asked for, turned into runnable options: the
// settings as words and numbers (the command layer binds its flags to them),
// their validation into TrainOptions, the model-parallel layout completed from
// the rank count, the rank counts of a scaling run and the default global batch
// rounded to them, the run ids, and the files --export writes. Pure functions:
// the command layer prints the problems they return (one line, exit 2).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ccscope/training_probe/deepspeed_config.h"
#include "ccscope/training_probe/trainer.h"

namespace ccscope::training_probe {

// The settings of `ccscope train` (its flags' defaults); names and choices
// stay words here so that the problem can quote them.
struct TrainSettings {
  std::string strategy = "ddp";
  std::string model = "mlp";  // or transformer
  size_t steps = 100;
  size_t width = 512;  // the transformer's hidden size when given (else 64)
  size_t depth = 4;    // the transformer's blocks when given (else 2)
  bool width_given = false, depth_given = false;
  // The transformer's shape, tensor parallel and recomputation.
  size_t heads = 4, seq_len = 32, vocab = 64;
  bool sequence_parallel = false;
  std::string recompute = "none";
  std::string activation = "relu";
  size_t global_batch = 128;
  bool global_batch_given = false;  // else the default is rounded to the rank count
  size_t micro_batches = 1;
  size_t samples = 0;
  std::string optimizer = "sgd";
  double lr = 0.01;
  double momentum = 0.9;
  double weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::string precision = "fp32";
  int initial_scale_power = 16;
  double bucket_mb = 25;
  bool no_overlap = false;
  bool no_prefetch = false;
  bool busy_poll = false;
  double grad_clip = 0;
  // A DeepSpeed config's name in messages ("": none); it sets the batch (the
  // caller reads the file).
  std::string deepspeed_config;
  // --backend: "" the host default (MPI, gloo without MPI); a host backend's
  // name; a device backend's (nccl): the GPU path.
  std::string backend;
  bool isolate_ranks = false;  // --isolate-ranks (the GPU path)
  bool tf32 = false;           // --tf32 (the GPU path's fp32 GEMMs)
  bool export_data = false;   // --export was given
  bool rank_records = false;  // --ranks-csv was given
  std::string offload;
  std::vector<std::string> scaling;  // rank counts as given: "1", "2", "4"
  bool weak = false;
  bool check_loss = false;
  bool check_consistency = false;
  int threads = 1;
  uint64_t seed = 1;
  double timeout_seconds = 300;
  std::string fault;  // tests: sum, sampler, bucket, clip, microbatch, tp-allreduce, expert
  // Model-parallel strategies (tp, pp, ep, 3d); 0: from the rank count.
  size_t tp = 0, pp = 0, dp = 0, ep = 0;
  std::string schedule = "1f1b";
  size_t chunks = 1;
  std::vector<size_t> stage_layers;
  int zero_stage = 0;
  size_t experts = 0;
  size_t top_k = 1;
  double capacity_factor = 1.25;
};

// This machine's memory in bytes (0 when unknown).
double physical_memory_bytes();

// Settings into options; "" or the one-line problem naming the flag. A run
// whose model and data would need more than 0.8 x `memory_bytes` per rank is
// refused (0: not checked).
std::string options_from_settings(const TrainSettings& settings, TrainOptions& options,
                                  double memory_bytes = physical_memory_bytes());

// --scaling's words as rank counts; "" or the problem.
std::string parse_rank_counts(const std::vector<std::string>& words, std::vector<size_t>& counts);

// The model's parameters (ep: with every expert).
size_t model_parameters(const TrainOptions& options);
// The data-parallel replicas of a run at `ranks` ranks, each training on its
// own samples (tensor and pipeline ranks share theirs).
size_t data_replicas(const TrainOptions& options, size_t ranks);

// "t2p1d2", or "ep4" for expert parallelism.
std::string layout_text(const TrainOptions& options);
// A run's id in its records: "ddp-n4", "ddp-n4-weak", "tp-t2p1d2-n4".
std::string run_id(const TrainOptions& options, size_t ranks, bool weak);

// The first tensor-parallel group whose ranks sit on more than one host
// ("tensor-parallel group of ranks 0, 1 spans hosts a, b"), or "".
std::string split_tensor_groups(const ParallelOptions& layout,
                                const std::vector<std::string>& hosts);

// Fills the degrees the settings left at 0 from the rank count (the named
// strategy's degree takes what the others leave); "" or the problem. `ep` is
// the --ep degree asked for (0: none).
std::string complete_layout(TrainOptions& options, size_t ranks, size_t ep);

// The default global batch rounded up so that every run divides it.
struct BatchRounding {
  size_t from = 0;
  size_t to = 0;
  size_t multiple = 0;
  std::string why;  // "ranks x micro-batches"
};

// Every run of a job: the options shared by all, the rank counts in order
// (the world's first ranks), and how they run.
struct TrainPlan {
  TrainOptions base;
  std::vector<size_t> rank_counts;
  bool weak = false;        // with --weak, each run's global batch is base's x its ranks
  bool check_loss = false;  // rank 0 trains the single-rank references first
  bool yielding_waits = true;
  std::optional<DeepSpeedConfig> deepspeed;  // what the config set, honoured and ignored
  std::string offload;  // what --offload or the config offloads (the CPU path: nothing to move)
  std::optional<BatchRounding> rounded;  // set even when `problem` follows it
  bool overlap_refused = false;          // overlap asked for, but MPI's thread level forbids it
  std::string problem;                   // "": the plan runs
};

// The options of the run at `ranks` ranks.
TrainOptions options_at(const TrainPlan& plan, size_t ranks);

// The plan of a job of `world_size` ranks for validated `base` options: the
// rank counts (`scaling`, else the world's; single: 1), the DeepSpeed config
// applied when the settings name one (`read_deepspeed` returns its text; what
// it throws passes through, and ConfigError naming the config: "deepspeed
// config NAME: line 3 ..."), the layout completed, the default batch rounded,
// every run validated; without `serialized_threads` (MPI's thread level)
// communication cannot overlap.
TrainPlan plan_runs(const TrainSettings& settings, TrainOptions base,
                    const std::vector<size_t>& scaling, size_t world_size,
                    const std::function<std::string()>& read_deepspeed = {},
                    bool serialized_threads = true);

// What rank 0 says about a plan before its runs, one "# ..." line each (without the "# "):
// the DeepSpeed config's honoured and ignored keys (`config_name` as the user gave it), an
// offload with nothing to move, the rounded default batch.
std::vector<std::string> plan_notes(const TrainPlan& plan, const std::string& config_name);

// The files --export DIR holds (what compare-with-pytorch loads; format in its
// README): initial weights, data, every step's batch, model.json.
struct ExportFile {
  std::string name;
  std::string bytes;
};
std::vector<ExportFile> export_files(const TrainOptions& options);

}  // namespace ccscope::training_probe
