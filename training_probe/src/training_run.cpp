// measure_run and run_plan: see ccscope/training_probe/training_run.h.
#include "ccscope/training_probe/training_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>

#include "ccscope/common/statistics.h"
#include "ccscope/job/backend_registry.h"
#include "ccscope/training_probe/model.h"
#include "ccscope/training_probe/optimizer.h"
#include "ccscope/training_probe/pipeline.h"
#include "ccscope/training_probe/reference64.h"
#include "engine.h"

namespace ccscope::training_probe {
namespace {

// A rank's record figures that are medians of its steps after warm-up.
struct MedianOfSteps {
  double records::TrainRankRecord::*field;
  double StepFigures::*step;
};
constexpr MedianOfSteps kRankMedians[] = {
    {&records::TrainRankRecord::step_median_s, &StepFigures::step_seconds},
    {&records::TrainRankRecord::tp_bytes, &StepFigures::tp_bytes},
    {&records::TrainRankRecord::pp_bytes, &StepFigures::pp_bytes},
    {&records::TrainRankRecord::dp_bytes, &StepFigures::dp_bytes},
    {&records::TrainRankRecord::ep_bytes, &StepFigures::ep_bytes},
    {&records::TrainRankRecord::pipeline_s, &StepFigures::pipeline_seconds},
    {&records::TrainRankRecord::pipeline_busy_s, &StepFigures::pipeline_busy_seconds},
    {&records::TrainRankRecord::pipeline_idle_s, &StepFigures::pipeline_wait_seconds},
    {&records::TrainRankRecord::all_to_all_s, &StepFigures::all_to_all_seconds},
    {&records::TrainRankRecord::load_imbalance, &StepFigures::load_imbalance}};

// This rank's record of a model-parallel run (the host is set on rank 0), and
// the token assignments routed and dropped over the run (all ranks' sums).
records::TrainRankRecord own_rank_record(const RunRequest& q, size_t rank,
                                         const std::vector<StepFigures>& steps, size_t warmup,
                                         const TrainResult& result, double& routed,
                                         double& dropped) {
  const TrainOptions& o = q.options;
  records::TrainRankRecord r;
  r.run_id = q.run_id;
  r.strategy = std::string(name(o.strategy));
  r.rank = static_cast<int64_t>(rank);
  // Expert parallelism is data parallelism for everything but the experts.
  const GridPosition at =
      o.strategy == Strategy::kExpert ? GridPosition{0, rank, 0} : grid_position(rank, o.parallel);
  r.tp_rank = static_cast<int64_t>(at.tp);
  r.dp_rank = static_cast<int64_t>(at.dp);
  r.stage = static_cast<int64_t>(at.pp);
  r.tp = static_cast<int64_t>(o.parallel.tp);
  r.pp = static_cast<int64_t>(o.parallel.pp);
  r.dp = static_cast<int64_t>(o.parallel.dp);
  r.schedule = std::string(name(o.parallel.schedule));
  r.chunks = static_cast<int64_t>(o.parallel.chunks);
  r.micro_batches = static_cast<int64_t>(o.micro_batches);
  for (const MedianOfSteps& m : kRankMedians) {
    std::vector<double> values;
    for (size_t i = std::min(warmup, steps.size() - 1); i < steps.size(); ++i)
      values.push_back(steps[i].*m.step);
    r.*m.field = median(values);
  }
  double peak_in_flight = 0;
  routed = dropped = 0;
  for (const StepFigures& f : steps) {
    peak_in_flight = std::max(peak_in_flight, static_cast<double>(f.peak_in_flight));
    r.peak_activation_B = std::max(r.peak_activation_B, f.peak_activation_bytes);
    routed += static_cast<double>(f.routed_tokens);
    dropped += static_cast<double>(f.dropped_tokens);
  }
  r.peak_in_flight = static_cast<int64_t>(peak_in_flight);
  r.memory_B = result.memory.total();
  // Waits for transfers and for the flush, and the transfers' own cost (the
  // textbook figure assumes that cost is 0).
  r.bubble = r.pipeline_s > 0 ? std::max(0.0, r.pipeline_s - r.pipeline_busy_s) / r.pipeline_s : 0;
  r.bubble_textbook =
      o.parallel.pp > 1 ? textbook_bubble(o.parallel.pp, o.micro_batches, o.parallel.chunks) : 0;
  r.all_to_all_share = r.step_median_s > 0 ? r.all_to_all_s / r.step_median_s : 0;
  r.dropped_share = routed > 0 ? dropped / routed : 0;
  return r;
}

// The figures of a record that cross ranks: its kind's numeric fields (whole
// numbers, numbers, flags), in the table's order, as doubles. A cell's text
// reads back to the same value (records::number_text), so nothing is rounded.
bool is_figure(records::FieldType type) {
  return type == records::FieldType::kInteger || type == records::FieldType::kNumber ||
         type == records::FieldType::kFlag;
}
template <typename Field, typename Record, typename Pick>
std::vector<double> figures_of(const std::vector<Field>& fields, const Record& record, Pick pick) {
  std::vector<double> figures;
  for (const Field& f : fields)
    if (is_figure(f.type) && pick(f))
      figures.push_back(std::strtod(f.measured(record).text.c_str(), nullptr));
  return figures;
}
template <typename Field, typename Record, typename Pick>
void set_figures(const std::vector<Field>& fields, Record& record, const double* figures,
                 Pick pick) {
  for (const Field& f : fields) {
    if (!is_figure(f.type) || !pick(f)) continue;
    records::Cell cell;
    cell.present = true;
    cell.text = f.type == records::FieldType::kNumber
                    ? records::number_text(*figures)
                    : std::to_string(static_cast<long long>(*figures));
    f.set(record, cell);
    ++figures;
  }
}
constexpr auto kEveryField = [](const auto&) { return true; };

// This rank's record of a step.
records::TrainStepRecord step_record(const RunRequest& q, const StepFigures& own) {
  records::TrainStepRecord r;
  r.run_id = q.run_id;
  r.strategy = std::string(name(q.options.strategy));
  r.ranks = static_cast<int64_t>(q.ranks);
  r.step = static_cast<int64_t>(own.step);
  r.loss = own.loss;
  r.step_s = own.step_seconds;
  r.compute_s = own.compute_seconds;
  r.comm_s = own.comm_seconds;
  r.exposed_comm_s = own.exposed_comm_seconds;
  r.bytes_sent = own.bytes_sent;
  r.grad_norm = own.grad_norm;
  r.loss_scale = own.loss_scale;
  r.skipped = own.skipped;
  return r;
}

// Agreement of a measured figure with its formula: within 1%, or within
// `slack` bytes (ZeRO's padding to a multiple of the rank count and the few
// bytes of scalar reductions, which the formulas leave out).
bool agrees(double measured, double expected, double slack) {
  return std::abs(measured - expected) <= std::max(0.01 * expected, slack);
}

}  // namespace

records::TrainStepRecord slowest_over_ranks(Communicator& comm, records::TrainStepRecord step,
                                            double& all_to_all_s) {
  const auto& fields = records::train_step_kind().fields;
  auto slowest_sets = [](const records::TrainStepField& f) {
    return f.unit == "s" || f.unit == "B";
  };
  std::vector<double> figures = figures_of(fields, step, slowest_sets);
  figures.push_back(all_to_all_s);
  comm.all_reduce(figures.data(), figures.data(), figures.size(), DataType::kFloat64,
                  ReduceOp::kMax);
  all_to_all_s = figures.back();
  set_figures(fields, step, figures.data(), slowest_sets);
  return step;
}

std::vector<records::TrainRankRecord> gather_rank_records(Communicator& comm,
                                                          const records::TrainRankRecord& own,
                                                          const std::vector<std::string>& hosts) {
  const auto& fields = records::train_rank_kind().fields;
  const std::vector<double> mine = figures_of(fields, own, kEveryField);
  const size_t k = mine.size();
  const size_t ranks = static_cast<size_t>(comm.size());
  std::vector<double> all(k * ranks);
  comm.all_gather(mine.data(), all.data(), k, DataType::kFloat64);
  std::vector<records::TrainRankRecord> gathered;
  if (comm.rank() != 0) return gathered;
  for (size_t r = 0; r < ranks; ++r) {
    records::TrainRankRecord record = own;
    record.host = hosts.at(r);
    set_figures(fields, record, all.data() + r * k, kEveryField);
    gathered.push_back(record);
  }
  return gathered;
}

std::optional<GradientCheck> check_first_gradients(const TrainOptions& options,
                                                   const TrainResult& run,
                                                   const TrainResult& single) {
  if (run.first_gradients.empty() || single.first_gradients.empty()) return std::nullopt;
  // Unit by unit (the MLP's layers, the transformer's embeddings, blocks and head): a
  // small unit's error is not drowned by a large one's norm. A layout of another size
  // (ep's mixture) is compared whole.
  std::vector<std::pair<size_t, size_t>> units;
  const std::vector<LayerSlice> slices = model_units(options);
  if (!slices.empty() && run.first_gradients.size() == slices.back().end())
    for (const LayerSlice& l : slices) units.emplace_back(l.begin(), l.end());
  GradientCheck g = compare_gradients(run.first_gradients, single.first_gradients, units,
                                      gradient_tolerance(options.precision));
  g.step = run.first_gradients_step;
  if (g.step != single.first_gradients_step) {  // fp16 skipped other steps
    g.equivalent = false;
    g.note = fmt::format("single's first applied step was {}", single.first_gradients_step);
  }
  // Clipping's norm on every rank against single's: a rank clipping by a norm
  // of its own (per shard) shows here even where clipping did not act.
  const double reference = single.first_grad_norms.second;
  if (options.grad_clip && reference > 0) {
    const auto [low, high] = run.first_grad_norms;
    const double off = std::max(std::abs(low - reference), std::abs(high - reference)) / reference;
    if (!(off <= g.tolerance)) {
      g.equivalent = false;
      g.note = fmt::format("clipping's global norm {:.4g} to {:.4g} over ranks, single's {:.4g}",
                           low, high, reference);
    }
  }
  return g;
}

namespace {

// Whether `options` run on the GPU path (--backend names a device backend).
bool on_device_path(const TrainOptions& options) {
  const job::Backend* b = options.backend.empty() ? nullptr : job::find_backend(options.backend);
  return b && b->capabilities.device == job::DeviceKind::kDevice;
}

// The GPU path's figures of a run, each the largest over its ranks: device
// memory at its highest, and the offload's per-step medians after warm-up.
struct DeviceFigures {
  double peak_bytes = 0, used_bytes = 0;
  double offload_bytes = 0, offload_copy_s = 0, host_optimizer_s = 0;
};

DeviceFigures device_figures_over_ranks(Communicator& comm, const TrainResult& result,
                                        std::span<const StepFigures> steps, size_t warmup) {
  auto median_of = [&](double StepFigures::*figure) {
    std::vector<double> values;
    for (size_t i = std::min(warmup, steps.size() - 1); i < steps.size(); ++i)
      values.push_back(steps[i].*figure);
    return median(values);
  };
  double cells[5] = {result.device_peak_bytes, result.device_used_bytes,
                     median_of(&StepFigures::offload_bytes),
                     median_of(&StepFigures::offload_copy_seconds),
                     median_of(&StepFigures::host_optimizer_seconds)};
  comm.all_reduce(cells, cells, 5, DataType::kFloat64, ReduceOp::kMax);
  return {cells[0], cells[1], cells[2], cells[3], cells[4]};
}

// This rank's tensor, pipeline and data groups of the layout's grid, each a
// communicator of `backend` made with `options` and the group's colour.
// Collective over the world.
struct GridCommunicators {
  std::unique_ptr<Communicator> tp, pp, dp;
};
GridCommunicators make_grid_communicators(const World& world, const std::string& backend,
                                          job::BackendOptions options,
                                          const ParallelOptions& layout) {
  const GroupColors colors = group_colors(static_cast<size_t>(world.rank()), layout);
  GridCommunicators g;
  options.color = colors.tp;
  g.tp = job::make_backend(backend, world, options);
  options.color = colors.pp;
  g.pp = job::make_backend(backend, world, options);
  options.color = colors.dp;
  g.dp = job::make_backend(backend, world, options);
  return g;
}

}  // namespace

RunMeasurement measure_run(const World& world, const RunRequest& q, const RunHooks& hooks) {
  const TrainOptions& options = q.options;
  const size_t ranks = q.ranks;
  RunMeasurement m;
  // The host path trains in host memory over groups of the world: --backend's host backend,
  // else the first that makes group communicators (the registry's; MPI). --backend with a
  // device backend (nccl) is the GPU path: gradients over it, spanning the world, and the
  // scalars (loss, norms, checks) over the host backend.
  const bool on_device = on_device_path(options);
  const job::Backend* backend =
      &job::group_backend(on_device ? "" : options.backend, world.channel_name() == "mpi");
  job::BackendOptions first;
  first.first_ranks = static_cast<int>(ranks);
  first.yielding_waits = q.yielding_waits;
  std::unique_ptr<Communicator> comm = job::make_backend(backend->name, world, first);
  if (!comm) return m;  // this rank sits the run out
  m.ran = true;
  m.leader = comm->rank() == 0;
  const bool model_parallel = is_model_parallel(options.strategy);
  // Model-parallel runs span the whole job: one communicator per group.
  GridCommunicators host_grid;
  if (model_parallel && options.strategy != Strategy::kExpert) {
    job::BackendOptions group;
    group.yielding_waits = q.yielding_waits;
    host_grid = make_grid_communicators(world, backend->name, group, options.parallel);
  }
  std::unique_ptr<Communicator> device_comm;
  GridCommunicators device_grid;  // the GPU path's grid: its groups' tensors over NCCL too
  job::BackendOptions device_options;
  device_options.isolate_ranks = options.isolate_ranks;
  if (on_device) device_comm = job::make_backend(options.backend, world, device_options);
  const bool expert = options.strategy == Strategy::kExpert;
  if (on_device && model_parallel && !expert)
    device_grid = make_grid_communicators(world, options.backend, device_options, options.parallel);
  if (hooks.started) hooks.started(device_comm ? *device_comm : *comm);

  std::vector<StepFigures> per_rank;  // this rank's own figures
  std::vector<double> all_to_all_s;   // the slowest rank's, per step
  auto on_step = [&](const StepFigures& own) {
    // The communication thread is idle between steps.
    double a2a = own.all_to_all_seconds;
    const records::TrainStepRecord record = slowest_over_ranks(*comm, step_record(q, own), a2a);
    per_rank.push_back(own);
    m.steps.push_back(record);
    all_to_all_s.push_back(a2a);
    if (hooks.step) hooks.step({own, record});
  };
  const ParallelGroups host_groups{comm.get(), host_grid.tp.get(), host_grid.pp.get(),
                                   host_grid.dp.get()};
  const TrainResult result =
      expert && device_comm
          ? train_expert_on_device(comm.get(), device_comm.get(), options, on_step)
      : model_parallel && device_comm
          ? train_grid_on_device(host_groups,
                                 {device_comm.get(), device_grid.tp.get(), device_grid.pp.get(),
                                  device_grid.dp.get()},
                                 options, on_step)
      : model_parallel ? train_parallel(host_groups, options, on_step)
      : device_comm    ? train_on_device(*comm, *device_comm, options, on_step)
                       : train(*comm, options, on_step);
  double memory[3] = {result.memory.parameters, result.memory.gradients, result.memory.optimizer};
  comm->all_reduce(memory, memory, 3, DataType::kFloat64, ReduceOp::kMax);
  m.memory = {memory[0], memory[1], memory[2]};
  m.warmup = std::min<size_t>(options.steps > 1 ? options.steps - 1 : 0, 5);
  m.summary =
      summarize(std::span<const records::TrainStepRecord>(m.steps), m.warmup, options.global_batch);
  if (model_parallel) {
    const records::TrainRankRecord own =
        own_rank_record(q, static_cast<size_t>(comm->rank()), per_rank, m.warmup, result,
                        m.routed_tokens, m.dropped_tokens);
    m.rank_records = gather_rank_records(*comm, own, world.hostnames());
  }
  // The GPU path's measured device memory and offload copies, the largest rank's.
  std::optional<DeviceFigures> device_figures;
  if (device_comm) device_figures = device_figures_over_ranks(*comm, result, per_rank, m.warmup);
  if (!m.leader) return m;
  for (const records::TrainRankRecord& r : m.rank_records) {
    m.largest_tp_bytes = std::max(m.largest_tp_bytes, r.tp_bytes);
    m.largest_pp_bytes = std::max(m.largest_pp_bytes, r.pp_bytes);
    m.largest_dp_bytes = std::max(m.largest_dp_bytes, r.dp_bytes);
    m.largest_ep_bytes = std::max(m.largest_ep_bytes, r.ep_bytes);
  }
  if (options.strategy == Strategy::kExpert) {
    const size_t first = std::min(m.warmup, all_to_all_s.size() - 1);
    m.all_to_all_median_s = median(std::vector<double>(
        all_to_all_s.begin() + static_cast<std::ptrdiff_t>(first), all_to_all_s.end()));
  }

  const RunSummary& s = m.summary;
  const size_t psi = result.parameters;
  m.bytes_expected = expected_bytes_per_step(
      options.strategy, psi, ranks, element_bytes(options.precision), options.micro_batches);
  if (ranks > 1)
    m.bytes_formula_factor =
        m.bytes_expected /
        std::max(1.0, all_gather_bytes(psi, ranks, element_bytes(options.precision)));
  m.memory_expected = expected_memory(options.strategy, psi, ranks, options.precision,
                                      state_words_per_parameter(options.optimizer));
  // Padding: communicated - psi elements; each moves at most 3 m times (ZeRO-3)
  // and is held in at most 4 float32 words (shard, master, optimizer state).
  const double padding = static_cast<double>(result.communicated_elements - psi);
  const double micro = static_cast<double>(options.micro_batches);
  const double bytes_slack = padding * 4 * 3 * micro + 64 * (2 + micro);
  const double memory_slack = padding * 16 + 64;
  // Model-parallel runs: per group; the ZeRO formulas are for data parallelism.
  m.bytes_ok = model_parallel || agrees(s.bytes_per_step, m.bytes_expected, bytes_slack);
  m.memory_ok = model_parallel || (agrees(memory[0], m.memory_expected.parameters, memory_slack) &&
                                   agrees(memory[1], m.memory_expected.gradients, memory_slack) &&
                                   agrees(memory[2], m.memory_expected.optimizer, memory_slack));
  m.checks_pass = m.bytes_ok && m.memory_ok;
  if (options.check_consistency) {
    const auto differs = std::find_if(result.steps.begin(), result.steps.end(),
                                      [](const StepFigures& f) { return !f.consistent; });
    if (differs != result.steps.end()) {
      m.inconsistent_after_step = differs->step;
      m.checks_pass = false;
    }
  }

  records::TrainRunRecord& r = m.run;
  r.run_id = q.run_id;
  r.strategy = std::string(name(options.strategy));
  r.ranks = static_cast<int64_t>(ranks);
  // The nodes of the run's ranks, by World's own node arithmetic.
  const std::vector<std::string> hosts(
      world.hostnames().begin(), world.hostnames().begin() + static_cast<std::ptrdiff_t>(ranks));
  r.nodes = World::from_hostnames(0, hosts).node_count();
  r.backend = device_comm ? device_comm->backend_name() : comm->backend_name();
  if (device_figures) {
    r.device_peak_B = device_figures->peak_bytes;
    r.device_used_B = device_figures->used_bytes;
    if (options.offload_optimizer) {
      // ZeRO-Offload: each rank offloads its shard, padded as the buckets are.
      const bool sharded = options.strategy == Strategy::kZero1 ||
                           options.strategy == Strategy::kZero2 ||
                           options.strategy == Strategy::kZero3;
      const double owners = sharded ? static_cast<double>(ranks) : 1.0;
      const double copy_bytes = 2.0 * static_cast<double>(element_bytes(options.precision));
      r.offload_bytes_per_step = device_figures->offload_bytes;
      // Model-parallel runs offload each rank's slice (its stage's layers, its
      // tensor shards, under ZeRO-1 its chunk of them): measured, with no
      // data-parallel formula to hold it against (as their bytes and memory).
      if (!model_parallel) {
        r.offload_bytes_expected = copy_bytes * static_cast<double>(psi) / owners;
        m.offload_ok =
            agrees(*r.offload_bytes_per_step, *r.offload_bytes_expected,
                   copy_bytes * static_cast<double>(result.communicated_elements - psi) / owners);
        m.checks_pass = m.checks_pass && m.offload_ok;
      }
      r.offload_copy_median_s = device_figures->offload_copy_s;
      r.host_optimizer_median_s = device_figures->host_optimizer_s;
    }
  }
  r.precision = std::string(name(options.precision));
  r.optimizer = std::string(name(options.optimizer.kind));
  r.width = static_cast<int64_t>(options.shape.width);
  r.depth = static_cast<int64_t>(options.shape.depth);
  r.parameters = static_cast<int64_t>(psi);
  r.global_batch = static_cast<int64_t>(options.global_batch);
  r.micro_batches = static_cast<int64_t>(options.micro_batches);
  r.steps = static_cast<int64_t>(options.steps);
  r.warmup_steps = static_cast<int64_t>(m.warmup);
  r.overlap = options.overlap;
  r.prefetch = options.prefetch;
  r.bucket_bytes = static_cast<int64_t>(options.bucket_bytes);
  r.scaling = q.one_rank_step_s > 0 || ranks == 1 ? (q.weak ? "weak" : "strong") : "";
  r.step_median_s = s.step_median_s;
  r.step_p90_s = s.step_p90_s;
  r.compute_median_s = s.compute_median_s;
  r.comm_median_s = s.comm_median_s;
  r.exposed_comm_median_s = s.exposed_comm_median_s;
  r.comm_share = s.comm_share;
  r.exposed_comm_share = s.exposed_comm_share;
  r.samples_per_s = s.samples_per_s;
  r.bytes_per_step = s.bytes_per_step;
  r.bytes_per_step_expected = model_parallel ? 0 : m.bytes_expected;
  r.memory_parameters_B = memory[0];
  r.memory_gradients_B = memory[1];
  r.memory_optimizer_B = memory[2];
  r.memory_parameters_expected_B = model_parallel ? 0 : m.memory_expected.parameters;
  r.memory_gradients_expected_B = model_parallel ? 0 : m.memory_expected.gradients;
  r.memory_optimizer_expected_B = model_parallel ? 0 : m.memory_expected.optimizer;
  r.final_loss = result.steps.back().loss;
  // A 16-bit run's losses are compared while two correct single-rank runs that
  // sum in other orders stay within a quarter of the tolerance (rounding_horizon).
  size_t horizon = SIZE_MAX;
  std::string horizon_note;
  if (q.reference && q.reordered) {
    const double tolerance = loss_tolerance(options.precision);
    const size_t h = rounding_horizon(*q.reference, *q.reordered, tolerance);
    if (h < std::min<size_t>(q.reference->size(), 100)) {
      horizon = h;
      double spread = 0;
      for (size_t i = 0; i <= h && i < q.reordered->size(); ++i)
        spread = std::max(spread, std::abs((*q.reordered)[i] - (*q.reference)[i]) /
                                      std::max(std::abs((*q.reference)[i]), 1e-30));
      horizon_note = fmt::format(
          "{}: the first {} steps; by step {} single with {} micro-batches is {:.2g} from "
          "single, over a quarter of the tolerance: rounding order, not the strategy, decides "
          "after that",
          name(options.precision), h, h, q.reordered_micro_batches, spread);
    }
  }
  if (q.reference) {
    m.equivalence = compare_losses(losses(result), *q.reference, loss_tolerance(options.precision),
                                   std::min<size_t>(100, horizon));
    if (!horizon_note.empty()) m.equivalence->note = horizon_note;
    if (device_comm) m.equivalence->reference = "single on one GPU";
    r.loss_max_rel_diff = m.equivalence->max_relative_difference;
    r.loss_tolerance = m.equivalence->tolerance;
    r.loss_equivalent = m.equivalence->equivalent;
    m.checks_pass = m.checks_pass && m.equivalence->equivalent;
  }
  if (q.single)
    if (std::optional<GradientCheck> g = check_first_gradients(options, result, *q.single)) {
      r.grad_max_rel_diff = g->max_relative_difference;
      r.loss_equivalent = r.loss_equivalent.value_or(true) && g->equivalent;
      m.checks_pass = m.checks_pass && g->equivalent;
      m.gradient_check = std::move(g);
    }
  if (q.check_reference64 && reference64_unsupported(options).empty()) {
    std::vector<bool> skipped;
    for (const StepFigures& f : result.steps) skipped.push_back(f.skipped);
    const Reference64 reference = reference64_losses(options, skipped);
    EquivalenceResult e = compare_with_reference64(losses(result), reference,
                                                   loss_tolerance(options.precision), horizon);
    if (!horizon_note.empty() && e.note.empty()) e.note = horizon_note;
    r.loss_f64_max_rel_diff = e.max_relative_difference;
    r.loss_f64_steps = static_cast<int64_t>(e.steps_compared);
    r.loss_equivalent = r.loss_equivalent.value_or(true) && e.equivalent;
    m.checks_pass = m.checks_pass && e.equivalent;
    m.equivalence64 = std::move(e);
  }
  const double t1 = ranks == 1 ? s.step_median_s : q.one_rank_step_s;
  if (t1 > 0) {
    m.scaling = scaling(t1, s.step_median_s, ranks, q.weak);
    r.speedup = m.scaling->speedup;
    r.efficiency = m.scaling->efficiency;
  }
  return m;
}

bool run_plan(const World& world, const TrainPlan& plan, const PlanHooks& hooks) {
  const bool leader = world.rank() == 0;
  // The single-rank references (by global batch), computed on rank 0 while the others wait;
  // for a 16-bit run also the reordered one (more micro-batches: another summation order).
  std::map<size_t, std::shared_ptr<const TrainResult>> references;
  std::map<size_t, std::pair<std::vector<double>, size_t>> reordered;
  if (plan.check_loss && leader) {
    for (size_t k : plan.rank_counts) {
      TrainOptions o = options_at(plan, k);
      o.capture_first_gradients = true;
      if (references.count(o.global_batch)) continue;
      auto single_of = [](const TrainOptions& x) {
        return on_device_path(x)               ? train_single_on_device(x)
               : is_model_parallel(x.strategy) ? train_parallel_single(x)
                                               : train_single(x);
      };
      references[o.global_batch] = std::make_shared<const TrainResult>(single_of(o));
      if (o.precision == Precision::kFloat32) continue;
      // The references' own micro-batches: a model-parallel one's are reference_micro_batches.
      const bool parallel_reference =
          is_model_parallel(o.strategy) && (o.strategy == Strategy::kExpert || !on_device_path(o));
      const size_t own = parallel_reference ? o.reference_micro_batches : o.micro_batches;
      if (const std::optional<size_t> m = reordered_micro_batches(o.global_batch, own)) {
        TrainOptions v = o;
        v.capture_first_gradients = false;
        v.micro_batches = v.reference_micro_batches = *m;
        reordered[o.global_batch] = {losses(single_of(v)), *m};
      }
    }
  }
  // Ranks sitting a run out wait as long as a run may last: every step's
  // waits are bounded by the timeout (the watchdog names a stuck rank).
  const auto run_bound = plan.base.timeout * static_cast<long long>(plan.base.steps + 2);
  if (plan.check_loss)
    world.sleeping_barrier(run_bound * static_cast<long long>(plan.rank_counts.size()));
  bool pass = true;
  double one_rank_step_s = 0;
  for (size_t k : plan.rank_counts) {
    RunRequest q;
    q.options = options_at(plan, k);
    q.options.capture_first_gradients = plan.check_loss;  // every rank: the gather is collective
    q.ranks = k;
    q.weak = plan.weak;
    q.yielding_waits = plan.yielding_waits;
    q.run_id = run_id(q.options, k, plan.weak);
    if (auto it = references.find(q.options.global_batch); it != references.end()) {
      q.reference = losses(*it->second);
      q.single = it->second;
    }
    if (auto it = reordered.find(q.options.global_batch); it != reordered.end()) {
      q.reordered = it->second.first;
      q.reordered_micro_batches = it->second.second;
    }
    q.check_reference64 = plan.check_loss && leader;
    q.one_rank_step_s = one_rank_step_s;
    RunHooks run_hooks;
    if (hooks.started) run_hooks.started = [&](const Communicator& c) { hooks.started(q, c); };
    if (hooks.step) run_hooks.step = [&](const StepReport& step) { hooks.step(q, step); };
    const RunMeasurement m = measure_run(world, q, run_hooks);
    if (m.ran && hooks.finished) hooks.finished(q, m);
    if (m.ran && m.leader) {
      if (k == 1) one_rank_step_s = m.summary.step_median_s;
      pass = pass && m.checks_pass;
    }
    world.sleeping_barrier(run_bound);
  }
  return pass;
}

}  // namespace ccscope::training_probe
