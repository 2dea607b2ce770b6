#pragma once
// The probe's data: a fixed random teacher network maps random inputs to
// targets, and a sampler shards the sample order per rank as PyTorch's
// DistributedSampler does (shuffle from seed + epoch, rank r takes positions
// r, r + N, r + 2N, ...), so that every rank count trains on the same global
// samples in the same order.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace ccscope::training_probe {

// Counter-based random numbers (splitmix64): the same value for the same
// (seed, index) on every rank and in every language, no state to share.
uint64_t splitmix64(uint64_t x);
// Uniform in [-1, 1) from (seed, index).
float uniform_pm1(uint64_t seed, uint64_t index);

struct SyntheticDataset {
  size_t samples = 0;
  size_t width = 0;
  std::vector<float> inputs;   // [samples x width]
  std::vector<float> targets;  // [samples x width]
  std::span<const float> input(size_t sample) const {
    return {inputs.data() + sample * width, width};
  }
  std::span<const float> target(size_t sample) const {
    return {targets.data() + sample * width, width};
  }
};
// Inputs uniform in [-1, 1); targets = tanh(x A^T) B^T of a teacher with
// fixed random A, B [width x width] drawn from `seed`.
SyntheticDataset make_teacher_dataset(size_t samples, size_t width, uint64_t seed);

// DistributedSampler(dataset, num_replicas, rank, shuffle=True, seed,
// drop_last=False) with set_epoch(epoch): the permutation of 0..samples-1 from
// (seed + epoch), padded by repeating its head to a multiple of `replicas`,
// then every `replicas`-th position from `rank`.
std::vector<size_t> epoch_permutation(size_t samples, uint64_t seed, uint64_t epoch);
std::vector<size_t> sampler_indices(size_t samples, size_t replicas, size_t rank, uint64_t seed,
                                    uint64_t epoch);

// The samples rank `rank` of `replicas` trains on at global step `step` with
// `per_rank_batch` samples each: its sampler's positions [i*b, (i+1)*b) of the
// epoch the step falls in (steps_per_epoch = samples / (replicas * b)).
// `reseed` false is a deliberate fault for the tests: the epoch is not passed
// to the sampler (set_epoch never called), so every epoch repeats epoch 0.
std::vector<size_t> batch_samples(size_t samples, size_t replicas, size_t rank,
                                  size_t per_rank_batch, uint64_t seed, size_t step,
                                  bool reseed = true);

// Copies the inputs and targets of `indices` into batch arrays.
void gather_batch(const SyntheticDataset& data, std::span<const size_t> indices,
                  std::vector<float>& inputs, std::vector<float>& targets);

}  // namespace ccscope::training_probe
