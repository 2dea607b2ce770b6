#include "ccscope/training_probe/data.h"

#include <cmath>
#include <stdexcept>

#include "ccscope/training_probe/model.h"

namespace ccscope::training_probe {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

float uniform_pm1(uint64_t seed, uint64_t index) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ index);
  // 24 random bits: exactly representable as float.
  return static_cast<float>(bits >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

SyntheticDataset make_teacher_dataset(size_t samples, size_t width, uint64_t seed) {
  SyntheticDataset data;
  data.samples = samples;
  data.width = width;
  data.inputs.resize(samples * width);
  for (size_t i = 0; i < data.inputs.size(); ++i) data.inputs[i] = uniform_pm1(seed, i);
  // The teacher: tanh(x A^T) B^T with A, B ~ U(-1,1) * sqrt(3 / width), so
  // that hidden units have unit variance and targets stay O(1).
  const float scale = std::sqrt(3.0f / static_cast<float>(width));
  std::vector<float> a(width * width), b(width * width), bias(width, 0.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = scale * uniform_pm1(seed + 1, i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = scale * uniform_pm1(seed + 2, i);
  std::vector<float> hidden(samples * width);
  linear_forward(data.inputs, samples, width, width, a.data(), bias.data(), hidden.data());
  for (float& h : hidden) h = std::tanh(h);
  data.targets.resize(samples * width);
  linear_forward(hidden, samples, width, width, b.data(), bias.data(), data.targets.data());
  return data;
}

std::vector<size_t> epoch_permutation(size_t samples, uint64_t seed, uint64_t epoch) {
  std::vector<size_t> order(samples);
  for (size_t i = 0; i < samples; ++i) order[i] = i;
  // Fisher-Yates from a splitmix64 stream seeded with seed + epoch.
  uint64_t state = seed + epoch;
  for (size_t i = samples; i > 1; --i) {
    state = splitmix64(state);
    const size_t j = static_cast<size_t>(state % i);
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::vector<size_t> sampler_indices(size_t samples, size_t replicas, size_t rank, uint64_t seed,
                                    uint64_t epoch) {
  if (replicas == 0 || rank >= replicas)
    throw std::invalid_argument("sampler rank must be below the number of replicas");
  std::vector<size_t> order = epoch_permutation(samples, seed, epoch);
  const size_t per_replica = (samples + replicas - 1) / replicas;
  const size_t total = per_replica * replicas;
  for (size_t i = 0; order.size() < total; ++i) order.push_back(order[i % samples]);
  std::vector<size_t> mine;
  mine.reserve(per_replica);
  for (size_t i = rank; i < total; i += replicas) mine.push_back(order[i]);
  return mine;
}

std::vector<size_t> batch_samples(size_t samples, size_t replicas, size_t rank,
                                  size_t per_rank_batch, uint64_t seed, size_t step, bool reseed) {
  const size_t per_replica = (samples + replicas - 1) / replicas;
  const size_t steps_per_epoch = per_replica / per_rank_batch;
  if (steps_per_epoch == 0)
    throw std::invalid_argument("the data set holds fewer samples than one global batch");
  const size_t epoch = step / steps_per_epoch;
  const size_t within = step % steps_per_epoch;
  const std::vector<size_t> mine =
      sampler_indices(samples, replicas, rank, seed, reseed ? epoch : 0);
  return {mine.begin() + static_cast<std::ptrdiff_t>(within * per_rank_batch),
          mine.begin() + static_cast<std::ptrdiff_t>((within + 1) * per_rank_batch)};
}

void gather_batch(const SyntheticDataset& data, std::span<const size_t> indices,
                  std::vector<float>& inputs, std::vector<float>& targets) {
  inputs.resize(indices.size() * data.width);
  targets.resize(indices.size() * data.width);
  for (size_t i = 0; i < indices.size(); ++i) {
    const auto x = data.input(indices[i]);
    const auto t = data.target(indices[i]);
    std::copy(x.begin(), x.end(), inputs.begin() + static_cast<std::ptrdiff_t>(i * data.width));
    std::copy(t.begin(), t.end(), targets.begin() + static_cast<std::ptrdiff_t>(i * data.width));
  }
}

}  // namespace ccscope::training_probe
