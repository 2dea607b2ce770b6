#include "ccscope/training_probe/accounting.h"

namespace ccscope::training_probe {

std::string_view name(Strategy strategy) {
  switch (strategy) {
    case Strategy::kSingle:
      return "single";
    case Strategy::kDdp:
      return "ddp";
    case Strategy::kZero1:
      return "zero1";
    case Strategy::kZero2:
      return "zero2";
    case Strategy::kZero3:
      return "zero3";
    case Strategy::kTensor:
      return "tp";
    case Strategy::kPipeline:
      return "pp";
    case Strategy::kExpert:
      return "ep";
    case Strategy::kHybrid:
      return "3d";
  }
  return "?";
}

bool is_model_parallel(Strategy strategy) {
  return strategy == Strategy::kTensor || strategy == Strategy::kPipeline ||
         strategy == Strategy::kExpert || strategy == Strategy::kHybrid;
}

double all_reduce_bytes(size_t count, size_t ranks, size_t element_bytes) {
  if (ranks <= 1) return 0;
  const double n = static_cast<double>(ranks);
  return 2.0 * (n - 1) / n * static_cast<double>(count * element_bytes);
}

double all_gather_bytes(size_t total_count, size_t ranks, size_t element_bytes) {
  if (ranks <= 1) return 0;
  const double n = static_cast<double>(ranks);
  return (n - 1) / n * static_cast<double>(total_count * element_bytes);
}

double reduce_scatter_bytes(size_t total_count, size_t ranks, size_t element_bytes) {
  return all_gather_bytes(total_count, ranks, element_bytes);
}

double expected_bytes_per_step(Strategy strategy, size_t psi, size_t ranks, size_t element_bytes,
                               size_t micro_batches) {
  if (ranks <= 1 || strategy == Strategy::kSingle) return 0;
  const double n = static_cast<double>(ranks);
  const double m = static_cast<double>(micro_batches);
  const double volume = (n - 1) / n * static_cast<double>(psi * element_bytes);
  switch (strategy) {
    case Strategy::kZero2:
      return (m + 1) * volume;
    case Strategy::kZero3:
      return 3 * m * volume;
    default:
      return 2 * volume;
  }
}

MemoryFootprint expected_memory(Strategy strategy, size_t psi, size_t ranks, Precision precision,
                                size_t optimizer_words) {
  const double p = static_cast<double>(psi);
  const double n = static_cast<double>(ranks);
  const bool mixed = precision != Precision::kFloat32;
  const double words = static_cast<double>(optimizer_words);
  // K: float32 optimizer words, plus float32 master weights under mixed precision.
  const double k = 4.0 * (words + (mixed ? 1.0 : 0.0));
  const double element = mixed ? 2.0 : 4.0;
  MemoryFootprint m{element * p, element * p, k * p};
  if (strategy == Strategy::kSingle || strategy == Strategy::kDdp) return m;
  m.optimizer /= n;
  if (strategy == Strategy::kZero1) return m;
  m.gradients /= n;
  if (strategy == Strategy::kZero2) return m;
  m.parameters /= n;
  return m;
}

}  // namespace ccscope::training_probe
