// The training probe's record kinds: every field of a `ccscope train --csv`
// step row and run row, once.
#include <limits>

#include "ccscope/records/training_record.h"
#include "cells.h"

namespace ccscope::records {
namespace {

// Losses (and a final loss) may be below zero for some objectives.
constexpr long long kAnyValue = std::numeric_limits<long long>::min();

template <typename R, auto Member, long long MinValue = 0>
Field<R, R> field(std::string_view name, std::string_view unit, std::string_view meaning) {
  using M = std::remove_cvref_t<decltype(std::declval<R&>().*Member)>;
  return Field<R, R>{
      name,
      unit,
      cells::type_of<M>(),
      FieldScope::kRecord,
      1,
      "",
      true,
      meaning,
      [](const R& r) { return cells::cell_of(r.*Member); },
      [](const R& r) { return cells::cell_of(r.*Member); },
      [](R& r, const Cell& c) { cells::set_from<M, MinValue>(r.*Member, c); },
  };
}

Cell schema_cell(const std::string& id) {
  Cell c;
  c.present = true;
  c.text = id;
  return c;
}

// A row's schema cell must name the kind, at a version this ccscope reads (an
// absent cell, or no schema column, is taken as the kind's).
template <typename R>
void check_schema(const RecordKind<R, R>& kind, const Cell& c) {
  if (!c.present) return;
  const int version = schema_version(c.text, kind.schema);
  if (version == 0) throw FieldError("'" + c.text + "' is not " + std::string(kind.schema) + "/N");
  if (version > kind.version)
    throw FieldError(c.text + " is newer than this ccscope reads (" + kind.schema_id() +
                     "); read it with a newer ccscope");
}

// One CSV row per record; a row with more or fewer fields than the header is
// refused (a truncated write), columns the table does not know are ignored.
template <typename R>
std::vector<R> read_csv(const RecordKind<R, R>& kind, std::string_view text) {
  const std::vector<CsvRecordLine> lines = parse_csv(text);
  std::vector<R> records;
  if (lines.empty()) return records;
  std::vector<const Field<R, R>*> columns;
  for (const std::string& name : lines.front().fields) columns.push_back(kind.find(name));
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].fields.size() != columns.size())
      throw CsvError(lines[i].line, std::to_string(lines[i].fields.size()) +
                                        " fields, the header has " +
                                        std::to_string(columns.size()) + " (truncated row?)");
    R record;
    for (size_t c = 0; c < columns.size(); ++c) {
      if (!columns[c]) continue;
      try {
        columns[c]->set(record, cell_from_csv(lines[i].fields[c], columns[c]->type));
      } catch (const FieldError& e) {
        throw CsvError(lines[i].line, std::string(columns[c]->name) + ": " + e.what());
      }
    }
    records.push_back(std::move(record));
  }
  return records;
}

template <typename R>
std::vector<Cell> cells_of(const RecordKind<R, R>& kind, const R& record) {
  std::vector<Cell> cells;
  for (const Field<R, R>& f : kind.fields) cells.push_back(f.measured(record));
  return cells;
}

}  // namespace

const TrainStepKind& train_step_kind() {
  using R = TrainStepRecord;
  static const TrainStepKind kind{
      "ccscope.train_step",
      1,
      {
          TrainStepField{"schema", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
                         "record kind and version (ccscope.train_step/1)",
                         [](const R&) { return schema_cell(train_step_kind().schema_id()); },
                         [](const R&) { return schema_cell(train_step_kind().schema_id()); },
                         [](R&, const Cell& c) { check_schema(train_step_kind(), c); }},
          field<R, &R::run_id>("run_id", "",
                               "the run the step belongs to: <strategy>-n<ranks> (+ -weak)"),
          field<R, &R::strategy>("strategy", "", "single, ddp, zero1, zero2 or zero3"),
          field<R, &R::ranks, 1>("ranks", "", "ranks of the run"),
          field<R, &R::step>("step", "", "optimizer step, from 0 (warm-up steps included)"),
          field<R, &R::loss, kAnyValue>("loss", "", "loss of the step, mean over the global batch"),
          field<R, &R::step_s>("step_s", "s", "the step's time, max over ranks"),
          field<R, &R::compute_s>("compute_s", "s",
                                  "forward, backward and optimizer time, max over ranks"),
          field<R, &R::comm_s>("comm_s", "s",
                               "run time of the step's communication operations, max over ranks"),
          field<R, &R::exposed_comm_s>(
              "exposed_comm_s", "s",
              "time the training thread waited for communication (not overlapped), max over "
              "ranks"),
          field<R, &R::bytes_sent>("bytes_sent", "B",
                                   "per rank: nccl-tests' bytes of the step's operations"),
          field<R, &R::grad_norm>("grad_norm", "",
                                  "global gradient norm before clipping; 0 when not clipping"),
          field<R, &R::loss_scale>("loss_scale", "", "fp16 loss scale of the step (1 otherwise)"),
          field<R, &R::skipped>("skipped", "",
                                "1 when an fp16 overflow skipped the step (update not applied)"),
      }};
  return kind;
}

const TrainRunKind& train_run_kind() {
  using R = TrainRunRecord;
  static const TrainRunKind kind{
      "ccscope.train_run",
      1,
      {
          TrainRunField{"schema", "", FieldType::kText, FieldScope::kRecord, 1, "", true,
                        "record kind and version (ccscope.train_run/1)",
                        [](const R&) { return schema_cell(train_run_kind().schema_id()); },
                        [](const R&) { return schema_cell(train_run_kind().schema_id()); },
                        [](R&, const Cell& c) { check_schema(train_run_kind(), c); }},
          field<R, &R::run_id>("run_id", "", "the run: <strategy>-n<ranks> (+ -weak)"),
          field<R, &R::strategy>("strategy", "", "single, ddp, zero1, zero2 or zero3"),
          field<R, &R::ranks, 1>("ranks", "", "ranks of the run"),
          field<R, &R::nodes, 1>("nodes", "", "nodes the ranks ran on"),
          field<R, &R::backend>("backend", "", "communication backend: mpi or nccl"),
          field<R, &R::precision>("precision", "", "fp32, bf16 or fp16"),
          field<R, &R::optimizer>("optimizer", "", "sgd, adam or adamw"),
          field<R, &R::width>("width", "", "the model's hidden width"),
          field<R, &R::depth>("depth", "", "the model's number of layers"),
          field<R, &R::parameters>("parameters", "", "the model's parameters (Psi)"),
          field<R, &R::global_batch>("global_batch", "", "samples per step over all ranks"),
          field<R, &R::micro_batches, 1>("micro_batches", "",
                                         "micro-batches per step (gradient accumulation)"),
          field<R, &R::steps>("steps", "", "optimizer steps run, warm-up included"),
          field<R, &R::warmup_steps>("warmup_steps", "",
                                     "first steps left out of the medians and p90"),
          field<R, &R::overlap>("overlap", "", "1 when communication overlapped the backward pass"),
          field<R, &R::prefetch>("prefetch", "",
                                 "1 when ZeRO-3 gathered the next layer's parameters ahead"),
          field<R, &R::bucket_bytes>("bucket_bytes", "B", "gradient bucket size"),
          field<R, &R::scaling>("scaling", "",
                                "strong (fixed global batch), weak (fixed per-rank batch) or "
                                "empty"),
          field<R, &R::step_median_s>("step_median_s", "s",
                                      "median step time after warm-up (per step: max over ranks)"),
          field<R, &R::step_p90_s>("step_p90_s", "s", "90th percentile step time after warm-up"),
          field<R, &R::compute_median_s>("compute_median_s", "s", "median compute time per step"),
          field<R, &R::comm_median_s>("comm_median_s", "s",
                                      "median communication run time per step"),
          field<R, &R::exposed_comm_median_s>(
              "exposed_comm_median_s", "s",
              "median time per step the training thread waited for communication"),
          field<R, &R::comm_share>("comm_share", "", "comm_median_s / step_median_s, 0..1"),
          field<R, &R::exposed_comm_share>("exposed_comm_share", "",
                                           "exposed_comm_median_s / step_median_s, 0..1"),
          field<R, &R::samples_per_s>("samples_per_s", "1/s",
                                      "global_batch / step_median_s: samples trained per second"),
          field<R, &R::bytes_per_step>("bytes_per_step", "B",
                                       "measured bytes sent per step, per rank"),
          field<R, &R::bytes_per_step_expected>(
              "bytes_per_step_expected", "B",
              "the formula's bytes per step per rank (DDP, ZeRO-1/2: 2 Psi, ZeRO-3: 3 Psi, with "
              "the ring factors)"),
          field<R, &R::memory_parameters_B>("memory_parameters_B", "B",
                                            "parameter memory held per rank"),
          field<R, &R::memory_gradients_B>("memory_gradients_B", "B",
                                           "gradient memory held per rank"),
          field<R, &R::memory_optimizer_B>("memory_optimizer_B", "B",
                                           "optimizer state memory held per rank"),
          field<R, &R::memory_parameters_expected_B>(
              "memory_parameters_expected_B", "B",
              "parameter memory per rank by the ZeRO paper's accounting"),
          field<R, &R::memory_gradients_expected_B>(
              "memory_gradients_expected_B", "B",
              "gradient memory per rank by the ZeRO paper's accounting"),
          field<R, &R::memory_optimizer_expected_B>(
              "memory_optimizer_expected_B", "B",
              "optimizer state memory per rank by the ZeRO paper's accounting"),
          field<R, &R::final_loss, kAnyValue>("final_loss", "", "loss of the last step"),
          field<R, &R::loss_max_rel_diff>(
              "loss_max_rel_diff", "",
              "largest relative difference of a step's loss from single's; empty without a "
              "reference"),
          field<R, &R::loss_tolerance>("loss_tolerance", "",
                                       "the relative difference allowed for equivalence"),
          field<R, &R::loss_equivalent>("loss_equivalent", "",
                                        "1 when loss_max_rel_diff is within loss_tolerance"),
          field<R, &R::speedup>("speedup", "",
                                "against one rank: T(1) / T(N) (strong) or N T(1) / T(N) in "
                                "samples/s (weak); ideal N"),
          field<R, &R::efficiency>("efficiency", "",
                                   "speedup / N: T(1) / (N T(N)) strong, T(1) / T(N) weak; "
                                   "ideal 1"),
      }};
  return kind;
}

std::vector<Cell> train_step_cells(const TrainStepRecord& record) {
  return cells_of(train_step_kind(), record);
}

std::vector<Cell> train_run_cells(const TrainRunRecord& record) {
  return cells_of(train_run_kind(), record);
}

std::vector<TrainStepRecord> read_train_step_csv(std::string_view text) {
  return read_csv(train_step_kind(), text);
}

std::vector<TrainRunRecord> read_train_run_csv(std::string_view text) {
  return read_csv(train_run_kind(), text);
}

}  // namespace ccscope::records
